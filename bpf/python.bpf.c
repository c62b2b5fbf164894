// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* CPython's frames in user stacks, for the unwinder (bpf/unwind.bpf.c).
 *
 * A thread's Python call chain hangs off its thread state: the newest
 * frame, each frame's older one, each frame's code object and position.
 * The eval loop (_PyEval_EvalFrameDefault) runs a frame, and from 3.11 a
 * whole run of frames called Python to Python, in one native call. So
 * that a C extension's frames sit above the Python function that called
 * it, the frames of each eval-loop call go in place of that call's native
 * frame: they are read ahead, one call's worth (py_pending), and put in
 * when the unwinder steps through the native frame that is theirs
 * (python_runs). Where the walk never meets it, they are left out and
 * counted: never put in the wrong place.
 *
 * Which thread state is the current thread's: the one whose thread_id
 * (pthread_self()) the task's thread pointer gives (x86_64: the fs base;
 * arm64: TPIDR_EL0, past glibc's struct pthread), the same in any pid
 * namespace; remembered per thread, checked at each use. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "record.bpf.h"

/* Set by the collector per process it finds CPython in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct ember_python_process);
} python_processes SEC(".maps");

/* A thread's state, or none, found when. */
struct python_thread {
	__u64 tstate; /* 0: the thread has none (a native thread): looked for again after a while */
	__u64 found_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32); /* tid */
	__type(value, struct python_thread);
} python_threads SEC(".maps");

/* Stacks whose Python chain was cut short: a frame could not be read
 * (unread), or the walk never met the native frame of an eval-loop call
 * whose frames were read (unplaced). */
__u64 python_unread = 0;
__u64 python_unplaced = 0;

/* Interpreters and threads searched for a thread's state at most. */
#define PY_INTERPRETERS 2
#define PY_THREADS 256
/* A thread without a state is looked for again after this long: a native
 * thread may call into Python later (PyGILState_Ensure). */
#define PY_RECHECK_NS 1000000000ull

#define FRAME_OWNED_BY_GENERATOR 1

#if defined(__TARGET_ARCH_arm64)
#define THREAD_POINTER thread.uw.tp_value
#else
#define THREAD_POINTER thread.fsbase
#endif

/* A word of user memory, 0 if it cannot be read (the helper zeroes what
 * it fails to read: no branch, which in a loop the verifier would follow
 * both ways every round). */
static __always_inline __u64 read_u64(__u64 address)
{
	__u64 v;

	bpf_probe_read_user(&v, sizeof(v), (void *)address);
	return v;
}

/* A field of the frame at buf (in py_window): the masks keep the verifier's
 * bounds; offsets of pointers are multiples of 8, of ints of 4. */
static __always_inline __u64 field_u64(const __u8 *buf, __s16 at)
{
	return *(const __u64 *)(buf + (at & 0x78));
}

static __always_inline __s32 field_s32(const __u8 *buf, __s16 at)
{
	return *(const __s32 *)(buf + (at & 0x7c));
}

static __always_inline __u8 field_u8(const __u8 *buf, __s16 at)
{
	return buf[at & 0x7f];
}

/* Of the thread states from `tstate` on (each next at `next`), the one
 * whose thread_id (at `id`) is `self`, or 0. In a function of its own:
 * verified once, not once for each way out of it. */
__noinline __u64 ember_python_thread_in(__u64 tstate, __u64 self, __u32 id, __u32 next)
{
	__u32 i;

	for (i = 0; i < PY_THREADS && tstate; i++) {
		if (read_u64(tstate + id) == self)
			return tstate;
		tstate = read_u64(tstate + next);
	}
	return 0;
}

/* The thread state of the thread whose thread pointer is `self`, or 0. */
static __always_inline __u64 find_thread_state(const struct ember_python_process *p, __u64 self)
{
	const struct ember_python_layout *l = &p->layout;
	__u64 interp = read_u64(p->runtime + l->runtime_interpreters), tstate = 0;
	__u32 i;

	for (i = 0; i < PY_INTERPRETERS && interp && !tstate; i++) {
		tstate = ember_python_thread_in(read_u64(interp + l->interp_threads), self, l->tstate_thread_id,
						l->tstate_next);
		interp = read_u64(interp + l->interp_next);
	}
	return tstate;
}

