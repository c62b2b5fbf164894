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
#include "unwind.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the collector before load. */
const volatile bool filter_pids = false;   /* only tgids in target_pids */
const volatile bool filter_tids = false;   /* only tids in target_tids */
const volatile bool include_idle = false;  /* sample the idle task (pid 0) */
const volatile bool follow_forks = false;  /* children of targets become targets */
/* --cgroup: only tasks in the first target_cgroup_count cgroups of
 * target_cgroups, or below them. */
const volatile __u32 target_cgroup_count = 0;
/* Off-CPU time: record threads as they block (and, for wall-clock time,
 * as they are preempted), emit when they run again if off for long enough. */
const volatile bool offcpu_preempted = false;
const volatile __u64 min_block_ns = 0;
/* --waker: each block also carries the stacks of whoever woke the thread. */
const volatile bool offcpu_waker = false;
/* Wake the collector only once this much is queued: a wakeup per sample
 * costs a context switch per sample (the collector also polls on a timer). */
const volatile __u64 wakeup_bytes = 0;
/* The room a bpf_get_stack walk is given: what it can fill at most
 * (kernel.perf_event_max_stack frames). It zeroes the rest of its room, so
 * more room would be cleared on every sample for nothing. */
const volatile __u32 kernel_walk_bytes = EMBER_MAX_STACK_DEPTH * sizeof(__u64);

/* Set by the collector once it is ready for the first record (JVMs' agents
 * attached, their code's frames known to the unwinder): until then the
 * programs are attached, so every attach error shows before any agent is
 * loaded, but record nothing. */
bool armed = false;

/* What the programs count for the summary (every lost sample among them). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ember_counters);
} counters SEC(".maps");

/* One more of `field` in this CPU's counters. */
#define COUNT(field)                                                          \
	do {                                                                  \
		__u32 zero_ = 0;                                              \
		struct ember_counters *c_ = bpf_map_lookup_elem(&counters, &zero_); \
		if (c_)                                                       \
			c_->field++;                                          \
	} while (0)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the collector */
} samples SEC(".maps");

/* Mappings of sampled processes as they exit (struct ember_mapping). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} exits SEC(".maps");

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

/* A task's cgroup is tested by the kernel's own ancestry check (a level
 * compare and one load, bpf_current_task_under_cgroup, Linux 4.9) rather
 * than by walking the task's cgroup ancestors through BTF: the task tested
 * is always the current one (sampled, switching out, allocating). The
 * woken task of sched_waking is not, but it has a block open only if it
 * was a target as it switched out. */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, EMBER_MAX_CGROUPS); /* resized by the collector */
	__type(key, __u32);
	__type(value, __u32);
} target_cgroups SEC(".maps");

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

/* Bumped as a process leaves seen_pids (it exits): a CPU's last_sent
 * taken before may name a pid that is now another process. */
__u32 seen_generation = 0;

/* The process each CPU last sent a record of: a CPU mostly samples the
 * process it sampled last, which then needs no lookup in seen_pids. */
struct last_sent {
	__u64 name;
	__u32 pid;
	__u32 generation;  /* seen_generation then */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last_sent);
} last_sent SEC(".maps");

/* Records are too large for the 512-byte BPF stack: they are built in
 * per-CPU slots, one per program building a record on the CPU at a time.
 * Programs do interrupt one another: a CPU sample (an hrtimer interrupt, an
 * NMI with a hardware event) lands while a malloc uprobe program builds its
 * record, and uprobe programs run preemptible (migrate_disable() only), so
 * another task's uprobe, or sched_switch, can run in the middle of one.
 * Sharing one buffer mixed stacks: -e cpu-clock,malloc gave malloc records
 * with the CPU sample's frames. Each program claims a free slot (a bit of
 * scratch_taken, set and cleared atomically) while it builds its record. */
#define SCRATCH_SLOTS 4

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct ember_sample);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} scratch_taken SEC(".maps");  /* bit i: slot i is being built in on this CPU */

/* Claims a free slot of this CPU's scratch: its number, or -1 when every
 * slot is in use (counted). Global functions, verified once each: inlined,
 * the verifier would follow the rest of every program once per slot. */
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

/* (A global function returns a scalar: 0.) */
__noinline int ember_release_scratch(__u32 slot)
{
	__u32 zero = 0;
	__u64 *taken = bpf_map_lookup_elem(&scratch_taken, &zero);

	if (taken && slot < SCRATCH_SLOTS)
		__sync_fetch_and_and(taken, ~(1ull << slot));
	return 0;
}

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

