// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Node.js's JavaScript frames in user stacks, for the unwinder
 * (bpf/unwind.bpf.c).
 *
 * V8's code (its JIT code and the builtins embedded in node, the
 * interpreter among them) has no CFI: the unwinder walks it by frame
 * pointers, which V8 always keeps. A frame so walked in a V8 process is a
 * JavaScript function's when the slot below its saved fp holds a context
 * (a heap object, not a frame-type marker) and the slot below that a
 * JSFunction whose SharedFunctionInfo is one: the frame is then recorded
 * as that SharedFunctionInfo (EMBER_FRAME_V8), in place of the code's pc.
 * A leaf in the builtins keeps its name above the function it runs for
 * (a bytecode handler above the interpreted function, a frameless builtin
 * above its caller). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "record.bpf.h"

/* Set by the collector per process it finds V8 in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tgid */
	__type(value, struct ember_v8_process);
} v8_processes SEC(".maps");

#define V8_HEAP_OBJECT_TAG_MASK 3ull
#define V8_HEAP_OBJECT_TAG 1ull
#define V8_SMI_TAG_MASK 1ull

static __always_inline __u64 read_u64(__u64 address)
{
	__u64 v;

	bpf_probe_read_user(&v, sizeof(v), (void *)address);
	return v;
}

/* Whether walk `slot` is of a V8 process, and its layout. */
__noinline int ember_v8_lookup(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_v8_process *p;

	if (!walk)
		return 0;
	p = bpf_map_lookup_elem(&v8_processes, &walk->state.pid);
	walk->state.v8 = p != 0;
	if (p)
		walk->state.v8_layout = *p;
	return 0;
}

/* Whether `map` is the Map of objects of instance type `type`. The first
 * found is remembered in `*seen` and in the process's entry at `offset`
 * (a read-only root of V8's: it never moves), so that later objects need
 * no read of their map's type. */
