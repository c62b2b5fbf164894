// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Off-CPU time (-e offcpu, wall, lock): sched_switch keeps the stacks of a
 * target thread as it leaves the CPU and sends them, weighed by the time
 * off CPU, as it runs again; with --waker, sched_waking adds the stacks of
 * whoever woke it. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "record.bpf.h"
#include "targets.bpf.h"

/* Set by the collector before load. Record threads as they block (and, for
 * wall-clock time, as they are preempted), emit when they run again if off
 * for long enough. */
const volatile bool offcpu_preempted = false;
const volatile __u64 min_block_ns = 0;
/* --waker: each block also carries the stacks of whoever woke the thread. */
const volatile bool offcpu_waker = false;
/* -e lock: tell the blocks in a lock. */
const volatile bool tell_lock_waits = false;

/* futex(2) (include/uapi/linux/futex.h: vmlinux.h has no macros). */
#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK 0x7f /* the operation, without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME */
/* Its number, and where a task that entered the kernel by a system call
 * has the call's number and second argument in its struct pt_regs (arm64
 * keeps its arguments in x0-x5; x0 alone is overwritten at the return). */
#if defined(__TARGET_ARCH_arm64)
#define NR_FUTEX 98
#define REG_SYSCALL syscallno
#define REG_SYSCALL_ARG2 regs[1]
#else
#define NR_FUTEX 202
#define REG_SYSCALL orig_ax
#define REG_SYSCALL_ARG2 si
#endif

/* A thread off CPU: the record of its switch out, stacks included, kept
 * by thread id until it runs again (the entry is reused at its next block
 * and deleted as it exits). The stacks must be taken as it leaves: as it
 * comes back, the tracepoint runs in the context of the task it replaces,
 * whose user memory is the only one a BPF program can walk here. An
 * ember_sample without the room for a waker's stacks: half the memory per
 * thread.
 *
 * Preallocated hash maps, not task storage: task storage allocates as a
 * thread first blocks, in sched_switch under the runqueue lock, where a
 * PREEMPT_RT kernel's allocator takes locks that may sleep (until task
 * storage got an allocator of its own). Linux 5.10 has no task storage at
 * all. */
struct offcpu_block {
	char bytes[__builtin_offsetof(struct ember_sample, ips) + 2 * EMBER_MAX_STACK_DEPTH * sizeof(__u64)];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by the collector: threads that block while it records */
	__type(key, __u32);     /* tid */
	__type(value, struct offcpu_block);
} offcpu_start SEC(".maps");

/* --waker: the stacks of the waker of a blocked thread, by the wakee's
 * thread id, taken as the wakeup happens (sched_waking runs in the
 * waker's context, where sched_wakeup may run on the wakee's CPU, from an
 * IPI), and joined to its record as it runs again. Its names and stack
 * lengths go in the record's header. */
struct waker_ips {
	__u64 ips[2 * EMBER_MAX_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by the collector, as offcpu_start */
	__type(key, __u32);     /* the wakee's tid */
	__type(value, struct waker_ips);
} waker_stacks SEC(".maps");

/* What a thread's entry starts from in either map: its fields are all
 * written before they are read. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_block);
} offcpu_blank SEC(".maps");

/* Thread `tid`'s entry in `map` (offcpu_start or waker_stacks), made if it
 * has none; 0 when the map is full. */
static __always_inline void *thread_entry(void *map, __u32 tid)
{
	__u32 zero = 0;
	void *entry = bpf_map_lookup_elem(map, &tid), *blank;

	if (entry)
		return entry;
	blank = bpf_map_lookup_elem(&offcpu_blank, &zero);
	if (!blank)
		return 0;
	bpf_map_update_elem(map, &tid, blank, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, &tid);
}

/* A task's state as it switches out: 0 (TASK_RUNNING) when preempted.
 * The field is __state since Linux 5.14, state before. */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* What the current task, switching out asleep, waits in: a lock when it sleeps in
 * the futex(2) system call's FUTEX_WAIT, as glibc's mutexes (__lll_lock_wait),
 * barriers and once-only initializers do, or FUTEX_LOCK_PI (priority-
 * inheriting mutexes). Not FUTEX_WAIT_BITSET, glibc's condition variables,
 * read-write locks, semaphores and joins: mostly threads waiting for work
 * (-e offcpu has them), a JVM's parked threads among them (its monitors come
 * from the agent). Read from the registers the thread entered the kernel
 * with, so it holds for stripped and static binaries alike. */
