// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* CPU sampling: runs on every tick of a per-CPU perf event (cpu-clock or
 * cycles) and sends the interrupted task's kernel and user stacks as a
 * record of weight 1 (record.bpf.h). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "record.bpf.h"
#include "targets.bpf.h"

/* Set by the collector before load: sample the idle task (pid 0). */
const volatile bool include_idle = false;

#if defined(__TARGET_ARCH_x86)
/* The event's registers as the UAPI lays them out for user space
 * (asm/ptrace.h): bpf_perf_event_data's layout, which does not change. The
 * kernel's own struct pt_regs renamed cs into the union member csx (FRED,
 * 6.9): a CO-RE read of either name fails to load on the other kernels
 * (6.1: "failed to resolve CO-RE relocation ... regs.csx"). */
struct uapi_pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};
#endif

/* Whether the tick interrupted user code (the kernel's user_mode(regs)):
 * then the kernel stack is empty, and asking for it anyway cost 12% of a
 * sample, about 250 ns on the development VM (the helper still sets up a
 * callchain and zeroes its whole buffer). The register is read whole: the
 * context takes no narrower load. arm64: the mode bits of pstate are
 * EL0's (PSR_MODE_EL0t, 0; AArch32 tasks add only bit 4). */
static __always_inline bool in_user_mode(struct bpf_perf_event_data *ctx)
{
#if defined(__TARGET_ARCH_x86)
	__u64 cs = ((const struct uapi_pt_regs *)ctx)->cs;

	barrier_var(cs);
	return (cs & 3) == 3;
#elif defined(__TARGET_ARCH_arm64)
	__u64 pstate = ctx->regs.pstate;

	barrier_var(pstate);
	return (pstate & 0xf) == 0;
#else
	return false;
#endif
}

SEC("perf_event")
int ember_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct stack_start start = {};
	struct ember_sample *s;
	__u32 slot = 0;
	bool user;

	if (!armed)
		return 0;
	if (tid == 0) {
		COUNT(samples_idle);
		if (!include_idle)
			return 0;
	}
	if (!in_scope(pid, tid))
		return 0;
	COUNT(samples_seen);

	s = claim_scratch(&slot);
	if (!s)
		return 0;
	/* Interrupted in user code, the event has its registers and the
	 * kernel stack is empty; in the kernel, the unwinder takes the user
	 * registers the task entered with. */
	user = in_user_mode(ctx);
	if (user)
		start = start_from(&ctx->regs);
	take_stacks(ctx, start, s, slot, pid, tid, !user, true);
	s->weight = 1;
	s->kind = EMBER_KIND_CPU;
	s->waker = EMBER_WAKER_NONE;
	send(s, 0, true);
	ember_release_scratch(slot);
	return 0;
}
