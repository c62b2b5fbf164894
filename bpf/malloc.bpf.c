// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Native allocations (-e malloc): uprobes on the allocator's entry points.
 * Sampled by size: a sample after about malloc_interval bytes allocated on
 * a CPU (the next threshold drawn at random between half and one and a half
 * intervals, so that sites allocating in a fixed rhythm are not aliased),
 * weighing every byte allocated since the last sample: the weights add up
 * to the bytes allocated, and a stack walk is paid once per interval, not
 * per call. With --live, the pointers of sampled allocations are
 * remembered until freed; what is left at the end is still allocated. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "record.bpf.h"
#include "targets.bpf.h"

/* Set by the collector before load. */
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
	__uint(max_entries, 1); /* sized by the collector: --live only */
	__type(key, __u32);
	__type(value, __u64);
} malloc_pending SEC(".maps");  /* --live: tid -> weight of a sampled call, until it returns */

/* The same for mmap: glibc's malloc calls mmap itself for large blocks, and
 * the return of that inner call must not take the pending malloc's place. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by the collector: --live only */
	__type(key, __u32);
	__type(value, __u64);
} mmap_pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by the collector: --live only */
	__type(key, struct ember_live_key);
	__type(value, __u32);
} live_allocs SEC(".maps");  /* --live: a sampled block, until freed -> its sample id */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* sized by the collector: --live only */
	__type(key, __u32);
	__type(value, __u64);
} live_exits SEC(".maps");  /* --live: pid -> when it ended, taken by the collector at each cut */

/* Forgets the block at `ptr` of the current process, freed. */
static __always_inline void forget_block(__u64 ptr)
{
	struct ember_live_key key = {.pid = bpf_get_current_pid_tgid() >> 32, .ptr = ptr};

	bpf_map_delete_elem(&live_allocs, &key);
}

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

/* Where a uprobe's walk starts: the registers it caught (`entry`: at the
 * function's entry, whose caller's return address is not in a frame yet). */
static __always_inline struct stack_start probe_start(struct pt_regs *ctx, bool entry)
{
	struct stack_start start = start_at(PT_REGS_IP(ctx), PT_REGS_SP(ctx), PT_REGS_FP(ctx), entry);

#if defined(__TARGET_ARCH_arm64)
	start.regs.lr = PT_REGS_RET(ctx); /* x30 */
#endif
	return start;
}

/* The user stack of an allocation, from its call site up: at the
 * allocator's entry (`entry`), the walk starts from the caller (see
 * walk_stacks); on return, the pc is in it. */
static __always_inline void send_alloc(struct pt_regs *ctx, __u32 pid, __u32 tid, __u64 weight, __u32 id, bool entry)
{
	struct stack_start start = probe_start(ctx, entry);
	struct ember_sample *s;
	__u32 slot = 0;

	s = claim_scratch(&slot);
	if (!s)
		return;
	take_stacks(ctx, start, s, slot, pid, tid, false, true);
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
	if (malloc_live && ptr && armed)
		forget_block(ptr);
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
	__u64 cookie = bpf_get_attach_cookie(ctx), caller, text;
	struct stack_start start = probe_start(ctx, true);

	if (!prot || (flags & EMBER_MAP_TYPE) != EMBER_MAP_PRIVATE || !(flags & EMBER_MAP_ANONYMOUS))
		return 0;
	caller = entry_return(&start);
	if (!caller)
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
	if (!ptr || ptr == (__u64)-1 || !armed)
		return 0;
	{
		__u32 zero = 0, *count = bpf_map_lookup_elem(&malloc_ids, &zero);

		if (!count)
			return 0;
		sample = ++*count << 8 | (bpf_get_smp_processor_id() & 0xff);
	}
	{
		struct ember_live_key key = {.pid = pid, .ptr = ptr};

		if (bpf_map_update_elem(&live_allocs, &key, &sample, BPF_ANY))
			COUNT(malloc_live_full);
	}
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
 * munmap of part of it leaves it counted). Once disarmed (the recording
 * stopped), what was live stays so: the probes are detached one by one,
 * over a second of a busy machine, while the program goes on freeing. */
SEC("uprobe")
int BPF_KPROBE(ember_free, __u64 ptr)
{
	if (ptr && armed)
		forget_block(ptr);
	return 0;
}

/* A process's end (its last thread's): what it never freed is as old as it
 * was then, not at the cut that finds it gone, which comes up to a window
 * later. Every process's (whether it holds sampled blocks is the
 * collector's to know); the oldest are evicted first if cuts are far apart. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ember_live_exit, struct task_struct *task)
{
	__u32 pid = task->tgid;
	__u64 now = bpf_ktime_get_ns();

	if (task->signal->live.counter == 0)
		bpf_map_update_elem(&live_exits, &pid, &now, BPF_ANY);
	return 0;
}
