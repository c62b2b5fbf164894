/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Where CPython keeps what names a thread's Python call chain, per
 * version (user/runtimes/python_layout.cpp fills it; facts and how they
 * were checked: user/runtimes/cpython.md), and the frames bpf/python.bpf.c
 * puts in user stacks. Byte offsets, -1 where the version has no such
 * field. Fixed-width fields, no pointers: compiled both by clang -target
 * bpf and by the C++ side. */
#ifndef EMBER_BPF_PYTHON_H
#define EMBER_BPF_PYTHON_H

/* What a frame's position field holds (frame_instr). */
#define EMBER_PY_INSTR_LASTI_BYTES 0 /* 3.8, 3.9: f_lasti, a byte offset into co_code */
#define EMBER_PY_INSTR_LASTI_UNITS 1 /* 3.10: f_lasti, in 2-byte code units */
#define EMBER_PY_INSTR_PREV 2        /* 3.11, 3.12: prev_instr, the last code unit run */
#define EMBER_PY_INSTR_NEXT 3        /* 3.13+: instr_ptr, the instruction running */

/* How the frames of one native _PyEval_EvalFrameDefault call are told
 * apart from its callers' (layout.entry). */
#define EMBER_PY_ENTRY_EVERY 0 /* up to 3.10: each frame is a call of its own */
#define EMBER_PY_ENTRY_FLAG 1  /* 3.11: its oldest frame has is_entry set */
#define EMBER_PY_ENTRY_SHIM 2  /* 3.12+: a frame with owner >= shim_owner lies below its frames */

struct ember_python_layout {
	__u16 version;        /* major << 8 | minor */
	__u8 instr_kind;      /* EMBER_PY_INSTR_* */
	__u8 entry;           /* EMBER_PY_ENTRY_* */
	__u8 shim_owner;      /* EMBER_PY_ENTRY_SHIM: owners from this value up are not Python frames */
	__u8 code_tag_mask;   /* bits of frame_code to clear (3.14's tagged stack references) */
	__s16 ascii_data;     /* a compact ASCII string's characters */
	__s16 compact_data;   /* a compact non-ASCII string's characters */
	/* _PyRuntime -> interpreters -> thread states */
	__s16 runtime_interpreters;
	__s16 interp_next;
	__s16 interp_threads;
	__s16 tstate_next;
	__s16 tstate_native_thread_id; /* the Linux tid (3.11+) */
	__s16 tstate_thread_id;        /* pthread_self() */
	/* thread state -> newest frame: *(tstate + tstate_frame), then, where
	 * cframe_current_frame >= 0 (3.11, 3.12), *(that + cframe_current_frame) */
	__s16 tstate_frame;
	__s16 cframe_current_frame;
	__s16 cframe_previous;  /* 3.11: the _PyCFrame of the eval-loop call below */
	/* frames */
	__s16 frame_previous;
	__s16 frame_code;
	__s16 frame_instr;
	__s16 frame_owner;    /* 3.11+ */
	__s16 frame_is_entry; /* 3.11 */
	/* code objects */
	__s16 code_name;
	__s16 code_qualname; /* 3.11+ */
	__s16 code_filename;
	__s16 code_firstlineno;
	__s16 code_linetable;     /* co_lnotab (3.8, 3.9), co_linetable: a bytes object */
	__s16 code_adaptive;      /* 3.11+: the bytecode, inline */
	__s16 code_firsttraceable; /* 3.11+: instructions before it are set-up, not the function's */
};

/* A process's interpreter, as the walker reads it (python_processes). */
struct ember_python_process {
	struct ember_python_layout layout;
	__u16 frame_bytes;  /* read of a frame: up to its last field used, at most 128 */
	__u32 thread_pointer_offset; /* pthread_self() (a thread state's thread_id) is the thread
	                                pointer less this: 0 on x86_64, glibc's sizeof(struct
	                                pthread) on arm64, where the pointer is past it */
	__u64 runtime;      /* &_PyRuntime */
	__u64 eval_start, eval_end; /* _PyEval_EvalFrameDefault (EMBER_PY_ENTRY_EVERY: its
	                               frames are told by pc) */
};

/* A user frame of a Python function, in place of the native frame of the
 * eval-loop call that ran it: EMBER_FRAME_PYTHON, whether the frame is a
 * generator's or coroutine's, its instruction index + 1 (0: the frame has
 * run none yet; EMBER_PY_INSTR_UNKNOWN: past what fits, 16,382 code
 * units) and its code object's address >> 3 (45 bits: user addresses up
 * to 2^48, where arm64 maps its heap). Never a user pc (their top 17 bits
 * are equal) nor an EMBER_FRAME_METHOD (bpf/unwind.h). */
#define EMBER_FRAME_PYTHON 0x5000000000000000ull
#define EMBER_FRAME_PYTHON_TAG 0xf000000000000000ull
#define EMBER_PY_FRAME_GENERATOR (1ull << 59)
#define EMBER_PY_INSTR_SHIFT 45
#define EMBER_PY_INSTR_UNKNOWN 0x3fffull
#define EMBER_PY_CODE_MASK ((1ull << EMBER_PY_INSTR_SHIFT) - 1)

#endif
