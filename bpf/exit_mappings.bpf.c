// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The executable file mappings of each sampled process, sent through their
 * own ring buffer as it exits (its memory map is still intact then), so a
 * process that lived only a few milliseconds is still symbolized. Sampled:
 * in seen_pids (record.bpf.h), which the process leaves here. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "record.bpf.h"

/* Mappings of sampled processes as they exit (struct ember_mapping, 1.1 KiB
 * each): room for the exits of some 400 processes of five mappings between
 * two reads of the collector, which each record wakes. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 << 20);
} exits SEC(".maps");

/* Open-coded VMA iterator (Linux 6.7+); the collector loads
 * ember_exit_mappings only where the kernel has it and bpf_loop (5.17+). */
extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task, __u64 addr) __weak __ksym;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __weak __ksym;
#define VM_EXEC 0x00000004

/* A mapping record is built here, then copied into the ring buffer. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ember_mapping);
} mapping_scratch SEC(".maps");

/* One step up a file's path: a dentry name, or a hop from a mount's root to
 * where it is mounted. Pointers are plain numbers here (read with
 * bpf_probe_read_kernel): one bpf_loop callback keeps the verifier's work
 * small, where an unrolled walk inside the VMA loop exceeds its limit. */
struct path_walk {
	__u64 dentry;  /* struct dentry * */
	__u64 mount;   /* struct mount * */
};

static long path_step(__u32 i, struct path_walk *w)
{
	struct dentry *d = (struct dentry *)w->dentry;
	struct mount *mnt = (struct mount *)w->mount;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	struct ember_mapping *m;
	__u32 zero = 0;

	if (d == BPF_CORE_READ(mnt, mnt.mnt_root) || d == parent) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

		if (up == mnt)
			return 1; /* the namespace's root */
		w->dentry = (__u64)BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mount = (__u64)up;
		return 0;
	}
	m = bpf_map_lookup_elem(&mapping_scratch, &zero);
	if (!m || m->path_parts >= EMBER_PATH_PARTS)
		return 1;
	bpf_probe_read_kernel_str(m->path[m->path_parts & (EMBER_PATH_PARTS - 1)], EMBER_PATH_PART_LEN,
				  BPF_CORE_READ(d, d_name.name));
	m->path_parts++;
	w->dentry = (__u64)parent;
	return 0;
}

/* As a sampled process exits, sends its executable file mappings. Since
 * Linux 6.16 sched_process_exit fires before the memory map is torn down
 * (before that, the iterator finds no mappings and nothing is sent). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ember_exit_mappings, struct task_struct *task)
{
	__u32 pid = BPF_CORE_READ(task, tgid), zero = 0;
	struct bpf_iter_task_vma it;
	struct vm_area_struct *vma;

	if (BPF_CORE_READ(task, signal, live.counter) != 0 || !bpf_map_lookup_elem(&seen_pids, &pid))
		return 0;
	bpf_map_delete_elem(&seen_pids, &pid);
	__sync_fetch_and_add(&seen_generation, 1);
	bpf_iter_task_vma_new(&it, task, 0);
	while ((vma = bpf_iter_task_vma_next(&it))) {
		struct file *file = vma->vm_file;
		struct ember_mapping *m;
		struct path_walk w;

		if (!file || !(vma->vm_flags & VM_EXEC))
			continue;
		m = bpf_map_lookup_elem(&mapping_scratch, &zero);
		if (!m)
			break;
		m->start = vma->vm_start;
		m->end = vma->vm_end;
		m->offset = vma->vm_pgoff << 12;
		m->inode = BPF_CORE_READ(file, f_inode, i_ino);
		m->dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
		m->pid = pid;
		m->path_parts = 0;
		w.dentry = (__u64)BPF_CORE_READ(file, f_path.dentry);
		w.mount = (__u64)container_of(BPF_CORE_READ(file, f_path.mnt), struct mount, mnt);
		bpf_loop(2 * EMBER_PATH_PARTS, path_step, &w, 0);
		if (bpf_ringbuf_output(&exits, m, sizeof(*m), 0))
			COUNT(mappings_lost);
	}
	bpf_iter_task_vma_destroy(&it);
	return 0;
}
