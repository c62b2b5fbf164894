// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* User-stack unwinding from CFI tables, for every event program (linked
 * into the profile object; entry point in unwind.bpf.h).
 *
 * Why in the kernel: perf --call-graph dwarf copies 8 KB of stack per
 * sample and unwinds later (deep stacks cut at 8 KB, megabytes per second
 * written); a frame-pointer walk is cheap but loses the caller of every
 * function in code built without frame pointers (Debian's libc, -O2
 * builds), and wrongly so in a prologue. Tables give exact frames at the
 * cost of two binary searches per frame; a cache of the rows found (the
 * walk's, kept between samples) and a window of stack read ahead make a
 * frame seen before cost about what a frame-pointer step does.
 *
 * The tables (bpf/unwind.h) come from userspace: one sorted row array per
 * binary, built from its .eh_frame, all in one mmapable array map; per
 * process, its executable mappings and where each binary's rows lie.
 *
 * How the verifier is kept to a bounded amount of work on every kernel
 * from 5.10: a walk lives in a per-CPU map (unwind.bpf.h), and global
 * functions, each verified once, step it a few frames per call, called
 * from a plain loop. They take the walk's slot number: 5.10 allows no
 * pointer arguments (5.12 does), and bpf_loop would need 5.17. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "unwind.bpf.h"

/* Set by the collector before load: EMBER_UNWIND_*. */
const volatile __u32 unwind_mode = EMBER_UNWIND_FP;
/* Bumped by the collector (see unwind.bpf.h). */
__u32 runtimes_generation = 0;

/* Frames whose CFI the tables cannot express, walked by frame pointers
 * (auto) or ended at (cfi). */
__u64 unwind_unsupported = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* sized by the collector: the table memory cap */
	__type(key, __u32);
	__type(value, struct ember_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1); /* sized by the collector */
	__type(key, __u32);     /* tgid */
	__type(value, struct ember_unwind_process);
} unwind_processes SEC(".maps");

/* Offsets of the interrupted registers in the kernel's signal frame, at
 * the sp its return trampoline runs with. */
#if defined(__TARGET_ARCH_arm64)
#define IS_ARM64 1
#define SIGFRAME_REG(field) __builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.field)
#define SIGFRAME_FP SIGFRAME_REG(regs[29])
#define SIGFRAME_LR SIGFRAME_REG(regs[30])
#define SIGFRAME_SP SIGFRAME_REG(sp)
#define SIGFRAME_PC SIGFRAME_REG(pc)
#else
#define IS_ARM64 0
/* struct rt_sigframe less its return address, which the handler's return
 * popped: the ucontext, then in its mcontext the saved rbp, rsp, rip
 * (arch/x86/include/uapi/asm/sigcontext.h). */
#define UC_MCONTEXT 40
#define SIGFRAME_FP (UC_MCONTEXT + 10 * 8)
#define SIGFRAME_SP (UC_MCONTEXT + 15 * 8)
#define SIGFRAME_PC (UC_MCONTEXT + 16 * 8)
#endif

/* Rows searched per binary at most: 2^24. */
#define ROW_SEARCH_STEPS 24
#define MAPPING_SEARCH_STEPS 9 /* log2(EMBER_UNWIND_MAPPINGS) + 1 */

/* Frames a call of ember_unwind_steps walks at most: each call looks up
 * its walk and process again, a few tens of nanoseconds. */
#define STEPS_PER_CALL 4

struct unwind_walks_map unwind_walks SEC(".maps");

/* The index of the mapping of process `p` that holds `pc`, or -1. */
static __always_inline int find_mapping(struct ember_unwind_process *p, __u64 pc)
{
	/* The answer is the last mapping in [lo, hi) starting at or below pc. */
	__u32 lo = 0, hi, i;
	struct ember_unwind_mapping *m;

	hi = p->count;
	if (hi == 0 || hi > EMBER_UNWIND_MAPPINGS)
		return -1;
	for (i = 0; i < MAPPING_SEARCH_STEPS && hi - lo > 1; i++) {
		__u32 mid = lo + (hi - lo) / 2;

		if (p->mappings[mid & (EMBER_UNWIND_MAPPINGS - 1)].start <= pc)
			lo = mid;
		else
			hi = mid;
	}
	m = &p->mappings[lo & (EMBER_UNWIND_MAPPINGS - 1)];
	return pc >= m->start && pc < m->end ? (int)lo : -1;
}