/* The `bytes` of the frame at `frame`, in walk's window, read so that it
 * ends with this frame and holds the older frames below it (a data stack's,
 * 3.11+), down to the start of the frame's page at most (the page below may
 * not be mapped); none if unreadable. */
static __always_inline __u8 *frame_in_window(struct ember_unwind_walk *walk, __u64 frame, __u32 bytes)
{
	__u64 lo = walk->state.py_window_lo, end = frame + bytes, off = frame - lo, size;

	if (frame < lo || end > lo + walk->state.py_window_bytes) {
		lo = end > EMBER_PY_WINDOW ? end - EMBER_PY_WINDOW : 0;
		if (lo < (frame & ~4095ull))
			lo = frame & ~4095ull;
		size = end - lo;
		if (size > EMBER_PY_WINDOW || size == 0)
			return 0;
		if (bpf_probe_read_user(walk->py_window, size, (void *)lo)) {
			walk->state.py_window_bytes = 0;
			return 0;
		}
		walk->state.py_window_lo = lo;
		walk->state.py_window_bytes = size;
		off = frame - lo;
	}
	return &walk->py_window[off & (EMBER_PY_WINDOW - 1)];
}

/* Reads the next frame of the chain walk `slot` reads (py_frame) into
 * py_pending; 1 when it was the last of its eval-loop call's, or the chain
 * ended. A frame a call: a loop over frames here would make the verifier
 * follow each of its branches in every round. */
__noinline int ember_python_frame(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_python_process *p;
	struct ember_python_layout *l;
	__u64 frame, code, previous, word;
	__s64 index;
	__u32 n;
	__u8 owner, *buf;

	if (!walk)
		return 1;
	p = &walk->state.py;
	l = &p->layout;
	frame = walk->state.py_frame;
	n = walk->state.py_count;
	if (!frame || n >= EMBER_MAX_STACK_DEPTH)
		return 1;
	buf = frame_in_window(walk, frame, p->frame_bytes & 127);
	if (!buf) {
		__sync_fetch_and_add(&python_unread, 1);
		walk->state.py_frame = 0;
		return 1;
	}
	owner = l->frame_owner >= 0 ? field_u8(buf, l->frame_owner) : 0;
	previous = field_u64(buf, l->frame_previous);
	walk->state.py_frame = previous;
	/* 3.12+: the entry frame an eval-loop call pushes on its native
	 * stack, below its Python frames, marks it. */
	if (l->entry == EMBER_PY_ENTRY_SHIM && owner >= l->shim_owner) {
		walk->state.py_anchor = frame;
		return 1;
	}
	code = field_u64(buf, l->frame_code) & ~(__u64)l->code_tag_mask;
	if (l->instr_kind == EMBER_PY_INSTR_LASTI_BYTES || l->instr_kind == EMBER_PY_INSTR_LASTI_UNITS) {
		index = field_s32(buf, l->frame_instr);
		if (l->instr_kind == EMBER_PY_INSTR_LASTI_BYTES && index > 0)
			index >>= 1;
	} else {
		index = (__s64)(field_u64(buf, l->frame_instr) - code - l->code_adaptive) >> 1;
	}
	index += 1;
	if (index < 0 || index >= (__s64)EMBER_PY_INSTR_UNKNOWN)
		index = EMBER_PY_INSTR_UNKNOWN;
	word = EMBER_FRAME_PYTHON | (__u64)index << EMBER_PY_INSTR_SHIFT | ((code >> 3) & EMBER_PY_CODE_MASK);
	if (owner == FRAME_OWNED_BY_GENERATOR)
		word |= EMBER_PY_FRAME_GENERATOR;
	barrier_var(n);
	walk->py_pending[n & (EMBER_MAX_STACK_DEPTH - 1)] = word;
	walk->state.py_count = n + 1;
	/* Up to 3.10 each frame is an eval-loop call; in 3.11 the call's
	 * oldest frame is flagged. */
	return l->entry == EMBER_PY_ENTRY_EVERY ||
	       (l->entry == EMBER_PY_ENTRY_FLAG && field_u8(buf, l->frame_is_entry));
}

/* Reads the frames of the next eval-loop call into walk `slot`. */
__noinline int ember_python_read_call(__u32 slot)
{
	__u32 i;

	for (i = 0; i < EMBER_MAX_STACK_DEPTH; i++)
		if (ember_python_frame(slot))
			break;
	return 0;
}