static __always_inline __u8 wait_of(void)
{
	struct pt_regs *regs;
	__u64 op;

	if (!tell_lock_waits || !current_has_mm())
		return EMBER_WAIT_OTHER;
	regs = current_entry_regs();
	if (ENTRY_REG(regs, REG_SYSCALL) != NR_FUTEX)
		return EMBER_WAIT_OTHER;
	op = ENTRY_REG(regs, REG_SYSCALL_ARG2) & FUTEX_CMD_MASK;
	return op == FUTEX_WAIT || op == FUTEX_LOCK_PI || op == FUTEX_LOCK_PI2 ? EMBER_WAIT_LOCK : EMBER_WAIT_OTHER;
}

/* A block and its waker's stacks, joined into one record. */
static __always_inline void send_woken(struct ember_sample *block, struct task_struct *task)
{
	__u32 tid = task->pid;
	struct waker_ips *w = bpf_map_lookup_elem(&waker_stacks, &tid);
	struct ember_sample *s = 0;
	__u32 slot = 0, n, m;

	if (w)
		s = claim_scratch(&slot);
	if (!s) {
		block->waker = EMBER_WAKER_UNSEEN;
		send(block, 0, false);
		return;
	}
	n = block->ustack_len + block->kstack_len;
	m = block->waker_ustack_len + block->waker_kstack_len;
	if (n <= 2 * EMBER_MAX_STACK_DEPTH && m <= 2 * EMBER_MAX_STACK_DEPTH) {
		bpf_probe_read_kernel(s, EMBER_SAMPLE_HEADER_SIZE + n * sizeof(__u64), block);
		bpf_probe_read_kernel(&s->ips[n], m * sizeof(__u64), w->ips);
		send(s, m, false);
	}
	ember_release_scratch(slot);
}

/* Sends thread `task`'s block `s`, `off` ns long, with its waker's stacks
 * if `with_waker`, and clears it. */
static __always_inline void end_block(struct ember_sample *s, struct task_struct *task, __u64 off, bool with_waker)
{
	if (off >= min_block_ns || s->kind == EMBER_KIND_PREEMPTED) {
		s->weight = off;
		if (with_waker && offcpu_waker && s->waker == EMBER_WAKER_SEEN) {
			send_woken(s, task);
		} else {
			if (s->waker == EMBER_WAKER_SEEN)
				s->waker = EMBER_WAKER_UNSEEN;
			send(s, 0, false);
		}
	}
	s->time_ns = 0;
	s->waker = EMBER_WAKER_NONE;
}

/* The current task's CPU time; a block keeps it in its weight until it
 * ends. Brought up to date as the task leaves the CPU, before the switch's
 * tracepoint, and as it exits. */
static __always_inline __u64 cpu_time(struct task_struct *t)
{
	return BPF_CORE_READ(t, se.sum_exec_runtime);
}

/* The current task, `t`, runs with a block of its `s` still open: the
 * switch back to it passed no sched_switch tracepoint. The 6.18 kernel of
 * these Firecracker (PVM) guests does that to kernel threads woken onto an
 * idle CPU (30 to 50 a minute on an idle host) and, more rarely, to a busy
 * workload's threads; bpftrace's tracepoint misses the same switches. The
 * thread ran for its CPU time's growth since; the rest of the span was off
 * CPU, in the block. Looked for at every switch out, preempted ones too, so
 * that no later time off CPU joins the span. Sent without its waker's
 * stacks: joining them here too made the program more than 5.10's verifier
 * takes. */