/* The row of mapping `m` that covers `key` (a pc less the table's
 * base), or none before its first. A plain loop: its bounds are map keys,
 * which the verifier need not track precisely, so it checks each step once
 * (where the mapping search's, offsets into a map value, would multiply
 * its paths). */
static __always_inline struct ember_unwind_row *find_row(struct ember_unwind_mapping *m, __u32 key)
{
	__u32 lo = m->first, hi = m->first + m->rows, i;
	struct ember_unwind_row *row;

	/* The answer is the last row in [lo, hi) with row->pc <= key. */
	for (i = 0; i < ROW_SEARCH_STEPS && hi - lo > 1; i++) {
		__u32 mid = lo + (hi - lo) / 2;

		row = bpf_map_lookup_elem(&unwind_rows, &mid);
		if (!row)
			return 0;
		if (row->pc <= key)
			lo = mid;
		else
			hi = mid;
	}
	row = bpf_map_lookup_elem(&unwind_rows, &lo);
	return row && row->pc <= key ? row : 0;
}

/* The row of mapping `m` that covers `pc`, through the walk's row cache. */
static __always_inline struct ember_unwind_row *cached_row(struct ember_unwind_walk *walk, struct ember_unwind_mapping *m,
							   __u64 pc)
{
	struct ember_row_cache_entry *e;
	struct ember_unwind_row *row;
	__u32 key, i;

	if (pc < m->base || pc - m->base > 0xffffffffull)
		return 0;
	key = (__u32)(pc - m->base);
	i = ((key ^ m->table * 0x85ebca6bu) * 0x9e3779b1u) >> (32 - EMBER_ROW_CACHE_BITS);
	e = &walk->rows[i & (EMBER_ROW_CACHE - 1)];
	if (e->table == m->table && e->pc == key && m->table)
		return &e->row;
	row = find_row(m, key);
	if (row) {
		e->table = m->table;
		e->pc = key;
		e->row = *row;
	}
	return row;
}

static __always_inline long read_user(__u64 *to, __u64 address)
{
	return bpf_probe_read_user(to, sizeof(*to), (void *)address);
}

/* One frame up by the frame-pointer chain: code without CFI. `record_at_top`:
 * the frame's record lies at its top (EMBER_MAPPING_JIT), the caller's sp
 * right above it. */
static __always_inline long frame_pointer_step(struct ember_unwind_state *w, bool record_at_top)
{
	__u64 frame[2]; /* at rbp: the caller's rbp, the return address */

	if (!w->bp) {
		w->stop = EMBER_STOP_FP_END;
		return 1;
	}
	if (w->bp < w->sp) {
		w->stop = EMBER_STOP_BAD_FRAME;
		return 1;
	}
	if (read_stack(w, w->bp, frame, 2)) {
		w->stop = EMBER_STOP_BAD_READ;
		return 1;
	}
	if (!frame[1]) {
		w->stop = EMBER_STOP_FP_END;
		return 1;
	}
	w->sp = w->bp + 16;
	w->bp = frame[0];
	w->ip = code_address(frame[1]);
	w->exact = false;
	w->guessed = true;
	w->sp_unknown = IS_ARM64 && !record_at_top;
	return 0;
}

/* Code the tables do not cover: frame pointers (auto), or the end (cfi).
 * `in_file`: the code lies in a file whose other code has a table (V8's
 * builtins in node), not in a mapping without one (JIT code). `flags`: its
 * mapping's EMBER_MAPPING_*. */