/* Whether walk `slot` is of a CPython process, and its layout (copied:
 * the frames' reads use it without a lookup each). */
__noinline int ember_python_lookup(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_python_process *p;

	if (!walk)
		return 0;
	p = bpf_map_lookup_elem(&python_processes, &walk->state.pid);
	walk->state.python = p != 0;
	walk->state.py_tid = 0;
	if (p)
		walk->state.py = *p;
	return 0;
}

__noinline int ember_python_begin(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_python_process *p;
	struct python_thread *known = 0, found;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 self, tstate, newest;
	struct task_struct *task;

	if (!walk)
		return 0;
	walk->state.py_count = 0;
	walk->state.py_frame = 0;
	walk->state.py_window_bytes = 0;
	if (!walk->state.python)
		return 0;
	p = &walk->state.py;
	if (task_by_reads) {
		task = (struct task_struct *)bpf_get_current_task();
		self = BPF_CORE_READ(task, THREAD_POINTER);
	} else {
		self = bpf_get_current_task_btf()->THREAD_POINTER;
	}
	self -= p->thread_pointer_offset;
	/* The thread's state: the last walk's on this CPU (mostly the same
	 * thread's), else the one found for it before, if still its. */
	if (walk->state.py_tid == tid)
		tstate = walk->state.py_tstate;
	else if ((known = bpf_map_lookup_elem(&python_threads, &tid)))
		tstate = known->tstate;
	else
		tstate = 0;
	if (tstate && read_u64(tstate + p->layout.tstate_thread_id) != self)
		tstate = 0;
	walk->state.py_tid = 0;
	if (!tstate) {
		if (!known)
			known = bpf_map_lookup_elem(&python_threads, &tid);
		found.found_ns = bpf_ktime_get_ns();
		if (known && !known->tstate && found.found_ns - known->found_ns < PY_RECHECK_NS)
			return 0;
		found.tstate = find_thread_state(p, self);
		bpf_map_update_elem(&python_threads, &tid, &found, BPF_ANY);
		tstate = found.tstate;
		if (!tstate)
			return 0;
	}
	walk->state.py_tid = tid;
	walk->state.py_tstate = tstate;
	/* The newest frame: 3.11 and 3.12 reach it through the _PyCFrame of
	 * the newest eval-loop call, 3.11's marker of that call. */
	newest = read_u64(tstate + p->layout.tstate_frame);
	walk->state.py_anchor = newest;
	if (p->layout.cframe_current_frame >= 0 && newest)
		newest = read_u64(newest + p->layout.cframe_current_frame);
	walk->state.py_frame = newest;
	ember_python_read_call(slot);
	return 0;
}

__noinline int ember_python_emit(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_python_process *p;
	__u32 at, n;

	if (!walk)
		return 0;
	at = walk->state.frames - 1;
	n = walk->state.py_count;
	if (at >= EMBER_MAX_STACK_DEPTH || n > EMBER_MAX_STACK_DEPTH)
		return 0;
	if (n > EMBER_MAX_STACK_DEPTH - at)
		n = EMBER_MAX_STACK_DEPTH - at;
	if (n == EMBER_MAX_STACK_DEPTH)
		n--; /* the masks below keep the copy inside ip[] for the verifier */
	barrier_var(at);
	barrier_var(n);
	bpf_probe_read_kernel(&walk->ip[at & (EMBER_MAX_STACK_DEPTH - 1)], (n & (EMBER_MAX_STACK_DEPTH - 1)) * sizeof(__u64),
			      walk->py_pending);
	walk->state.frames = at + n;
	walk->state.py_count = 0;
	/* 3.11: the next call's _PyCFrame is this one's previous. */
	p = &walk->state.py;
	if (p->layout.entry == EMBER_PY_ENTRY_FLAG)
		walk->state.py_anchor = read_u64(walk->state.py_anchor + p->layout.cframe_previous);
	ember_python_read_call(slot);
	return 0;
}

/* Frames of an eval-loop call the walk never met. */
__noinline int ember_python_end(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);

	if (walk && walk->state.py_count)
		__sync_fetch_and_add(&python_unplaced, 1);
	return 0;
}
