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
	/* Frames' positions (--lines), read where `lines` is set. An
	 * interpreted frame's bytecode offset, a small integer at fp +
	 * fp_bytecode_offset, counts from its BytecodeArray's tagged address;
	 * its first bytecode lies bytecode_start bytes past it. */
	__s16 fp_bytecode_offset;
	__u16 bytecode_start;
	/* JSFunction -> the Code it runs now (an interpreted function's: a
	 * builtin of the interpreter's). A Code's kind is (flags >> shift) &
	 * mask, its instructions lie at its untagged address + instruction_start
	 * (instructions_inline: V8 before 11.1) or at the address that field
	 * holds; instruction_size bytes. */
	__u16 jsfunction_code;
	__u16 code_type;
	__u16 code_flags;
	__u16 code_instruction_size;
	__u16 code_instruction_start;
	__u8 code_kind_shift, code_kind_mask, code_kind_baseline;
	__u8 instructions_inline;
	__u8 lines; /* set: frames carry their position */
	/* Set: a bytecode handler (a leaf) keeps the offset of the bytecode
	 * it runs, from its BytecodeArray's tagged address, in the register
	 * ember_user_regs.v8_bytecode_offset holds; the frame's slot is
	 * written only before calls. The array follows the slot (its length,
	 * a small integer, at array_length). */
	__u8 offset_in_register;
	__u8 array_length;
	__u8 pad[1];
	/* The Map of every SharedFunctionInfo, once the walker has checked one
	 * by its instance type (0: not yet): a read-only root of V8's, which
	 * never moves. A function whose map it is needs no further read. */
	__u64 shared_function_info_map;
	__u64 code_map; /* the Map of every Code, learned alike */
};

/* A user frame of a JavaScript function: EMBER_FRAME_V8 | its
 * SharedFunctionInfo (a tagged pointer, low bit set), in place of the pc
 * of its code (JIT code, or the interpreter's builtins). Never a user pc
 * (canonical addresses have equal top 17 bits), nor EMBER_FRAME_METHOD or
 * EMBER_FRAME_PYTHON. The collector names it from the process's heap. */
#define EMBER_FRAME_V8 0x7e56000000000000ull
#define EMBER_FRAME_V8_MASK 0x0000ffffffffffffull

/* With --lines, a JavaScript frame's word is followed by its position:
 * EMBER_FRAME_V8_BYTECODE | the offset of the bytecode it runs, for an
 * interpreted frame; EMBER_FRAME_V8_PC | its pc's offset from its code's
 * first instruction, for baseline code (the function's) and optimized
 * code, whose frame word is then EMBER_FRAME_V8 | its Code object |
 * EMBER_V8_CODE (tagged pointers end in 01, objects are 8-aligned). */
#define EMBER_FRAME_V8_BYTECODE 0x7e57000000000000ull
#define EMBER_FRAME_V8_PC 0x7e58000000000000ull
#define EMBER_V8_CODE 2ull
/* Or, for code optimized on stack replacement, which the function does
 * not hold: EMBER_FRAME_V8 | its JSFunction | EMBER_V8_FUNCTION, then
 * EMBER_FRAME_V8_PC | the pc itself. */
#define EMBER_V8_FUNCTION 4ull

#endif