static __always_inline long without_table(struct ember_unwind_state *w, __u32 stop, bool in_file, __u32 flags)
{
	if (unwind_mode == EMBER_UNWIND_AUTO) {
		if (w->v8) {
			w->v8_fp = w->bp;
			w->v8_in_file = in_file;
			w->v8_leaf_builtin = in_file && w->exact && w->frames == 1;
			if (w->v8_leaf_builtin) {
				w->v8_leaf_pc = w->ip;
				w->v8_leaf_sp = w->sp;
			}
		}
		return frame_pointer_step(w, flags & EMBER_MAPPING_JIT);
	}
	w->stop = stop;
	return 1;
}

/* The caller's registers from a signal frame: the interrupted code's. */
static __always_inline long signal_step(struct ember_unwind_state *w, struct ember_unwind_walk *out)
{
	__u64 ip, sp, bp;

	if (read_user(&ip, w->sp + SIGFRAME_PC) || read_user(&sp, w->sp + SIGFRAME_SP) ||
	    read_user(&bp, w->sp + SIGFRAME_FP)) {
		w->stop = EMBER_STOP_BAD_READ;
		return 1;
	}
#if defined(__TARGET_ARCH_arm64)
	if (read_user(&w->lr, w->sp + SIGFRAME_LR)) {
		w->stop = EMBER_STOP_BAD_READ;
		return 1;
	}
#endif
	/* The trampoline's frame holds the handler's return address, the
	 * trampoline's first instruction, not a call's: see step(). */
	if (w->frames > 0)
		out->ip[(w->frames - 1) & (EMBER_MAX_STACK_DEPTH - 1)] += 1;
	w->ip = ip;
	w->sp = sp;
	w->bp = bp;
	w->exact = true;
	return 0;
}

#if defined(__TARGET_ARCH_arm64)
/* Whether instruction `at` of `c` begins the end of a HotSpot epilogue:
 * [ldr x8, [x28, #poll]; cmp sp, x8; b.hi <poll stub>;] ret (the return
 * poll, JDK 17 on). `at` is a constant on each path the verifier follows. */
static __always_inline bool returns(const __u32 *c, __u32 at)
{
	if ((c[at] & 0xffc003ff) == 0xf9400388)
		at++;
	if (c[at] == 0xeb2863ff)
		at++;
	if ((c[at] & 0xff00001f) == 0x54000008)
		at++;
	return c[at] == 0xd65f03c0;
}

/* A compiled method caught tearing its frame down (C2's MachEpilogNode,
 * C1's return_op: ldp x29, x30, [sp, #F-16]; add sp, sp, #F; [return
 * poll]; ret; frames over 512 bytes: add sp, sp, #F-16; ldp x29, x30,
 * [sp], #16; ...). Until sp passes the frame record its memory still holds
 * the caller's fp and return address, and the row holds; at the ldp of a
 * large frame the record is at sp; after it the return address is in x30
 * and sp is the caller's. Told by decoding forward from pc. 0: not in an
 * epilogue's tail. */
static __always_inline long compiled_epilogue(struct ember_unwind_state *w)
{
	__u32 code[EMBER_EPILOGUE_BYTES / 4];
	__u64 pair[2]; /* at sp: the caller's fp and return address */

	if (bpf_probe_read_user(code, sizeof(code), (void *)w->ip))
		return 0;
	if (code[0] == 0xa8c17bfd) { /* ldp x29, x30, [sp], #16 */
		if (!returns(code, 1) || bpf_probe_read_user(pair, sizeof(pair), (void *)w->sp) || !pair[1])
			return 0;
		w->bp = pair[0];
		w->ip = code_address(pair[1]);
		w->sp += 16;
	} else {
		if (!returns(code, 0) || !w->lr)
			return 0;
		w->ip = code_address(w->lr);
	}
	w->exact = false;
	return 1;
}
#else
/* Whether `c` begins the end of a HotSpot epilogue: [cmp rsp, [r15+poll];
 * ja <poll stub>;] ret (the return poll, JDK 17 on: its displacement 8 or
 * 32 bits; the jump rel32, to a stub placed after the method's code). `at`
 * is a constant on each path the verifier follows. */
