/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The unwind tables bpf/unwind.bpf.c walks user stacks with, as userspace
 * (unwind/cfi_table.cpp, user/session/unwinder.cpp) fills them. Their rules
 * are for the stack pointer (x86_64 rsp, arm64 sp), the frame pointer (rbp,
 * x29) and the return address (at CFA - 8 on x86_64; on arm64 in the link
 * register x30 until a function saves it). Fixed-width fields, no pointers:
 * compiled both by clang -target bpf and by the C++ side. */
#ifndef EMBER_BPF_UNWIND_H
#define EMBER_BPF_UNWIND_H

/* What a row says about the code from its pc up to the next row's. */
#define EMBER_ROW_CFA_SP 0      /* CFA = sp + cfa */
#define EMBER_ROW_CFA_FP 1      /* CFA = fp + cfa */
#define EMBER_ROW_PLT 2         /* an x86_64 PLT entry: CFA = rsp + 8, + 8 more from byte `cfa` of each 16 on */
#define EMBER_ROW_SIGNAL 3      /* the kernel's signal return trampoline: the interrupted registers
                                   are in the ucontext at sp */
#define EMBER_ROW_ROOT 4        /* outermost frame (return address undefined): the stack ends here */
#define EMBER_ROW_NONE 5        /* no CFI covers this code */
#define EMBER_ROW_UNSUPPORTED 6 /* CFI the table cannot express (a DWARF expression, another register) */
#define EMBER_ROW_INTERPRETER 7 /* HotSpot's interpreter: a frame at fp (return address at fp + 8, the
                                   caller's fp at fp), the caller's sp saved at fp - 8 (its
                                   frame may have been extended for the callee's locals); the
                                   method's Method* at fp + 8 * the row's fp (0: not known) */
#define EMBER_ROW_COMPILED 8    /* a JIT-compiled method's body: CFA = sp + cfa, its frame record
                                   (fp, return address) at CFA - 16; as the leaf, checked against
                                   its epilogue (see unwind.bpf.c) */

/* Where a row's return address is: x86_64's always at CFA - 8, arm64's
 * where its function keeps x30. */
#define EMBER_RA_CFA 0    /* at CFA - 8, apart from the fp (if saved) */
#define EMBER_RA_LINK 1   /* in the link register: a leaf, or code before its prologue saved it */
#define EMBER_RA_RECORD 2 /* in the frame record at CFA + 8 * fp: the caller's fp, then the return
                             address (x86_64's push rbp, at CFA - 16; arm64's stp x29, x30) */
#define EMBER_RA_SAVED 3  /* at CFA + 8 * fp, the fp unchanged (code without frame pointers) */
#define EMBER_RA_RECORD_LOW 4 /* in the frame record at R + 8 * fp, R the CFA's register: a frame of
                                 over 1 KiB, its record at its bottom */

/* The bytes of code read at a compiled leaf to tell its epilogue: x86_64's
 * pop rbp, cmp rsp, [r15+disp32], ja rel32, ret; aarch64's ldp x29, x30,
 * [sp], #16, ldr, cmp, b.hi, ret. */
#if defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define EMBER_EPILOGUE_BYTES 20
#else
#define EMBER_EPILOGUE_BYTES 16
#endif

/* One row: 8 bytes, sorted by pc within a binary's table. */
struct ember_unwind_row {
	__u32 pc;     /* offset from the table's base address */
	__u16 cfa;    /* CFA offset, or the PLT threshold */
	__u8 type : 4; /* EMBER_ROW_* */
	__u8 ra : 4;   /* EMBER_RA_* */
	__s8 fp;      /* caller's fp saved at CFA + 8 * fp; 0: fp unchanged (EMBER_RA_SAVED: where
	                 the return address is) */
};

/* A user frame of an interpreted Java method: EMBER_FRAME_METHOD | its
 * Method* (what the interpreter frame holds), in place of a pc in the
 * interpreter. Never a user pc: those are canonical addresses, whose top
 * 17 bits are equal. The collector names it from the JVM's agent (P lines). */
#define EMBER_FRAME_METHOD 0x7e4d000000000000ull
#define EMBER_FRAME_METHOD_MASK 0x0000ffffffffffffull

/* Executable mappings of one process, sorted by start, for the unwinder:
 * where the table of each lies in the rows map. A pc outside all of them
 * makes the walk stop with EMBER_STOP_UNMAPPED (the collector then reads
 * the process's mappings again). */
#define EMBER_UNWIND_MAPPINGS 256

struct ember_unwind_mapping {
	__u64 start, end;  /* [start, end) */
	__u64 base;        /* address of the table's pc 0 in this mapping */
	__u32 first;       /* index of its first row in the rows map */
	__u32 rows;        /* 0: no table (JIT code, a binary without CFI, or
	                      its table did not fit): frame pointers there */
	__u32 table;       /* the table's rows as written, never reused for
	                      others (the row cache's key); 0: none */
	__u32 flags;       /* EMBER_MAPPING_* */
};

/* A JVM's code cache: HotSpot keeps each frame's record (the caller's fp,
 * the return address) at the frame's top, so a frame-pointer step through
 * its code finds the caller's sp exactly, fp + 16 (on arm64, where other
 * code's record lies at its frame's bottom, not a guess). */
#define EMBER_MAPPING_JIT 1

struct ember_unwind_process {
	__u32 count;       /* mappings used */
	__u32 left_out;    /* executable mappings beyond EMBER_UNWIND_MAPPINGS */
	struct ember_unwind_mapping mappings[EMBER_UNWIND_MAPPINGS];
};

/* How user stack unwinding is done (the rodata `unwind_mode`). */
#define EMBER_UNWIND_FP 0    /* the kernel's frame-pointer walk only */
#define EMBER_UNWIND_CFI 1   /* tables only: a frame without one ends the stack */
#define EMBER_UNWIND_AUTO 2  /* tables, frame pointers where a binary has none */

/* Why a user stack ended (ember_sample's ustack_stop). */
#define EMBER_STOP_ROOT 0        /* at the thread's outermost frame, as its CFI says */
#define EMBER_STOP_FP_END 1      /* the frame-pointer chain ended (no CFI to tell if it is the root) */
#define EMBER_STOP_NO_TABLE 2    /* code without a table (--unwind cfi), or a binary whose table did not fit */
#define EMBER_STOP_UNMAPPED 3    /* a pc in no known mapping: found by frame pointers, or in a process
                                    with more mappings than its entry holds */
#define EMBER_STOP_UNSUPPORTED 4 /* a CFI rule the tables cannot express */
#define EMBER_STOP_BAD_READ 5    /* user memory could not be read (paged out, or a bad frame) */
#define EMBER_STOP_DEPTH 6       /* the frame limit */
#define EMBER_STOP_BAD_FRAME 7   /* a return address of 0, or a stack that did not move up */
#define EMBER_STOP_NO_USER 8     /* no user stack: a kernel thread */
#define EMBER_STOP_NOT_LOADED 9  /* the process's tables were not loaded yet (its first moments), or
                                    not for code it mapped since: in a record, its user stack is then
                                    a copy (see below); once unwound, the stack went on past the copy */
#define EMBER_STOP_KINDS 10

/* A user stack copied for userspace to unwind (a record whose ustack_stop
 * is EMBER_STOP_NOT_LOADED and unwind_mode is not FP): these words, then
 * the top of the stack from sp up, as much as could be read. */
#define EMBER_COPY_IP 0
#define EMBER_COPY_SP 1
#define EMBER_COPY_BP 2
#define EMBER_COPY_RETURN_ADDRESS 3  /* 1: ip is a return address (an allocator's entry) */
#define EMBER_COPY_LINK 4            /* the link register (arm64 x30; 0 on x86_64) */
#define EMBER_COPY_HEADER 5

#endif
