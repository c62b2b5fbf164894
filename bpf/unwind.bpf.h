/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The user-stack unwinder's entry point (bpf/unwind.bpf.c), for the event
 * programs. BPF only. */
#ifndef EMBER_UNWIND_BPF_H
#define EMBER_UNWIND_BPF_H

#include "profile.h"
#include "unwind.h"

/* Where the walk starts: the user registers of the task. */
struct ember_user_regs {
	__u64 ip, sp, bp;
	__u64 return_address; /* ip is a return address (the caller's, at a function's entry), not
	                         where the thread is */
};

struct ember_user_frames {
	__u64 ip[EMBER_MAX_STACK_DEPTH];
};

/* EMBER_UNWIND_*, set by the collector before load. */
extern const volatile __u32 unwind_mode;

/* Unwinds the user stack of the current task (process `pid`) from `regs`
 * into `out`, leaf first, by the mode set in unwind_mode. Returns the
 * number of frames | the EMBER_STOP_* reason << 16. A global function:
 * the verifier checks it once, whatever calls it. */
int ember_unwind_user(struct ember_user_regs *regs, __u32 pid, struct ember_user_frames *out);

#define EMBER_UNWIND_FRAMES(r) ((r) & 0xffff)
#define EMBER_UNWIND_STOP(r) ((__u32)(r) >> 16)

#endif
