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

bool armed = false;
__u32 seen_generation = 0;

struct counters_map counters SEC(".maps");
struct samples_map samples SEC(".maps");
struct seen_pids_map seen_pids SEC(".maps");
struct last_sent_map last_sent SEC(".maps");
struct scratch_map scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} scratch_taken SEC(".maps");  /* bit i: slot i is being built in on this CPU */

__noinline int ember_claim_scratch(void)
{
	__u32 zero = 0, i;
	__u64 *taken = bpf_map_lookup_elem(&scratch_taken, &zero);

	if (!taken)
		return -1;
	for (i = 0; i < SCRATCH_SLOTS; i++)
		if (!(__sync_fetch_and_or(taken, 1ull << i) & (1ull << i)))
			return i;
	COUNT(scratch_busy);
	return -1;
}

__noinline int ember_release_scratch(__u32 slot)
{
	__u32 zero = 0;
	__u64 *taken = bpf_map_lookup_elem(&scratch_taken, &zero);

	if (taken && slot < SCRATCH_SLOTS)
		__sync_fetch_and_and(taken, ~(1ull << slot));
	return 0;
}