static __always_inline bool returns(const __u8 *c, __u32 at)
{
	if (c[at] == 0x49 && c[at + 1] == 0x3b && c[at + 2] == 0x67)
		at += 4;
	else if (c[at] == 0x49 && c[at + 1] == 0x3b && c[at + 2] == 0xa7)
		at += 7;
	if (c[at] == 0x0f && c[at + 1] == 0x87)
		at += 6;
	return c[at] == 0xc3;
}

/* A compiled method caught tearing its frame down (C2's MachEpilogNode,
 * C1's return_op: add rsp, F-16; pop rbp; [return poll]; ret): before add
 * rsp its frame is whole, at pop rbp the caller's rbp is at rsp and its
 * return address above, after it the return address is at rsp. Told by
 * decoding forward from pc, the only instructions a thread can be at
 * there. 0: not in an epilogue's tail. */
static __always_inline long compiled_epilogue(struct ember_unwind_state *w)
{
	__u8 code[EMBER_EPILOGUE_BYTES];
	__u64 pair[2]; /* at rsp: the caller's rbp (when popping it) and return address */
	bool popping;

	if (bpf_probe_read_user(code, sizeof(code), (void *)w->ip))
		return 0;
	popping = code[0] == 0x5d;
	if (!(popping ? returns(code, 1) : returns(code, 0)))
		return 0;
	if (bpf_probe_read_user(pair, popping ? 16 : 8, (void *)w->sp))
		return 0;
	if (popping) {
		w->bp = pair[0];
		pair[0] = pair[1];
	}
	if (!pair[0])
		return 0;
	w->sp += popping ? 16 : 8;
	w->ip = pair[0];
	w->exact = false;
	return 1;
}
#endif

/* The caller of an interpreted Java frame (see EMBER_ROW_INTERPRETER);
 * the frame itself is recorded as its method where the row says where
 * the Method* is. */
static __always_inline long interpreter_step(struct ember_unwind_state *w, __s8 method_slot, struct ember_unwind_walk *out)
{
	__u64 frame[3]; /* at rbp - 8: the caller's sp, rbp, return address */
	__u64 method;

	if (method_slot && w->frames > 0 && !read_user(&method, w->bp + (__s64)method_slot * 8) && method &&
	    method <= EMBER_FRAME_METHOD_MASK)
		out->ip[(w->frames - 1) & (EMBER_MAX_STACK_DEPTH - 1)] = EMBER_FRAME_METHOD | method;

	if (bpf_probe_read_user(frame, sizeof(frame), (void *)(w->bp - 8))) {
		w->stop = EMBER_STOP_BAD_READ;
		return 1;
	}
	if (!frame[2] || frame[0] <= w->sp) {
		w->stop = EMBER_STOP_BAD_FRAME;
		return 1;
	}
	w->sp = frame[0];
	w->sp_unknown = false;
	w->bp = frame[1];
	w->ip = code_address(frame[2]);
	w->exact = false;
	return 0;
}

/* Records the current frame of walk `w` into `out`, and the pc it runs
 * (w->pc); 1 when the stack is full. */
static __always_inline int record_frame(struct ember_unwind_state *w, struct ember_unwind_walk *out)
{
	if (w->frames >= EMBER_MAX_STACK_DEPTH) {
		w->stop = EMBER_STOP_DEPTH;
		return 1;
	}
	/* Frames above the leaf are read as return addresses: their names are
	 * looked up one byte back, in the call. An exact pc above the leaf (the
	 * code a signal interrupted) is sent one byte on, so that the lookup
	 * lands on it and not in the function before. */
	out->ip[w->frames & (EMBER_MAX_STACK_DEPTH - 1)] = w->exact && w->frames ? w->ip + 1 : w->ip;
	w->frames++;
	/* A return address points after its call: look up the call. */
	w->pc = w->exact ? w->ip : w->ip - 1;
	return 0;
}

/* Records the current frame of walk `w` in process `p` into `out`, then
 * steps to its caller; 1 ends the walk. */
