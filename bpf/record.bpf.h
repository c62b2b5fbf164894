/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* How every event program makes a record (struct ember_sample) and sends
 * it: a scratch slot to build it in, the current task's stacks, the ring
 * buffer, the counters of what was lost. BPF only.
 *
 * The maps and globals below are declared extern here and defined once,
 * in record.bpf.c (each map by its type here: one spec, no copy to drift).
 * The static linker (bpftool gen object, Makefile) joins the declarations
 * of every part to the definition by name, into one object and skeleton.
 * The helpers are inlined into each program, as when the programs were one
 * file: the verifier follows the same instructions. */
#ifndef EMBER_RECORD_BPF_H
#define EMBER_RECORD_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "profile.h"
#include "unwind.bpf.h"

/* Set by the collector before load: wake the collector only once this
 * much is queued (a wakeup per sample costs a context switch per sample;
 * the collector also polls on a timer). */
extern const volatile __u64 wakeup_bytes;
/* Set by the collector before load: the room a bpf_get_stack walk is
 * given, what it can fill at most (kernel.perf_event_max_stack frames). It
 * zeroes the rest of its room, so more room would be cleared on every
 * sample for nothing. */
extern const volatile __u32 kernel_walk_bytes;

/* Set by the collector once it is ready for the first record (JVMs' agents
 * attached, their code's frames known to the unwinder): until then the
 * programs are attached, so every attach error shows before any agent is
 * loaded, but record nothing. */
extern bool armed;

/* What the programs count for the summary (every lost sample among them). */
struct counters_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ember_counters);
};
extern struct counters_map counters SEC(".maps");

/* One more of `field` in this CPU's counters. */
#define COUNT(field)                                                          \
	do {                                                                  \
		__u32 zero_ = 0;                                              \
		struct ember_counters *c_ = bpf_map_lookup_elem(&counters, &zero_); \
		if (c_)                                                       \
			c_->field++;                                          \
	} while (0)

/* The records (struct ember_sample, variable length). */
struct samples_map {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the collector */
};
extern struct samples_map samples SEC(".maps");

/* Processes seen lately, with the start of their name. The first sample of
 * a process, and the first after it execs (its name changes), wakes the
 * collector at once, so it reads the new mappings while the process still
 * runs: a 50 ms compiler job would be gone by the next timed poll. */
struct seen_pids_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct seen_pids_map seen_pids SEC(".maps");

/* Bumped as a process leaves seen_pids (it exits): a CPU's last_sent
 * taken before may name a pid that is now another process. */
extern __u32 seen_generation;

/* The process each CPU last sent a record of: a CPU mostly samples the
 * process it sampled last, which then needs no lookup in seen_pids. */
struct last_sent {
	__u64 name;
	__u32 pid;
	__u32 generation;  /* seen_generation then */
};

struct last_sent_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last_sent);
};
extern struct last_sent_map last_sent SEC(".maps");

/* Records are too large for the 512-byte BPF stack: they are built in
 * per-CPU slots, one per program building a record on the CPU at a time.
 * Programs do interrupt one another: a CPU sample (an hrtimer interrupt, an
 * NMI with a hardware event) lands while a malloc uprobe program builds its
 * record, and uprobe programs run preemptible on newer kernels (6.1:
 * migrate_disable() only), so another task's uprobe, or sched_switch, can
 * run in the middle of one. Sharing one buffer mixed stacks: -e
 * cpu-clock,malloc gave malloc records with the CPU sample's frames. Each
 * program claims a free slot while it builds its record (record.bpf.c);
 * the slot's walk (unwind.bpf.h) is its own too. */
struct scratch_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EMBER_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct ember_sample);
};
extern struct scratch_map scratch SEC(".maps");

/* Claims a free slot of this CPU's scratch: its number, or -1 when every
 * slot is in use (counted). Global functions (record.bpf.c), verified once
 * each: inlined, the verifier would follow the rest of every program once
 * per slot. */
int ember_claim_scratch(void);
/* (A global function returns a scalar: 0.) */
int ember_release_scratch(__u32 slot);

/* A slot of this CPU's scratch, this program's until ember_release_scratch(slot). */
static __always_inline struct ember_sample *claim_scratch(__u32 *slot)
{
	struct ember_sample *s;
	int claimed = ember_claim_scratch();

	if (claimed < 0)
		return 0;
	*slot = claimed;
	s = bpf_map_lookup_elem(&scratch, slot);
	if (!s)
		ember_release_scratch(*slot);
	return s;
}

static __always_inline long frames(long bytes)
{
	return bytes > 0 ? bytes / sizeof(__u64) : 0;
}

