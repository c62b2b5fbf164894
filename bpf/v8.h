/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What names a V8 (Node.js) JavaScript frame, as the process's own
 * postmortem metadata (its v8dbg_* symbols) gives it
 * (user/runtimes/v8.cpp fills it), and the frames bpf/v8.bpf.c puts in
 * user stacks. Fixed-width fields, no pointers: compiled both by clang
 * -target bpf and by the C++ side. */
#ifndef EMBER_BPF_V8_H
#define EMBER_BPF_V8_H

struct ember_v8_process {
	/* From a frame's fp: a JavaScript frame's JSFunction, and in the slot
	 * above it (fp_function + 8) its context (a heap object) or, in the
	 * frames V8 builds for itself (entry, exit, stubs), a type marker (a
	 * small integer). Adjacent: one read. */
	__s16 fp_function;
	__u16 jsfunction_shared;   /* JSFunction -> its SharedFunctionInfo */
	__u16 heap_object_map;     /* HeapObject -> its Map */
	__u16 map_instance_type;   /* Map -> the instance type (16 bits) */
	__u16 shared_function_info_type; /* SHARED_FUNCTION_INFO_TYPE */
	__u16 pad[3];
	/* The Map of every SharedFunctionInfo, once the walker has checked one
	 * by its instance type (0: not yet): a read-only root of V8's, which
	 * never moves. A function whose map it is needs no further read. */
	__u64 shared_function_info_map;
};

/* A user frame of a JavaScript function: EMBER_FRAME_V8 | its
 * SharedFunctionInfo (a tagged pointer, low bit set), in place of the pc
 * of its code (JIT code, or the interpreter's builtins). Never a user pc
 * (canonical addresses have equal top 17 bits), nor EMBER_FRAME_METHOD or
 * EMBER_FRAME_PYTHON. The collector names it from the process's heap. */
#define EMBER_FRAME_V8 0x7e56000000000000ull
#define EMBER_FRAME_V8_MASK 0x0000ffffffffffffull

#endif