static __always_inline int step(struct ember_unwind_state *w, struct ember_unwind_process *p, struct ember_unwind_walk *out)
{
	struct ember_unwind_mapping *m;
	struct ember_unwind_row *row;
	__u64 pc, cfa, ra, bp, slot;
	int found;

	if (record_frame(w, out))
		return 1;
	pc = w->pc;
	/* Indices, not pointers that may be null: 5.15's verifier loses which
	 * of two registers a compiled select left valid. */
	found = w->mapping;
	if (found < 0 || pc < p->mappings[found & (EMBER_UNWIND_MAPPINGS - 1)].start ||
	    pc >= p->mappings[found & (EMBER_UNWIND_MAPPINGS - 1)].end) {
		found = find_mapping(p, pc);
		/* A pc the walk trusts (not found by frame pointers) outside
		 * every mapping of a process whose mappings all fit: code mapped
		 * since its tables were loaded (a library a command's loader
		 * mapped after its first sample, dlopen, a grown code cache).
		 * Its stack is then copied, for the collector to read the
		 * mappings again and unwind it (see walk_stacks). */
		if (found < 0 && !w->guessed && !p->left_out) {
			w->stop = EMBER_STOP_NOT_LOADED;
			return 1;
		}
		if (found < 0)
			return without_table(w, EMBER_STOP_UNMAPPED, false, 0);
		w->mapping = found;
	}
	m = &p->mappings[found & (EMBER_UNWIND_MAPPINGS - 1)];
	if (!m->rows)
		return without_table(w, EMBER_STOP_NO_TABLE, false, m->flags);
	row = cached_row(out, m, pc);
	if (!row)
		return without_table(w, EMBER_STOP_NO_TABLE, true, m->flags);
	/* After a frame-pointer step on arm64 only the rules that do not
	 * start from sp hold. */
	if (w->sp_unknown && row->type != EMBER_ROW_CFA_FP && row->type != EMBER_ROW_ROOT &&
	    row->type != EMBER_ROW_INTERPRETER)
		return without_table(w, EMBER_STOP_NO_TABLE, true, m->flags);
	switch (row->type) {
	case EMBER_ROW_CFA_SP:
		cfa = w->sp + row->cfa;
		break;
	case EMBER_ROW_CFA_FP:
		cfa = w->bp + row->cfa;
		break;
	case EMBER_ROW_PLT:
		cfa = w->sp + 8 + ((w->ip & 15) >= row->cfa ? 8 : 0);
		break;
	case EMBER_ROW_SIGNAL:
		return signal_step(w, out);
	case EMBER_ROW_INTERPRETER:
		return interpreter_step(w, row->fp, out);
	case EMBER_ROW_COMPILED:
		cfa = w->sp + row->cfa;
		if (w->exact && compiled_epilogue(w))
			return 0;
		break;
	case EMBER_ROW_ROOT:
		w->stop = EMBER_STOP_ROOT;
		return 1;
	case EMBER_ROW_NONE:
		return without_table(w, EMBER_STOP_NO_TABLE, true, m->flags);
	default:
		__sync_fetch_and_add(&unwind_unsupported, 1);
		return without_table(w, EMBER_STOP_UNSUPPORTED, true, m->flags);
	}
	/* The return address and the caller's fp, as the row says; one read
	 * for both where they lie side by side, a frame record (pushed by a
	 * frame-pointer prologue, or arm64's stp x29, x30). */
	slot = (row->ra == EMBER_RA_RECORD_LOW ? cfa - row->cfa : cfa) + (__s64)row->fp * 8;
	if (row->ra == EMBER_RA_RECORD || row->ra == EMBER_RA_RECORD_LOW) {
		__u64 pair[2];

		if (read_stack(w, slot, pair, 2)) {
			w->stop = EMBER_STOP_BAD_READ;
			return 1;
		}
		w->bp = pair[0];
		ra = pair[1];
	} else if (row->ra == EMBER_RA_SAVED) {
		if (read_stack(w, slot, &ra, 1)) {
			w->stop = EMBER_STOP_BAD_READ;
			return 1;
		}
	} else {
		if (row->ra == EMBER_RA_LINK) {
			/* Only where the thread was: in its callers, the link
			 * register has long been given other return addresses. */
			if (!w->exact) {
				w->stop = EMBER_STOP_BAD_FRAME;
				return 1;
			}
			ra = w->lr;
		} else if (read_stack(w, cfa - 8, &ra, 1)) {
			w->stop = EMBER_STOP_BAD_READ;
			return 1;
		}
		if (row->fp) {
			if (read_stack(w, slot, &bp, 1)) {
				w->stop = EMBER_STOP_BAD_READ;
				return 1;
			}
			w->bp = bp;
		}
	}
	ra = code_address(ra);
	/* The caller's frame lies above: a CFA below sp is a bad row or a
	 * corrupt stack, and one at sp would loop, unless the return address
	 * came from the link register (a leaf without a frame). */
	if (!ra || cfa < w->sp || (cfa == w->sp && row->ra != EMBER_RA_LINK)) {
		w->stop = EMBER_STOP_BAD_FRAME;
		return 1;
	}
	w->sp = cfa;
	w->sp_unknown = false;
	w->ip = ra;
	w->exact = false;
	return 0;
}