static __always_inline bool v8_map_of(struct ember_unwind_walk *walk, __u64 map, __u16 type, __u64 *seen, __u32 offset)
{
	struct ember_v8_process *known;
	__u16 found = 0;

	if ((map & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG)
		return false;
	if (map == *seen)
		return true;
	bpf_probe_read_user(&found, sizeof(found),
			    (void *)(map - V8_HEAP_OBJECT_TAG + walk->state.v8_layout.map_instance_type));
	if (found != type)
		return false;
	*seen = map;
	known = bpf_map_lookup_elem(&v8_processes, &walk->state.pid);
	if (known && offset + sizeof(__u64) <= sizeof(*known))
		*(__u64 *)((char *)known + offset) = map;
	return true;
}

/* A 32-bit field of the Code header read into the walk (byte offset < 64). */
static __always_inline __u32 code_u32(struct ember_unwind_walk *walk, __u16 offset)
{
	return (__u32)(walk->state.v8_code[(offset >> 3) & 7] >> ((offset & 4) * 8));
}

/* The position word of an interpreted frame right above the leaf, a
 * bytecode handler's (with a frame of its own or none), whose
 * BytecodeArray is `array`; 0 if unknown. The interpreter keeps the
 * offset in a register, written to the frame only before calls. A
 * handler may reuse that register, so the offset is taken only where the
 * bytecode there is one whose handler (by the dispatch table's register)
 * starts at most 4 KiB before the leaf's pc. */
static __always_inline __u64 leaf_bytecode_offset(struct ember_unwind_walk *walk, __u64 array)
{
	struct ember_v8_process *p = &walk->state.v8_layout;
	__u64 pc = walk->state.v8_leaf_pc;
	__s64 offset = (__s64)(walk->state.v8_bytecode_offset - p->bytecode_start);
	__u64 length, handler;
	__u8 bytecode;

	if (!pc || !p->offset_in_register || walk->state.v8_bytecode_array != array ||
	    (array & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG)
		return 0;
	length = read_u64(array - V8_HEAP_OBJECT_TAG + p->array_length);
	if ((length & V8_SMI_TAG_MASK) || offset < 0 || offset >= (__s64)length >> 32 ||
	    bpf_probe_read_user(&bytecode, 1, (void *)(array - V8_HEAP_OBJECT_TAG + p->bytecode_start + 1 + offset)))
		return 0;
	handler = read_u64(walk->state.v8_dispatch_table + 8 * bytecode);
	if (pc < handler || pc - handler >= 4096)
		return 0;
	return EMBER_FRAME_V8_BYTECODE | (__u64)offset;
}

/* The return address into code [start, start + size) of a leaf builtin
 * without a frame, called by that code: on arm64 in the link register
 * (less a pointer authentication code) unless the builtin saved it; on
 * top of the leaf's stack, or just below what the builtin pushed since;
 * 0 if none there. */
static __always_inline __u64 leaf_caller(struct ember_unwind_walk *walk, __u64 start, __u32 size)
{
	__u64 *top = walk->state.v8_stack_top;

#if defined(__TARGET_ARCH_arm64)
	__u64 link = code_address(walk->state.lr);

	if (link > start && link - start <= size)
		return link;
#endif
	if (bpf_probe_read_user(top, sizeof(walk->state.v8_stack_top), (void *)walk->state.v8_leaf_sp))
		return 0;
	for (int i = 0; i < 3; i++)
		if (top[i] > start && top[i] - start <= size)
			return top[i];
	return 0;
}

/* The position word (--lines) of the JavaScript frame at `fp` running
 * `function`, whose pc is `pc` (a leaf builtin's: the builtin's), right
 * above the leaf if `at_leaf`; 0 if it has none. An optimized frame's
 * word becomes its Code's (`*word`), where the collector finds the
 * function and what was inlined into it; that of code the function does
 * not hold, the function's (bpf/v8.h). */
static __always_inline __u64 v8_position(struct ember_unwind_walk *walk, __u64 fp, __u64 function, __u64 pc,
					 bool at_leaf, __u64 *word)
{
	struct ember_v8_process *p = &walk->state.v8_layout;
	__u64 code, start, *slots = walk->state.v8_slots; /* slots: the bytecode offset, the BytecodeArray */
	__s64 offset;
	__u32 kind, size;

	code = read_u64(function - V8_HEAP_OBJECT_TAG + p->jsfunction_code);
	if ((code & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG || code > EMBER_FRAME_V8_MASK ||
	    bpf_probe_read_user(walk->state.v8_code, sizeof(walk->state.v8_code), (void *)(code - V8_HEAP_OBJECT_TAG)) ||
	    !v8_map_of(walk, walk->state.v8_code[0], p->code_type, &p->code_map,
		       __builtin_offsetof(struct ember_v8_process, code_map)))
		return 0;
	kind = code_u32(walk, p->code_flags) >> p->code_kind_shift & p->code_kind_mask;
	if (kind >= p->code_kind_baseline) {
		size = code_u32(walk, p->code_instruction_size);
		start = p->instructions_inline ? code - V8_HEAP_OBJECT_TAG + p->code_instruction_start
					       : walk->state.v8_code[(p->code_instruction_start >> 3) & 7];
		if (walk->state.v8_leaf_builtin)
			pc = leaf_caller(walk, start, size);
		if (pc >= start && pc - start < size) {
			/* Baseline code is the function's own (the collector finds
			 * it from the function): its frame word stays the function's. */
			if (kind != p->code_kind_baseline)
				*word = EMBER_FRAME_V8 | code | EMBER_V8_CODE;
			return EMBER_FRAME_V8_PC | (pc - start);
		}
		if (walk->state.v8_leaf_builtin)
			return 0;
	}
	if (walk->state.v8_in_file) {
		/* The interpreter's (the function's code, or older than it): its
		 * pc lies in V8's builtins (a bytecode handler's, the
		 * interpreter's return address). A frame that called out keeps
		 * its bytecode offset (slots[0]); one right above the leaf may
		 * not have. */
		if (read_stack(&walk->state, fp + p->fp_bytecode_offset, slots, 2))
			return 0;
		if (at_leaf)
			return leaf_bytecode_offset(walk, slots[1]);
		if (slots[0] & V8_SMI_TAG_MASK)
			return 0;
		offset = (__s64)slots[0] >> 32;
		offset -= p->bytecode_start;
		if (offset < 0 || offset > (__s64)EMBER_FRAME_V8_MASK)
			return 0;
		return EMBER_FRAME_V8_BYTECODE | (__u64)offset;
	}
	/* JIT code the function does not hold: optimized on stack replacement
	 * (a long loop's, entered as it ran), which its feedback vector keeps
	 * (or code replaced since). The collector looks for it there. */
	if (walk->state.v8_leaf_builtin || pc > EMBER_FRAME_V8_MASK || function > EMBER_FRAME_V8_MASK)
		return 0;
	*word = EMBER_FRAME_V8 | function | EMBER_V8_FUNCTION;
	return EMBER_FRAME_V8_PC | pc;
}

/* The frame of walk `slot` just stepped by frame pointers (v8_fp), as its
 * JavaScript function if it is one. */
__noinline int ember_v8_frame(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_v8_process *p;
	__u64 fp, *slots, function, shared, word, position = 0, pc; /* slots: the function, the context or marker */
	__u32 at;

	if (!walk)
		return 0;
	fp = walk->state.v8_fp;
	walk->state.v8_fp = 0;
	p = &walk->state.v8_layout;
	slots = walk->state.v8_slots;
	if (!fp)
		return 0;
	if (read_stack(&walk->state, fp + p->fp_function, slots, 2) || !(slots[1] & V8_SMI_TAG_MASK))
		return 0; /* a frame-type marker: V8's own frame, named by its code */
	function = slots[0];
	if ((function & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG)
		return 0;
	shared = read_u64(function - V8_HEAP_OBJECT_TAG + p->jsfunction_shared);
	if ((shared & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG || shared > EMBER_FRAME_V8_MASK ||
	    !v8_map_of(walk, read_u64(shared - V8_HEAP_OBJECT_TAG + p->heap_object_map), p->shared_function_info_type,
		       &p->shared_function_info_map, __builtin_offsetof(struct ember_v8_process, shared_function_info_map)))
		return 0;
	word = EMBER_FRAME_V8 | shared;
	at = walk->state.frames - 1;
	pc = walk->ip[at & (EMBER_MAX_STACK_DEPTH - 1)];
	if (walk->state.v8_leaf_builtin) {
		if (walk->state.frames >= EMBER_MAX_STACK_DEPTH)
			return 0;
		at = walk->state.frames++;
	}
	if (p->lines)
		position = v8_position(walk, fp, function, pc, at == 1, &word);
	walk->ip[at & (EMBER_MAX_STACK_DEPTH - 1)] = word;
	if (position && walk->state.frames < EMBER_MAX_STACK_DEPTH)
		walk->ip[walk->state.frames++ & (EMBER_MAX_STACK_DEPTH - 1)] = position;
	return 0;
}
