// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The targets (targets.bpf.h declares them for every program), and the
 * programs that keep the followed ones current: `ember record -- CMD`
 * makes the children of its targets targets as they fork, and forgets each
 * as it exits. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "record.bpf.h"
#include "targets.bpf.h"

const volatile bool filter_pids = false;
const volatile bool filter_tids = false;
const volatile __u32 target_cgroup_count = 0;
/* Set by the collector before load: children of targets become targets. */
const volatile bool follow_forks = false;

struct target_pids_map target_pids SEC(".maps");
struct target_tids_map target_tids SEC(".maps");
struct target_cgroups_map target_cgroups SEC(".maps");

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
		COUNT(targets_full);
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