static __always_inline void end_unseen_block(struct ember_sample *s, struct task_struct *t)
{
	__u64 span = bpf_ktime_get_ns() - s->time_ns, ran = cpu_time(t) - s->weight;

	COUNT(offcpu_unseen_ends);
	end_block(s, t, ran < span ? span - ran : 0, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ember_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	/* The switch, as the kernel's CPU time accounting sees it: up to
	 * here prev's CPU time, from here next's, this program's run time
	 * included (the stack walks, slow in an emulated guest). */
	__u64 now = bpf_ktime_get_ns();
	__u32 pid = prev->tgid, tid = prev->pid, next_tid = next->pid;
	struct ember_sample *s;
	int slot;

	/* prev, the current task, goes off CPU: keep its stacks. */
	if (armed && tid != 0 && in_scope(pid, tid)) {
		/* Preempted on its way to sleep (its state set, schedule() not
		 * reached yet), a thread stays runnable: no wakeup will come. */
		bool runnable = preempt || task_state(prev) == 0;

		s = bpf_map_lookup_elem(&offcpu_start, &tid);
		if (s && s->time_ns)
			end_unseen_block(s, prev);
		if (!runnable || offcpu_preempted) {
			if (!s)
				s = thread_entry(&offcpu_start, tid);
			/* The record is built in the thread's entry; the slot
			 * holds the walk. */
			slot = s ? ember_claim_scratch() : -1;
			if (slot >= 0) {
				/* Open to a waker before the stack walk, not after: a
				 * wakeup on another CPU may come while it runs (the
				 * waker writes only the waker_* fields). */
				s->waker = offcpu_waker && !runnable ? EMBER_WAKER_UNSEEN : EMBER_WAKER_NONE;
				barrier();
				take_stacks(ctx, (struct stack_start){}, s, slot, pid, tid, true, false);
				s->time_ns = now;
				s->weight = cpu_time(prev);
				s->kind = runnable ? EMBER_KIND_PREEMPTED : EMBER_KIND_BLOCKED;
				s->wait = runnable ? EMBER_WAIT_OTHER : wait_of();
				ember_release_scratch(slot);
			} else if (!s) {
				COUNT(offcpu_untracked);
			}
		}
	}
	/* next runs again: its time off CPU is over. */
	s = bpf_map_lookup_elem(&offcpu_start, &next_tid);
	if (s && s->time_ns)
		end_block(s, next, now - s->time_ns, true);
	return 0;
}

/* --waker: a thread asleep in scope is woken. Runs in the waker's context,
 * under the wakee's pi_lock: one waker per block (a second wakeup finds it
 * awake), and the wakee runs again only after this returns. */
SEC("tp_btf/sched_waking")
int BPF_PROG(ember_waking, struct task_struct *p)
{
	__u32 tid = p->pid;
	struct ember_sample *s = bpf_map_lookup_elem(&offcpu_start, &tid);
	struct waker_ips *w;
	int slot;
	__u64 id;

	/* Every wakeup on the host comes here: most end at this test. */
	if (!s || s->waker != EMBER_WAKER_UNSEEN)
		return 0;
	w = thread_entry(&waker_stacks, tid);
	if (!w) {
		COUNT(waker_untracked);
		return 0;
	}
	/* In an interrupt (a timer expiring, I/O completing) the current task
	 * is whoever it interrupted: the collector tells from the kernel
	 * stack, which then goes through the interrupt's entry. Telling here
	 * needs preempt_count, a per-CPU variable whose address BPF gets only
	 * from kernels with CONFIG_KALLSYMS_ALL. */
	slot = ember_claim_scratch();
	if (slot < 0)
		return 0;
	id = bpf_get_current_pid_tgid();
	s->waker_pid = id >> 32;
	s->waker_tid = (__u32)id;
	current_names(s->waker_comm, s->waker_process_comm);
	walk_stacks(ctx, (struct stack_start){}, slot, s->waker_pid, w->ips, &s->waker_ustack_len,
		    &s->waker_kstack_len, &s->waker_ustack_stop, true, false);
	ember_release_scratch(slot);
	barrier();
	s->waker = EMBER_WAKER_SEEN;
	return 0;
}

/* A thread's entries go with it; a block still open as it exits ended
 * unseen. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ember_offcpu_exit, struct task_struct *task)
{
	__u32 tid = task->pid;
	struct ember_sample *s = bpf_map_lookup_elem(&offcpu_start, &tid);

	if (s && s->time_ns)
		end_unseen_block(s, task);
	bpf_map_delete_elem(&offcpu_start, &tid);
	if (offcpu_waker)
		bpf_map_delete_elem(&waker_stacks, &tid);
	return 0;
}