/* Where a walk starts: the user registers when the program has them
 * (`given`: a uprobe's, or those of user code a perf event interrupted;
 * read by the program itself, as the verifier rewrites context accesses),
 * else those the task entered the kernel with. At an allocator's entry
 * (`at_entry`) the walk starts from its caller, whose return address is
 * on top of the stack, not yet in a frame. */
struct stack_start {
	struct ember_user_regs regs;
	bool given;
	bool at_entry;
};

static __always_inline struct stack_start start_at(__u64 ip, __u64 sp, __u64 bp, bool at_entry)
{
	struct stack_start start = {.regs = {.ip = ip, .sp = sp, .bp = bp}, .given = true, .at_entry = at_entry};

	return start;
}

/* The current task's user registers in `start`; false for a kernel
 * thread, which has none. */
static __always_inline bool user_regs(struct stack_start *start)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs;

	if (!task->mm)
		return false;
	if (start->given)
		return true;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	start->regs.ip = regs->ip;
	start->regs.sp = regs->sp;
	start->regs.bp = regs->bp;
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

/* The current task's user stack into `ips` (by unwind_mode), then (if
 * `kernel`) its kernel stack right after it; their lengths in frames and
 * why the user stack ends. `ips` holds at least two stacks of
 * EMBER_MAX_STACK_DEPTH, four if `large` (room for a larger copy). */
static __always_inline void walk_stacks(void *ctx, struct stack_start start, __u32 pid, __u64 *ips, __u16 *ulen,
					__u16 *klen, __u8 *stop, bool kernel, bool large)
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
			if (bpf_probe_read_user(&regs.ip, sizeof(regs.ip), (void *)regs.sp))
				regs.ip = 0;
			regs.sp += 8;
			regs.return_address = 1;
		}
		r = ember_unwind_user(&regs, pid, (struct ember_user_frames *)ips);
		*stop = EMBER_UNWIND_STOP(r);
		/* A process new to the collector: its registers and the top of
		 * its stack, for the collector to unwind once it has its tables
		 * (an off-CPU block recorded now may last the whole recording). */
		u = *stop == EMBER_STOP_NOT_LOADED ? copy_stack(&regs, ips, large) : EMBER_UNWIND_FRAMES(r);
	}
	if (u < 0) {
		/* --unwind fp: the kernel's frame-pointer walk. */
		u = frames(bpf_get_stack(ctx, ips, kernel_walk_bytes, BPF_F_USER_STACK));
		*stop = u ? EMBER_STOP_FP_END : EMBER_STOP_NO_USER;
		/* The return address on top of the stack at an allocator's
		 * entry replaces its own pc: the walk would skip the caller. */
		if (start.at_entry && u > 0 &&
		    bpf_probe_read_user(&regs.ip, sizeof(regs.ip), (void *)start.regs.sp) == 0)
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

/* A task's name (TASK_COMM_LEN bytes) as two loads through its BTF
 * pointer, where a helper call would cost a call and a checked copy each. */
static __always_inline void copy_comm(char *to, const char *from)
{
	((__u64 *)to)[0] = ((const __u64 *)from)[0];
	((__u64 *)to)[1] = ((const __u64 *)from)[1];
}

/* Fills the header and the stacks of the current task (comm and stacks
 * are the current task's: the interrupted one, or the one switching out);
 * the kernel stack only if `kernel`. */
static __always_inline void take_stacks(void *ctx, struct stack_start start, struct ember_sample *s, __u32 pid,
					__u32 tid, bool kernel, bool large)
{
	struct task_struct *task = bpf_get_current_task_btf();

	s->time_ns = bpf_ktime_get_ns();
	s->cgroup_id = bpf_get_current_cgroup_id();
	s->pid = pid;
	s->tid = tid;
	s->cpu = bpf_get_smp_processor_id();
	s->pad = 0;
	copy_comm(s->comm, task->comm);
	copy_comm(s->process_comm, task->group_leader->comm);
	walk_stacks(ctx, start, pid, s->ips, &s->ustack_len, &s->kstack_len, &s->ustack_stop, kernel, large);
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

/* Whether the tick interrupted user code (the kernel's user_mode(regs)):
 * then the kernel stack is empty, and asking for it anyway cost 12% of a
 * sample, about 250 ns on the development VM (the helper still sets up a
 * callchain and zeroes its whole buffer). The register is read whole: the
 * context takes no narrower load. Elsewhere than x86, the kernel's answer. */
static __always_inline bool in_user_mode(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	__u64 cs = ctx->regs.csx;

	barrier_var(cs);
	return (cs & 3) == 3;
#else
	return false;
#endif
}

SEC("perf_event")
int ember_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct stack_start start = {};
	struct ember_sample *s;
	__u32 slot = 0;
	bool user;

	if (!armed)
		return 0;
	if (tid == 0) {
		COUNT(samples_idle);
		if (!include_idle)
			return 0;
	}
	if (!in_scope(pid, tid))
		return 0;
	COUNT(samples_seen);

	s = claim_scratch(&slot);
	if (!s)
		return 0;
	/* Interrupted in user code, the event has its registers and the
	 * kernel stack is empty; in the kernel, the unwinder takes the user
	 * registers the task entered with. */
	user = in_user_mode(ctx);
	if (user)
		start = start_at(ctx->regs.ip, ctx->regs.sp, ctx->regs.bp, false);
	take_stacks(ctx, start, s, pid, tid, !user, true);
	s->weight = 1;
	s->kind = EMBER_KIND_CPU;
	s->waker = EMBER_WAKER_NONE;
	send(s, 0, true);
	ember_release_scratch(slot);
	return 0;
}

/* A thread off CPU: the record of its switch out, stacks included, kept
 * in the task's own storage (no copy, freed with the task) until it runs
 * again. The stacks must be taken as it leaves: as it comes back, the
 * tracepoint runs in the context of the task it replaces, whose user
 * memory is the only one a BPF program can walk here. An ember_sample
 * without the room for a waker's stacks: half the memory per thread. */
struct offcpu_block {
	char bytes[__builtin_offsetof(struct ember_sample, ips) + 2 * EMBER_MAX_STACK_DEPTH * sizeof(__u64)];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct offcpu_block);
} offcpu_start SEC(".maps");

