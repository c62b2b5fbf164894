/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The user-stack unwinder's entry point (bpf/unwind.bpf.c), for the event
 * programs. BPF only. */
#ifndef EMBER_UNWIND_BPF_H
#define EMBER_UNWIND_BPF_H

#include "profile.h"
#include "python.h"
#include "v8.h"
#include "unwind.h"

/* Where the walk starts: the user registers of the task. */
struct ember_user_regs {
	__u64 ip, sp, bp;
	__u64 lr; /* the link register (arm64 x30; 0 on x86_64) */
	/* V8's interpreter's registers for the bytecode running: its offset
	 * (x86-64 r9, arm64 x19), its BytecodeArray (r12, x20) and the table
	 * of the bytecodes' handlers (r15, x21) */
	__u64 v8_bytecode_offset, v8_bytecode_array, v8_dispatch_table;
	__u64 return_address; /* ip is a return address (the caller's, at a function's entry), not
	                         where the thread is */
};

#define EMBER_STACK_WINDOW 256 /* words */
#define EMBER_PY_WINDOW 512   /* bytes */

/* A walk's state between frames: only scalars, found by the global
 * functions that step it through a map (Linux 5.10's verifier takes
 * nothing else for their arguments). */
struct ember_unwind_state {
	__u64 ip, sp, bp;
	__u64 lr;    /* the link register, while exact (arm64) */
	bool exact;  /* ip is where the thread was (the leaf, or the interrupted code of a
	                signal frame), not a return address */
	bool guessed; /* a frame-pointer step was taken: ip may be garbage */
	bool sp_unknown; /* arm64: so was the last step, and sp is a guess (a frame record lies at its
	                    frame's bottom, not at its top as on x86_64 and in HotSpot's code:
	                    EMBER_MAPPING_JIT) */
	__u32 pid;
	__u32 frames;
	__u32 stop;
	__s32 mapping;  /* the last frame's mapping, or -1: the next frame is often in it too */
	__u64 pc;       /* the last frame's, as looked up (a return address less 1) */
	/* Stack words read ahead: a frame's saved registers and its callers'
	 * lie within a few hundred bytes, and one read of them all costs about
	 * what one read of a word does. [window_lo, + window_bytes). */
	__u64 window_lo;
	__u32 window_bytes;
	__u64 window[EMBER_STACK_WINDOW];
	/* A Python thread's frames (bpf/python.bpf.c), read ahead one eval-loop
	 * call at a time, wait in py_pending for the native frame of that call. */
	__u64 py_frame;   /* the chain's next frame to read; 0: none */
	__u64 py_anchor;  /* where that call keeps its marker, within its native frame: 3.11's
	                     _PyCFrame, 3.12+'s entry frame (EMBER_PY_ENTRY_FLAG, _SHIM) */
	__u32 py_count;   /* frames waiting in py_pending */
	/* The runtimes of process runtimes_pid, as their tables held them at
	 * runtimes_generation: kept from walk to walk (a CPU's samples are
	 * mostly of the process before; a lookup that misses the cache costs
	 * what a few frames do), looked up again for another process or once
	 * the collector changed a table. */
	__u32 runtimes_pid, runtimes_generation;
	bool python;                    /* the process runs CPython: */
	struct ember_python_process py; /* its layout */
	/* The thread state of thread py_tid (the last walk's), checked at use. */
	__u32 py_tid;
	__u64 py_tstate;
	__u64 py_window_lo;
	__u32 py_window_bytes;
	/* V8 (bpf/v8.bpf.c): the fp of the frame just stepped by frame
	 * pointers in a V8 process, for ember_v8_frame to name; 0: none. */
	__u64 v8_fp;
	struct ember_v8_process v8_layout; /* its frames' layout (see runtimes_pid) */
	/* Scratch of the V8 walker, here rather than on its stack (which a
	 * walk's chain of calls shares, 512 bytes in all): a Code's header,
	 * two frame slots, the top of a leaf builtin's stack. */
	__u64 v8_code[8];
	__u64 v8_slots[2];
	__u64 v8_stack_top[3];
	__u64 v8_bytecode_offset, v8_bytecode_array, v8_dispatch_table; /* the sample's ember_user_regs' */
	bool v8;              /* the process runs V8 (see runtimes_pid) */
	bool v8_in_file;      /* that frame's pc lies in a file's code (V8's builtins), not JIT code */
	__u64 v8_leaf_pc, v8_leaf_sp; /* the leaf's, where it is exact and in a file's code (V8's builtins) */
	bool v8_leaf_builtin; /* that frame is the leaf, in code of a file (V8's builtins): the
	                         function goes below it, not in its place */
};

/* The rows found lately, by table and pc: a sample's frames are mostly
 * those of the samples before it, and a row found again costs one read in
 * place of a binary search whose steps miss the cache (rows of libc,
 * libjvm: 15-20 steps). Direct-mapped. */
#define EMBER_ROW_CACHE_BITS 9
#define EMBER_ROW_CACHE (1 << EMBER_ROW_CACHE_BITS)

struct ember_row_cache_entry {
	__u32 table; /* ember_unwind_mapping.table; 0: empty */
	__u32 pc;    /* the pc looked up, from the table's base */
	struct ember_unwind_row row;
};

/* A walk and the frames it found, leaf first. One per scratch slot
 * (record.bpf.h) and CPU: programs that interrupt one another walk in
 * different ones, and keep their own row caches. */
