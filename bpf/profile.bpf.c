// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* CPU sampling: runs on every tick of a per-CPU perf event (cpu-clock or
 * cycles) and streams the interrupted task's kernel and user stacks to
 * userspace through a ring buffer.
 *
 * Why a ring buffer and not in-kernel aggregation: BPF_MAP_TYPE_STACK_TRACE
 * hashes stacks into buckets and silently reuses ids on collision, and a
 * hash map keyed by the stack itself cannot hold our stacks (hash map keys
 * are capped at MAX_BPF_STACK = 512 bytes, i.e. 64 frames for kernel + user
 * together, far below the 2 x 127 frames we sample). Streaming costs one
 * variable-size record per sample (about 300 bytes on a typical stack,
 * 2 KB at 999 Hz x 2 CPUs is ~4 MB/s at worst) and lets the collector
 * deduplicate exactly. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "profile.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the collector before load. */
const volatile bool filter_pids = false;   /* only tgids in target_pids */
const volatile bool filter_tids = false;   /* only tids in target_tids */
const volatile bool include_idle = false;  /* sample the idle task (pid 0) */
const volatile bool follow_forks = false;  /* children of targets become targets */
/* Wake the collector only once this much is queued: a wakeup per sample
 * costs a context switch per sample (the collector also polls on a timer). */
const volatile __u64 wakeup_bytes = 0;

/* Read by the collector at the end; every lost sample is counted. */
__u64 samples_seen = 0;   /* samples that passed the filters */
__u64 samples_lost = 0;   /* ring buffer full */
__u64 samples_idle = 0;   /* idle task samples, dropped unless include_idle */
__u64 targets_full = 0;   /* children not followed: target_pids full */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the collector */
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* resized by the collector */
	__type(key, __u32);
	__type(value, __u8);
} target_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} target_tids SEC(".maps");

/* Processes seen lately, with the start of their name. The first sample of
 * a process, and the first after it execs (its name changes), wakes the
 * collector at once, so it reads the new mappings while the process still
 * runs: a 50 ms compiler job would be gone by the next timed poll. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} seen_pids SEC(".maps");

/* Records are too large for the 512-byte BPF stack: build them here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ember_sample);
} scratch SEC(".maps");

static __always_inline long frames(long bytes)
{
	return bytes > 0 ? bytes / sizeof(__u64) : 0;
}

SEC("perf_event")
int ember_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct task_struct *task;
	struct ember_sample *s;
	__u32 zero = 0;
	long ulen, klen, n;
	__u64 wakeup;

	if (tid == 0) {
		__sync_fetch_and_add(&samples_idle, 1);
		if (!include_idle)
			return 0;
	}
	if (filter_pids && !bpf_map_lookup_elem(&target_pids, &pid))
		return 0;
	if (filter_tids && !bpf_map_lookup_elem(&target_tids, &tid))
		return 0;
	__sync_fetch_and_add(&samples_seen, 1);

	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	s->time_ns = bpf_ktime_get_ns();
	s->pid = pid;
	s->tid = tid;
	s->cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	task = (struct task_struct *)bpf_get_current_task();
	BPF_CORE_READ_STR_INTO(&s->process_comm, task, group_leader, comm);

	n = bpf_get_stack(ctx, s->ips, EMBER_MAX_STACK_DEPTH * sizeof(__u64), BPF_F_USER_STACK);
	ulen = frames(n);
	if (ulen > EMBER_MAX_STACK_DEPTH)
		ulen = EMBER_MAX_STACK_DEPTH;

	n = bpf_get_stack(ctx, &s->ips[ulen], EMBER_MAX_STACK_DEPTH * sizeof(__u64), 0);
	klen = frames(n);
	if (klen > EMBER_MAX_STACK_DEPTH)
		klen = EMBER_MAX_STACK_DEPTH;

	s->ustack_len = ulen;
	s->kstack_len = klen;
	wakeup = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		wakeup = BPF_RB_FORCE_WAKEUP;
	if (pid) {
		__u64 name = *(__u64 *)s->process_comm;
		__u64 *seen = bpf_map_lookup_elem(&seen_pids, &pid);

		if (!seen || *seen != name) {
			bpf_map_update_elem(&seen_pids, &pid, &name, BPF_ANY);
			wakeup = BPF_RB_FORCE_WAKEUP;
		}
	}
	if (bpf_ringbuf_output(&samples, s, EMBER_SAMPLE_HEADER_SIZE + (ulen + klen) * sizeof(__u64), wakeup))
		__sync_fetch_and_add(&samples_lost, 1);
	return 0;
}

/* Makes the children of profiled processes (`ember record -- CMD`)
 * targets from their first instruction. Also fires for new threads, whose
 * tgid is already a target. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ember_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (follow_forks && ppid != cpid && bpf_map_lookup_elem(&target_pids, &ppid) &&
	    bpf_map_update_elem(&target_pids, &cpid, &one, BPF_ANY))
		__sync_fetch_and_add(&targets_full, 1);
	return 0;
}

/* Forgets a followed process when its last thread exits, so the table
 * holds live processes only and a recycled pid is not mistaken for one. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ember_forget_exit, struct task_struct *task)
{
	__u32 pid = BPF_CORE_READ(task, tgid);

	if (BPF_CORE_READ(task, signal, live.counter) == 0)
		bpf_map_delete_elem(&target_pids, &pid);
	return 0;
}