/* --waker: the stacks of the waker of a blocked thread, in the wakee's
 * storage, taken as the wakeup happens (sched_waking runs in the waker's
 * context, where sched_wakeup may run on the wakee's CPU, from an IPI), and
 * joined to its record as it runs again. Its names and stack lengths go in
 * the record's header. */
struct waker_ips {
	__u64 ips[2 * EMBER_MAX_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct waker_ips);
} waker_stacks SEC(".maps");

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

/* A block and its waker's stacks, joined into one record. */
static __always_inline void send_woken(struct ember_sample *block, struct task_struct *task)
{
	struct waker_ips *w = bpf_task_storage_get(&waker_stacks, task, 0, 0);
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

SEC("tp_btf/sched_switch")
int BPF_PROG(ember_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 pid = prev->tgid, tid = prev->pid;
	struct ember_sample *s;

	/* prev, the current task, goes off CPU: keep its stacks. */
	if (armed && tid != 0 && in_scope(pid, tid)) {
		/* Preempted on its way to sleep (its state set, schedule() not
		 * reached yet), a thread stays runnable: no wakeup will come. */
		bool runnable = preempt || task_state(prev) == 0;

		if (!runnable || offcpu_preempted) {
			s = bpf_task_storage_get(&offcpu_start, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
			if (s) {
				/* Open to a waker before the stack walk, not after: a
				 * wakeup on another CPU may come while it runs (the
				 * waker writes only the waker_* fields). */
				s->waker = offcpu_waker && !runnable ? EMBER_WAKER_UNSEEN : EMBER_WAKER_NONE;
				barrier();
				take_stacks(ctx, (struct stack_start){}, s, pid, tid, true, false);
				s->weight = 0;
				s->kind = runnable ? EMBER_KIND_PREEMPTED : EMBER_KIND_BLOCKED;
			} else {
				COUNT(offcpu_untracked);
			}
		}
	}
	/* next runs again: its time off CPU is over. */
	s = bpf_task_storage_get(&offcpu_start, next, 0, 0);
	if (s && s->time_ns) {
		__u64 off = bpf_ktime_get_ns() - s->time_ns;

		if (off >= min_block_ns || s->kind == EMBER_KIND_PREEMPTED) {
			s->weight = off;
			if (offcpu_waker && s->waker == EMBER_WAKER_SEEN)
				send_woken(s, next);
			else
				send(s, 0, false);
		}
		s->time_ns = 0;
		s->waker = EMBER_WAKER_NONE;
	}
	return 0;
}

/* --waker: a thread asleep in scope is woken. Runs in the waker's context,
 * under the wakee's pi_lock: one waker per block (a second wakeup finds it
 * awake), and the wakee runs again only after this returns. */
SEC("tp_btf/sched_waking")
int BPF_PROG(ember_waking, struct task_struct *p)
{
	struct ember_sample *s = bpf_task_storage_get(&offcpu_start, p, 0, 0);
	struct task_struct *task;
	struct waker_ips *w;
	__u64 id;

	/* Every wakeup on the host comes here: most end at this test. */
	if (!s || s->waker != EMBER_WAKER_UNSEEN)
		return 0;
	w = bpf_task_storage_get(&waker_stacks, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w) {
		COUNT(waker_untracked);
		return 0;
	}
	/* In an interrupt (a timer expiring, I/O completing) the current task
	 * is whoever it interrupted: the collector tells from the kernel
	 * stack, which then goes through the interrupt's entry. Telling here
	 * needs preempt_count, a per-CPU variable whose address BPF gets only
	 * from kernels with CONFIG_KALLSYMS_ALL. */
	task = bpf_get_current_task_btf();
	id = bpf_get_current_pid_tgid();
	s->waker_pid = id >> 32;
	s->waker_tid = (__u32)id;
	copy_comm(s->waker_comm, task->comm);
	copy_comm(s->waker_process_comm, task->group_leader->comm);
	walk_stacks(ctx, (struct stack_start){}, s->waker_pid, w->ips, &s->waker_ustack_len, &s->waker_kstack_len,
		    &s->waker_ustack_stop, true, false);
	barrier();
	s->waker = EMBER_WAKER_SEEN;
	return 0;
}

/* Native allocations (-e malloc): uprobes on the allocator's entry points.
 * Sampled by size: a sample after about malloc_interval bytes allocated on
 * a CPU (the next threshold drawn at random between half and one and a half
 * intervals, so that sites allocating in a fixed rhythm are not aliased),
 * weighing every byte allocated since the last sample: the weights add up
 * to the bytes allocated, and a stack walk is paid once per interval, not
 * per call. With --live, the pointers of sampled allocations are
 * remembered until freed; what is left at the end is still allocated. */
const volatile __u64 malloc_interval = 524288;
const volatile bool malloc_live = false;

struct malloc_budget {
	__s64 remaining;  /* bytes until this CPU's next sample */
	__u64 since;      /* bytes allocated since its last one */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct malloc_budget);
} malloc_budget SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} malloc_ids SEC(".maps");  /* --live: samples numbered per CPU (an id is count << 8 | cpu) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} malloc_pending SEC(".maps");  /* --live: tid -> weight of a sampled call, until it returns */

