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
__noinline int ember_v8_begin(__u32 slot)
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

/* The frame of walk `slot` just stepped by frame pointers (v8_fp), as its
 * JavaScript function if it is one. */
__noinline int ember_v8_frame(__u32 slot)
{
	struct ember_unwind_walk *walk = bpf_map_lookup_elem(&unwind_walks, &slot);
	struct ember_v8_process *p, *known;
	__u64 fp, slots[2], function, shared, map, word; /* slots: the function, the context or marker */
	__u16 type = 0;
	__u32 at;

	if (!walk)
		return 0;
	fp = walk->state.v8_fp;
	walk->state.v8_fp = 0;
	p = &walk->state.v8_layout;
	if (!fp)
		return 0;
	if (read_stack(&walk->state, fp + p->fp_function, slots, 2) || !(slots[1] & V8_SMI_TAG_MASK))
		return 0; /* a frame-type marker: V8's own frame, named by its code */
	function = slots[0];
	if ((function & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG)
		return 0;
	shared = read_u64(function - V8_HEAP_OBJECT_TAG + p->jsfunction_shared);
	if ((shared & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG || shared > EMBER_FRAME_V8_MASK)
		return 0;
	map = read_u64(shared - V8_HEAP_OBJECT_TAG + p->heap_object_map);
	if ((map & V8_HEAP_OBJECT_TAG_MASK) != V8_HEAP_OBJECT_TAG)
		return 0;
	if (map != p->shared_function_info_map) {
		bpf_probe_read_user(&type, sizeof(type), (void *)(map - V8_HEAP_OBJECT_TAG + p->map_instance_type));
		if (type != p->shared_function_info_type)
			return 0;
		p->shared_function_info_map = map;
		known = bpf_map_lookup_elem(&v8_processes, &walk->state.pid);
		if (known)
			known->shared_function_info_map = map;
	}
	word = EMBER_FRAME_V8 | shared;
	at = walk->state.frames - 1;
	if (walk->state.v8_leaf_builtin) {
		if (walk->state.frames >= EMBER_MAX_STACK_DEPTH)
			return 0;
		at = walk->state.frames++;
	}
	walk->ip[at & (EMBER_MAX_STACK_DEPTH - 1)] = word;
	return 0;
}
