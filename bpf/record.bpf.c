// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The definitions of what record.bpf.h declares for every event program
 * (explained there), and its two global functions, which claim and release
 * a scratch slot.
 *
 * Why the programs stream records through a ring buffer and not aggregate
 * in the kernel: BPF_MAP_TYPE_STACK_TRACE hashes stacks into buckets and
 * silently reuses ids on collision, and a hash map keyed by the stack
 * itself cannot hold our stacks (hash map keys are capped at MAX_BPF_STACK
 * = 512 bytes, i.e. 64 frames for kernel + user together, far below the
 * 2 x 127 frames we sample). Streaming costs one variable-size record per
 * sample (about 300 bytes on a typical stack, 2 KB at 999 Hz x 2 CPUs is
 * ~4 MB/s at worst) and lets the collector deduplicate exactly. */
#include "record.bpf.h"

/* The whole linked object's: one license section is enough. */
char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u64 wakeup_bytes = 0;
const volatile __u32 kernel_walk_bytes = EMBER_MAX_STACK_DEPTH * sizeof(__u64);

bool armed = false;  /* set once every program is attached, cleared at the stop */
__u32 seen_generation = 0;

struct counters_map counters SEC(".maps");
struct samples_map samples SEC(".maps");
struct seen_pids_map seen_pids SEC(".maps");
struct last_sent_map last_sent SEC(".maps");
struct scratch_map scratch SEC(".maps");

const volatile bool task_by_reads = false;
const volatile __u32 kernel_stack_size = 16384;

/* How many programs on this CPU claim or hold each slot. */
struct slot_claims {
	__u64 count[EMBER_SCRATCH_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slot_claims);
} scratch_claims SEC(".maps");

/* A slot is claimed by adding 1 to its count and then finding 1 there:
 * only the claimer's own addition (a program that interrupted or preempted
 * it in between has taken its own back, or holds the slot, and then this
 * claimer sees 2). A claimer that sees more takes its 1 back and tries the
 * next slot. Atomic adds without fetch: Linux 5.10 has no other atomic
 * operation, and rejects the instructions of others even where they would
 * never run. */
__noinline int ember_claim_scratch(void)
{
	__u32 zero = 0, i;
	struct slot_claims *claims = bpf_map_lookup_elem(&scratch_claims, &zero);

	if (!claims)
		return -1;
	for (i = 0; i < EMBER_SCRATCH_SLOTS; i++) {
		__sync_fetch_and_add(&claims->count[i], 1);
		if (*(volatile __u64 *)&claims->count[i] == 1)
			return i;
		__sync_fetch_and_add(&claims->count[i], -1);
	}
	COUNT(scratch_busy);
	return -1;
}

__noinline int ember_release_scratch(__u32 slot)
{
	__u32 zero = 0;
	struct slot_claims *claims = bpf_map_lookup_elem(&scratch_claims, &zero);

	if (!claims || slot >= EMBER_SCRATCH_SLOTS)
		return 0;
	/* The verifier follows the mask on the register indexed with, which
	 * the compiler may not have checked: it keeps the mask. */
	barrier_var(slot);
	__sync_fetch_and_add(&claims->count[slot & (EMBER_SCRATCH_SLOTS - 1)], -1);
	return 0;
}