/* The same for mmap: glibc's malloc calls mmap itself for large blocks, and
 * the return of that inner call must not take the pending malloc's place. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} mmap_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__type(key, __u64);
	__type(value, __u32);
} live_allocs SEC(".maps");  /* --live: pointer -> sample id, until freed */

static __always_inline __u64 malloc_weight(__u64 size)
{
	__u32 zero = 0;
	struct malloc_budget *b = bpf_map_lookup_elem(&malloc_budget, &zero);
	__u64 weight;

	if (!b)
		return 0;
	b->since += size;
	b->remaining -= size;
	if (b->remaining > 0)
		return 0;
	weight = b->since;
	b->since = 0;
	b->remaining = malloc_interval / 2 + bpf_get_prandom_u32() % (malloc_interval | 1);
	return weight;
}

/* The user stack of an allocation, from its call site up: at the
 * allocator's entry (`entry`), the walk starts from the caller (see
 * walk_stacks); on return, the pc is in it. */
static __always_inline void send_alloc(struct pt_regs *ctx, __u32 pid, __u32 tid, __u64 weight, __u32 id, bool entry)
{
	struct stack_start start = start_at(PT_REGS_IP(ctx), PT_REGS_SP(ctx), PT_REGS_FP(ctx), entry);
	struct ember_sample *s;
	__u32 slot = 0;

	s = claim_scratch(&slot);
	if (!s)
		return;
	take_stacks(ctx, start, s, pid, tid, false, true);
	s->weight = weight;
	s->kind = EMBER_KIND_MALLOC;
	s->pad = id;
	s->waker = EMBER_WAKER_NONE;
	send(s, 0, true);
	ember_release_scratch(slot);
}