/* Where a walk starts: the user registers when the program has them
 * (`given`: a uprobe's, or those of user code a perf event interrupted;
 * read by the program itself, as the verifier rewrites context accesses),
 * else those the task entered the kernel with. At an allocator's entry
 * (`at_entry`) the walk starts from its caller, whose return address is
 * not yet in a frame: on top of the stack (x86), in the link register x30
 * (arm64: regs.lr). */
struct stack_start {
	struct ember_user_regs regs;
	bool given;
	bool at_entry;
};

/* At a function's entry, the address its caller resumes at; 0 if unread. */
static __always_inline __u64 entry_return(const struct stack_start *start)
{
#if defined(__TARGET_ARCH_arm64)
	return start->regs.lr;
#else
	__u64 ra;

	return bpf_probe_read_user(&ra, sizeof(ra), (void *)start->regs.sp) ? 0 : ra;
#endif
}

static __always_inline struct stack_start start_at(__u64 ip, __u64 sp, __u64 bp, bool at_entry)
{
	struct stack_start start = {.regs = {.ip = ip, .sp = sp, .bp = bp}, .given = true, .at_entry = at_entry};

	return start;
}

/* Set by the collector before load: the kernel lacks
 * bpf_get_current_task_btf (Linux 5.11) or bpf_task_pt_regs (5.15). The
 * current task is then read through bpf_get_current_task with probe reads,
 * and the registers it entered the kernel with lie at the top of its
 * kernel stack, kernel_stack_size bytes (THREAD_SIZE) above task->stack.
 * Each program is verified along one of the two ways only: the other is
 * dead code on a read-only constant, helpers the kernel lacks included. */
extern const volatile bool task_by_reads;
extern const volatile __u32 kernel_stack_size;

/* Whether the current task has user memory (is not a kernel thread). */
static __always_inline bool current_has_mm(void)
{
	if (task_by_reads)
		return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), mm) != 0;
	return bpf_get_current_task_btf()->mm != 0;
}

/* The registers the current task entered the kernel with; read their
 * fields with ENTRY_REG. */
static __always_inline struct pt_regs *current_entry_regs(void)
{
	if (task_by_reads) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task();

		return (struct pt_regs *)((__u64)BPF_CORE_READ(task, stack) + kernel_stack_size -
					  bpf_core_type_size(struct pt_regs));
	}
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

#define ENTRY_REG(regs, field) (task_by_reads ? BPF_CORE_READ(regs, field) : (regs)->field)

/* The kernel's names of the pc, the stack pointer, the frame pointer (x29
 * on arm64) and arm64's link register in its struct pt_regs. */
#if defined(__TARGET_ARCH_arm64)
#define REG_PC pc
#define REG_FP regs[29]
#define REG_LR regs[30]
#define REG_V8_BYTECODE_OFFSET regs[19]
#define REG_V8_BYTECODE_ARRAY regs[20]
#define REG_V8_DISPATCH_TABLE regs[21]
#else
#define REG_PC ip
#define REG_FP bp
#define REG_V8_BYTECODE_OFFSET r9
#define REG_V8_BYTECODE_ARRAY r12
#define REG_V8_DISPATCH_TABLE r15
#endif

/* Where a sample interrupted user code, from its registers. */
static __always_inline struct stack_start start_from(const bpf_user_pt_regs_t *regs)
{
	struct stack_start start = {.regs = {.ip = regs->REG_PC,
					     .sp = regs->sp,
					     .bp = regs->REG_FP,
#if defined(__TARGET_ARCH_arm64)
					     .lr = regs->REG_LR,
#endif
					     .v8_bytecode_offset = regs->REG_V8_BYTECODE_OFFSET,
					     .v8_bytecode_array = regs->REG_V8_BYTECODE_ARRAY,
					     .v8_dispatch_table = regs->REG_V8_DISPATCH_TABLE},
				    .given = true};

	return start;
}

/* A task's name (TASK_COMM_LEN bytes) as two loads through its BTF
 * pointer, where a helper call would cost a call and a checked copy each. */
static __always_inline void copy_comm(char *to, const char *from)
{
	((__u64 *)to)[0] = ((const __u64 *)from)[0];
	((__u64 *)to)[1] = ((const __u64 *)from)[1];
}

/* The names of the current task and of its process (its group leader). */
static __always_inline void current_names(char *comm, char *process_comm)
{
	struct task_struct *task;

	if (task_by_reads) {
		task = (struct task_struct *)bpf_get_current_task();
		bpf_get_current_comm(comm, EMBER_COMM_LEN);
		BPF_CORE_READ_INTO((char(*)[EMBER_COMM_LEN])process_comm, task, group_leader, comm);
		return;
	}
	task = bpf_get_current_task_btf();
	copy_comm(comm, task->comm);
	copy_comm(process_comm, task->group_leader->comm);
}

