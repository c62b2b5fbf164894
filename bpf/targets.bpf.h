/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Which tasks are profiled: the test every event program applies to the
 * current task (in_scope), and the target maps and switches it reads,
 * defined in targets.bpf.c (joined by the linker, as in record.bpf.h).
 * BPF only. */
#ifndef EMBER_TARGETS_BPF_H
#define EMBER_TARGETS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "profile.h"

/* Set by the collector before load. */
extern const volatile bool filter_pids;   /* only tgids in target_pids */
extern const volatile bool filter_tids;   /* only tids in target_tids */
/* --cgroup: only tasks in the first target_cgroup_count cgroups of
 * target_cgroups, or below them. */
extern const volatile __u32 target_cgroup_count;

struct target_pids_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024); /* resized by the collector */
	__type(key, __u32);
	__type(value, __u8);
};
extern struct target_pids_map target_pids SEC(".maps");

struct target_tids_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
};
extern struct target_tids_map target_tids SEC(".maps");

/* A task's cgroup is tested by the kernel's own ancestry check (a level
 * compare and one load, bpf_current_task_under_cgroup, Linux 4.9) rather
 * than by walking the task's cgroup ancestors through BTF: the task tested
 * is always the current one (sampled, switching out, allocating). The
 * woken task of sched_waking is not, but it has a block open only if it
 * was a target as it switched out. */
struct target_cgroups_map {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, EMBER_MAX_CGROUPS); /* resized by the collector */
	__type(key, __u32);
	__type(value, __u32);
};
extern struct target_cgroups_map target_cgroups SEC(".maps");

static __always_inline bool in_target_cgroups(void)
{
	for (__u32 i = 0; i < EMBER_MAX_CGROUPS && i < target_cgroup_count; i++)
		if (bpf_current_task_under_cgroup(&target_cgroups, i) == 1)
			return true;
	return false;
}

/* Whether the current task, `pid` and `tid`, is a target. */
static __always_inline bool in_scope(__u32 pid, __u32 tid)
{
	if (filter_pids && !bpf_map_lookup_elem(&target_pids, &pid))
		return false;
	if (filter_tids && !bpf_map_lookup_elem(&target_tids, &tid))
		return false;
	if (target_cgroup_count && !in_target_cgroups())
		return false;
	return true;
}

#endif