/* Whether the native frame just stepped through, whose locals lie in
 * [lo, hi), is the eval-loop call the pending Python frames ran in: up to
 * 3.10 a frame in the eval loop's code, each call one Python frame; from
 * 3.11 the frame whose locals hold the call's marker (the code may lie
 * outside the exported function: Debian's builds move parts of it). */
static __always_inline bool python_runs(struct ember_unwind_state *w, __u64 lo, __u64 hi)
{
	if (w->py.layout.entry == EMBER_PY_ENTRY_EVERY)
		return w->pc >= w->py.eval_start && w->pc < w->py.eval_end;
	return w->py_anchor >= lo && w->py_anchor < hi;
}

/* The runtimes' frames of the native frame just stepped through, whose
 * locals lie in [lo, hi): the Python frames it ran, its JavaScript function. */
static __always_inline void runtime_frames(__u32 slot, struct ember_unwind_walk *walk, __u64 lo, __u64 hi)
{
	if (walk->state.py_count && walk->state.frames && python_runs(&walk->state, lo, hi))
		ember_python_emit(slot);
	if (walk->state.v8_fp)
		ember_v8_frame(slot);
}

/* Up to STEPS_PER_CALL frames of walk `slot`; 1 when it ended. A global
 * function, verified once: the loop that calls it (ember_unwind_user)
 * would otherwise be verified frame by frame. */
__noinline int ember_unwind_steps(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_unwind_process *process;
	__u32 i;

	if (!walk)
		return 1;
	process = bpf_map_lookup_elem(&unwind_processes, &walk->state.pid);
	if (!process) {
		walk->state.stop = EMBER_STOP_NOT_LOADED;
		return 1;
	}
	for (i = 0; i < STEPS_PER_CALL; i++) {
		__u64 sp = walk->state.sp;
		int ended = step(&walk->state, process, walk);

		/* The frame's locals: from its sp up to its CFA (the caller's sp). */
		runtime_frames(slot, walk, sp, walk->state.sp);
		if (ended)
			return 1;
	}
	return 0;
}

__noinline int ember_unwind_user(__u32 slot)
{
	struct ember_unwind_walk *walk;
	__u32 i;

	for (i = 0; i <= EMBER_MAX_STACK_DEPTH / STEPS_PER_CALL; i++)
		if (ember_unwind_steps(slot))
			break;
	ember_python_end(slot);
	walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	if (!walk)
		return EMBER_STOP_BAD_FRAME << 16;
	return walk->state.frames | walk->state.stop << 16;
}

/* A process's entry goes with its last thread: the table of processes
 * holds live ones only. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(ember_unwind_exit, struct task_struct *task)
{
	__u32 pid = task->tgid;

	if (task->signal->live.counter == 0)
		bpf_map_delete_elem(&unwind_processes, &pid);
	return 0;
}