/* The current task's user registers in `start`; false for a kernel
 * thread, which has none. */
static __always_inline bool user_regs(struct stack_start *start)
{
	struct pt_regs *regs;

	if (!current_has_mm())
		return false;
	if (start->given)
		return true;
	regs = current_entry_regs();
	start->regs.ip = ENTRY_REG(regs, REG_PC);
	start->regs.sp = ENTRY_REG(regs, sp);
	start->regs.bp = ENTRY_REG(regs, REG_FP);
#if defined(__TARGET_ARCH_arm64)
	start->regs.lr = ENTRY_REG(regs, REG_LR);
#endif
	start->regs.v8_bytecode_offset = ENTRY_REG(regs, REG_V8_BYTECODE_OFFSET);
	start->regs.v8_bytecode_array = ENTRY_REG(regs, REG_V8_BYTECODE_ARRAY);
	start->regs.v8_dispatch_table = ENTRY_REG(regs, REG_V8_DISPATCH_TABLE);
	return true;
}

/* Room for a copied user stack (bpf/unwind.h), in words: a CPU sample's
 * record has room for three stacks before its kernel one (6 KB of stack:
 * deep C++ and Java stacks), an off-CPU block's for one (2 KB). */
#define COPY_WORDS_LARGE (3 * EMBER_MAX_STACK_DEPTH)
#define COPY_WORDS_SMALL EMBER_MAX_STACK_DEPTH

/* `regs` and as much of the user stack above regs->sp as can be read, up
 * to `large` or small room; in words. The top of the stack is the end of
 * its mapping: a read past it fails whole, so the sizes are tried from
 * large to small. */
static __always_inline long copy_stack(struct ember_user_regs *regs, __u64 *ips, bool large)
{
	const __u32 large_room = (COPY_WORDS_LARGE - EMBER_COPY_HEADER) * sizeof(__u64);
	const __u32 room = (COPY_WORDS_SMALL - EMBER_COPY_HEADER) * sizeof(__u64);
	void *sp = (void *)regs->sp;
	__u64 *to = &ips[EMBER_COPY_HEADER];
	long words = 0;

	ips[EMBER_COPY_IP] = regs->ip;
	ips[EMBER_COPY_SP] = regs->sp;
	ips[EMBER_COPY_BP] = regs->bp;
	ips[EMBER_COPY_RETURN_ADDRESS] = regs->return_address;
	ips[EMBER_COPY_LINK] = regs->lr;
	if (large && !bpf_probe_read_user(to, large_room, sp))
		words = large_room / 8;
	else if (!bpf_probe_read_user(to, room, sp))
		words = room / 8;
	else if (!bpf_probe_read_user(to, 1024, sp))
		words = 128;
	else if (!bpf_probe_read_user(to, 256, sp))
		words = 32;
	else if (!bpf_probe_read_user(to, 64, sp))
		words = 8;
	return EMBER_COPY_HEADER + words;
}

/* The current task's user stack into `ips` (by unwind_mode, in the walk
 * of the caller's scratch slot), then (if `kernel`) its kernel stack right
 * after it; their lengths in frames and why the user stack ends. `ips`
 * holds at least two stacks of EMBER_MAX_STACK_DEPTH, four if `large`
 * (room for a larger copy). */