static __always_inline int on_alloc(struct pt_regs *ctx, __u64 size, void *pending)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	__u64 weight;

	if (!armed || !in_scope(pid, tid))
		return 0;
	weight = malloc_weight(size);
	if (!weight)
		return 0;
	if (malloc_live)
		bpf_map_update_elem(pending, &tid, &weight, BPF_ANY);
	else
		send_alloc(ctx, pid, tid, weight, 0, true);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ember_malloc, __u64 size)
{
	return on_alloc(ctx, size, &malloc_pending);
}

SEC("uprobe")
int BPF_KPROBE(ember_calloc, __u64 count, __u64 size)
{
	return on_alloc(ctx, count * size, &malloc_pending);
}

SEC("uprobe")
int BPF_KPROBE(ember_realloc, __u64 ptr, __u64 size)
{
	if (malloc_live && ptr)
		bpf_map_delete_elem(&live_allocs, &ptr);
	return on_alloc(ctx, size, &malloc_pending);
}

/* mmap of anonymous private memory, with some access (PROT_NONE only
 * reserves addresses): memory a program maps for itself, big buffers and
 * allocators of its own. glibc's malloc maps its large blocks through the
 * same function (__mmap is an alias of mmap: the probe sees those calls
 * too), as pthread_create maps thread stacks: calls from inside the C
 * library are left out, or a large malloc would count twice. The cookie
 * says where the library's code lies around the probe: the offset of mmap
 * in its executable segment << 32 | the segment's size. */
#define EMBER_MAP_TYPE 0x03  /* MAP_SHARED, MAP_PRIVATE, MAP_SHARED_VALIDATE */
#define EMBER_MAP_PRIVATE 0x02
#define EMBER_MAP_ANONYMOUS 0x20

SEC("uprobe")
int BPF_KPROBE(ember_mmap, __u64 addr, __u64 length, __u64 prot, __u64 flags)
{
	__u64 cookie = bpf_get_attach_cookie(ctx), caller = 0, text;

	if (!prot || (flags & EMBER_MAP_TYPE) != EMBER_MAP_PRIVATE || !(flags & EMBER_MAP_ANONYMOUS))
		return 0;
	if (bpf_probe_read_user(&caller, sizeof(caller), (void *)PT_REGS_SP(ctx)))
		return 0;
	text = PT_REGS_IP(ctx) - (cookie >> 32);
	if (caller - text < (cookie & 0xffffffff))
		return 0;
	return on_alloc(ctx, length, &mmap_pending);
}

/* --live: a sampled call returns its pointer (MAP_FAILED, -1, for mmap). */
static __always_inline int on_return(struct pt_regs *ctx, __u64 ptr, void *pending_calls)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id, sample;
	__u64 *pending = bpf_map_lookup_elem(pending_calls, &tid);
	__u64 weight;

	if (!pending)
		return 0;
	weight = *pending;
	bpf_map_delete_elem(pending_calls, &tid);
	if (!ptr || ptr == (__u64)-1)
		return 0;
	{
		__u32 zero = 0, *count = bpf_map_lookup_elem(&malloc_ids, &zero);

		if (!count)
			return 0;
		sample = ++*count << 8 | (bpf_get_smp_processor_id() & 0xff);
	}
	if (bpf_map_update_elem(&live_allocs, &ptr, &sample, BPF_ANY))
		COUNT(malloc_live_full);
	send_alloc(ctx, pid, tid, weight, sample, false);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ember_alloc_return, __u64 ptr)
{
	return on_return(ctx, ptr, &malloc_pending);
}

SEC("uretprobe")
int BPF_KRETPROBE(ember_mmap_return, __u64 ptr)
{
	return on_return(ctx, ptr, &mmap_pending);
}

/* free, and munmap: a mapping is live until its start is unmapped (an
 * munmap of part of it leaves it counted). */
SEC("uprobe")
int BPF_KPROBE(ember_free, __u64 ptr)
{
	if (ptr)
		bpf_map_delete_elem(&live_allocs, &ptr);
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
		COUNT(targets_full);
	return 0;
}

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