struct ember_unwind_walk {
	struct ember_unwind_state state;
	__u64 ip[EMBER_MAX_STACK_DEPTH];
	__u64 py_pending[EMBER_MAX_STACK_DEPTH]; /* EMBER_FRAME_PYTHON words, newest first */
	/* Python frames read ahead: from 3.11 a thread's frames lie one below
	 * the other in its data stack, and one read of several costs about
	 * what one of a frame does. [py_window_lo, + py_window_bytes); a frame
	 * in it starts in its first EMBER_PY_WINDOW bytes, and its fields
	 * (up to 128 bytes in) fit. */
	__u8 py_window[EMBER_PY_WINDOW + 128];
	struct ember_row_cache_entry rows[EMBER_ROW_CACHE]; /* kept from walk to walk */
};

/* EMBER_UNWIND_*, set by the collector before load. */
extern const volatile __u32 unwind_mode;
/* Bumped by the collector after each change to a runtime's table of
 * processes (python_processes, v8_processes). */
extern __u32 runtimes_generation;

struct unwind_walks_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EMBER_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct ember_unwind_walk);
};
extern struct unwind_walks_map unwind_walks SEC(".maps");

/* A return address read from a frame or a register, as the code jumps to
 * it: on arm64 less the pointer authentication code that code built with
 * branch protection signs it with, in the bits above user addresses' 48. */
static __always_inline __u64 code_address(__u64 ra)
{
#if defined(__TARGET_ARCH_arm64)
	return ra & ((1ull << 48) - 1);
#else
	return ra;
#endif
}

/* Reads `words` (1 or 2) stack words at `address` through the walk's
 * window, which a miss moves to start there. The window ends at the end of
 * its page: the page above may not be mapped (the stack's top), and a
 * faulting read costs more than all the reads it would save. A read costs
 * about the same for a word as for the rest of the page, which 2 KB hold
 * mostly (on a Python 3.10 stack of 15 frames the sample took 10-20% less
 * BPF time than with 512 bytes). */
static __always_inline long read_stack(struct ember_unwind_state *w, __u64 address, __u64 *to, __u32 words)
{
	__u64 off = address - w->window_lo;
	__u32 bytes;

	if (address < w->window_lo || off + words * 8 > w->window_bytes || (off & 7)) {
		bytes = 4096 - (address & 4095);
		if (bytes > sizeof(w->window))
			bytes = sizeof(w->window);
		if (bytes < words * 8 || bpf_probe_read_user(w->window, bytes, (void *)address)) {
			w->window_bytes = 0;
			return bpf_probe_read_user(to, words * 8, (void *)address);
		}
		w->window_lo = address;
		w->window_bytes = bytes;
		off = 0;
	}
	to[0] = w->window[(off >> 3) & (EMBER_STACK_WINDOW - 1)];
	if (words > 1)
		to[1] = w->window[((off >> 3) + 1) & (EMBER_STACK_WINDOW - 1)];
	return 0;
}

/* Python (bpf/python.bpf.c): whether walk `slot` is of a CPython process,
 * and its layout; reads the first eval-loop call's frames of the current
 * thread into the walk; then puts the pending ones in place of the native
 * frame just recorded (whose call is theirs: python_runs) and reads the
 * next call's. */
int ember_python_lookup(__u32 slot);
int ember_python_begin(__u32 slot);
int ember_python_emit(__u32 slot);
int ember_python_end(__u32 slot);

/* V8 (bpf/v8.bpf.c): whether walk `slot` is of a V8 process; then names
 * the frame just stepped by frame pointers (state.v8_fp) as its
 * JavaScript function, if it is one. */
int ember_v8_lookup(__u32 slot);
int ember_v8_frame(__u32 slot);

/* Walks the stack from the start in walk `slot`: the number of frames |
 * the EMBER_STOP_* reason << 16. A global function, verified once
 * whatever calls it; its argument a scalar, as 5.10 wants. */
int ember_unwind_user(__u32 slot);

/* Unwinds the user stack of the current task (process `pid`) from `regs`,
 * by unwind_mode, in the walk of scratch slot `slot`: the walk (its
 * frames in ip[]), *result set to what ember_unwind_user returns; 0 if
 * the slot has no walk. */
static __always_inline struct ember_unwind_walk *ember_unwind(__u32 slot, const struct ember_user_regs *regs,
							       __u32 pid, int *result)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	__u32 generation;

	if (!walk)
		return 0;
	walk->state.ip = regs->ip;
	walk->state.sp = regs->sp;
	walk->state.bp = regs->bp;
	walk->state.lr = regs->lr;
	walk->state.exact = !regs->return_address;
	walk->state.guessed = false;
	walk->state.sp_unknown = false;
	walk->state.pid = pid;
	walk->state.frames = 0;
	walk->state.stop = EMBER_STOP_DEPTH;
	walk->state.mapping = -1;
	walk->state.window_bytes = 0;
	walk->state.v8_fp = 0;
	walk->state.v8_leaf_pc = 0;
	walk->state.v8_bytecode_offset = regs->v8_bytecode_offset;
	walk->state.v8_bytecode_array = regs->v8_bytecode_array;
	walk->state.v8_dispatch_table = regs->v8_dispatch_table;
	generation = *(volatile __u32 *)&runtimes_generation;
	if (walk->state.runtimes_pid != pid || walk->state.runtimes_generation != generation) {
		walk->state.runtimes_pid = pid;
		walk->state.runtimes_generation = generation;
		ember_python_lookup(slot);
		ember_v8_lookup(slot);
	}
	ember_python_begin(slot);
	*result = ember_unwind_user(slot);
	return walk;
}

#define EMBER_UNWIND_FRAMES(r) ((r) & 0xffff)
#define EMBER_UNWIND_STOP(r) ((__u32)(r) >> 16)

#endif