static __always_inline void walk_stacks(void *ctx, struct stack_start start, __u32 slot, __u32 pid, __u64 *ips,
					__u16 *ulen, __u16 *klen, __u8 *stop, bool kernel, bool large)
{
	struct ember_user_regs regs;
	long u = -1, k = 0;

	*stop = EMBER_STOP_NOT_LOADED;
	if (unwind_mode == EMBER_UNWIND_FP) {
		/* The kernel's walk, below, finds the registers itself. */
	} else if (!user_regs(&start)) {
		u = 0;
		*stop = EMBER_STOP_NO_USER;
	} else {
		int r;

		regs = start.regs;
		regs.return_address = 0;
		if (start.at_entry) {
			regs.ip = entry_return(&start);
#if !defined(__TARGET_ARCH_arm64)
			regs.sp += 8; /* the return address popped */
#endif
			regs.return_address = 1;
		}
		struct ember_unwind_walk *walk = ember_unwind(slot, &regs, pid, &r);

		*stop = walk ? EMBER_UNWIND_STOP(r) : EMBER_STOP_BAD_FRAME;
		u = walk ? EMBER_UNWIND_FRAMES(r) : 0;
		/* A process new to the collector, or in code mapped since its
		 * tables were made: its registers and the top of its stack, for
		 * the collector to unwind once it has its tables (an off-CPU block
		 * recorded now may last the whole recording). */
		if (*stop == EMBER_STOP_NOT_LOADED)
			u = copy_stack(&regs, ips, large);
		else if (u > 0 && u <= EMBER_MAX_STACK_DEPTH) {
			/* A mask the compiler keeps, for older verifiers that lose
			 * the test's bound on a copy of u (`ips` holds two stacks). */
			barrier_var(u);
			bpf_probe_read_kernel(ips, (u & (2 * EMBER_MAX_STACK_DEPTH - 1)) * sizeof(__u64), walk->ip);
		}
	}
	if (u < 0) {
		/* --unwind fp: the kernel's frame-pointer walk. */
		u = frames(bpf_get_stack(ctx, ips, kernel_walk_bytes, BPF_F_USER_STACK));
		*stop = u ? EMBER_STOP_FP_END : EMBER_STOP_NO_USER;
		/* The return address on top of the stack at an allocator's
		 * entry replaces its own pc: the walk would skip the caller. */
		if (start.at_entry && u > 0 && (regs.ip = entry_return(&start)))
			ips[0] = regs.ip;
	}
	if (u > (large ? COPY_WORDS_LARGE : EMBER_MAX_STACK_DEPTH))
		u = large ? COPY_WORDS_LARGE : EMBER_MAX_STACK_DEPTH;
	if (kernel) {
		k = frames(bpf_get_stack(ctx, &ips[u], kernel_walk_bytes, 0));
		if (k > EMBER_MAX_STACK_DEPTH)
			k = EMBER_MAX_STACK_DEPTH;
	}
	*ulen = u;
	*klen = k;
}

/* Fills the header and the stacks of the current task (comm and stacks
 * are the current task's: the interrupted one, or the one switching out);
 * the kernel stack only if `kernel`. `slot`: the caller's scratch slot. */
static __always_inline void take_stacks(void *ctx, struct stack_start start, struct ember_sample *s, __u32 slot,
					__u32 pid, __u32 tid, bool kernel, bool large)
{
	s->time_ns = bpf_ktime_get_ns();
	s->cgroup_id = bpf_get_current_cgroup_id();
	s->pid = pid;
	s->tid = tid;
	s->cpu = bpf_get_smp_processor_id();
	s->wait = EMBER_WAIT_OTHER;
	s->pad = 0;
	current_names(s->comm, s->process_comm);
	walk_stacks(ctx, start, slot, pid, s->ips, &s->ustack_len, &s->kstack_len, &s->ustack_stop, kernel, large);
}

/* Whether process `pid` named `comm` is new to the collector (or execed):
 * then it must read its mappings at once. */
static __always_inline bool first_seen(__u32 pid, const char *comm)
{
	__u64 name = *(__u64 *)comm, *seen;
	__u32 zero = 0, generation = seen_generation;
	struct last_sent *last = bpf_map_lookup_elem(&last_sent, &zero);
	bool first = false;

	if (!pid)
		return false;
	if (last && last->pid == pid && last->name == name && last->generation == generation)
		return false;
	seen = bpf_map_lookup_elem(&seen_pids, &pid);
	if (!seen || *seen != name) {
		bpf_map_update_elem(&seen_pids, &pid, &name, BPF_ANY);
		first = true;
	}
	if (last) {
		last->pid = pid;
		last->name = name;
		last->generation = generation;
	}
	return first;
}

/* Sends a record, with `waker_frames` of a waker's stacks after its own
 * (`large`: a full ember_sample, which may hold a larger stack copy);
 * wakes the collector when the ring is a quarter full or the record is
 * the first of a process (or of its new image after exec). */
static __always_inline void send(struct ember_sample *s, __u32 waker_frames, bool large)
{
	__u64 wakeup = BPF_RB_NO_WAKEUP;
	__u32 ulen = s->ustack_len, klen = s->kstack_len;

	if (ulen > (large ? COPY_WORDS_LARGE : EMBER_MAX_STACK_DEPTH) || klen > EMBER_MAX_STACK_DEPTH ||
	    waker_frames > 2 * EMBER_MAX_STACK_DEPTH)
		return;
	if (bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		wakeup = BPF_RB_FORCE_WAKEUP;
	if (first_seen(s->pid, s->process_comm))
		wakeup = BPF_RB_FORCE_WAKEUP;
	/* A waker outside the targets may never be sampled itself. */
	if (waker_frames && first_seen(s->waker_pid, s->waker_process_comm))
		wakeup = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&samples, s, EMBER_SAMPLE_HEADER_SIZE + (ulen + klen + waker_frames) * sizeof(__u64), wakeup))
		COUNT(samples_lost);
}

#endif
