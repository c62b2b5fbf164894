/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Records that the event programs of bpf/ stream to userspace. Fixed-width
 * fields, no pointers: this header is compiled both by clang -target bpf and
 * by the C++ collector. */
#ifndef EMBER_BPF_PROFILE_H
#define EMBER_BPF_PROFILE_H

/* Frames per stack the program can carry. The kernel clips every stack to
 * the kernel.perf_event_max_stack sysctl (127 by default), so the effective
 * limit is min(this, sysctl); the collector counts stacks that hit it. */
#define EMBER_MAX_STACK_DEPTH 256
#define EMBER_COMM_LEN 16
/* Cgroups `record --cgroup` takes at most (the programs test each in turn). */
#define EMBER_MAX_CGROUPS 16

/* What a record stands for. */
#define EMBER_KIND_CPU 0         /* a tick of the CPU-sampling event */
#define EMBER_KIND_BLOCKED 1     /* a thread's time off CPU, asleep (weight: ns) */
#define EMBER_KIND_PREEMPTED 2   /* a thread's time off CPU while runnable (weight: ns) */
#define EMBER_KIND_MALLOC 3      /* a sampled native allocation (weight: bytes; pad: its id with --live) */

/* What a blocked thread waits in (EMBER_KIND_BLOCKED), told only for -e lock. */
#define EMBER_WAIT_OTHER 0  /* anything else, or not told */
#define EMBER_WAIT_LOCK 1   /* a lock: futex(2) FUTEX_WAIT or FUTEX_LOCK_PI (bpf/offcpu.bpf.c) */

/* Who ended a block (EMBER_KIND_BLOCKED), with --waker. */
#define EMBER_WAKER_NONE 0     /* not asked for, or not a block */
#define EMBER_WAKER_UNSEEN 1   /* asked for, but no wakeup was seen for this block */
#define EMBER_WAKER_SEEN 2     /* the task current at the wakeup: waker_pid, its names and stacks (in
                                  an interrupt, the interrupted task: its kernel stack tells) */

/* One sample: header, then ustack_len user ips (leaf first), then
 * kstack_len kernel ips (leaf first), then, for a block with a waker
 * (waker == EMBER_WAKER_SEEN), the waker's waker_ustack_len user and
 * waker_kstack_len kernel ips (leaf first). Variable length in the ring
 * buffer. Off-CPU records carry the stacks and time of the switch out. */
struct ember_sample {
	__u64 time_ns;   /* bpf_ktime_get_ns() */
	__u64 weight;    /* 1 for a CPU sample; nanoseconds off CPU otherwise */
	__u64 cgroup_id; /* the task's cgroup v2 id: the inode number of its directory */
	__u32 pid;       /* tgid, in the initial pid namespace */
	__u32 tid;
	__u32 cpu;
	__u16 ustack_len;
	__u16 kstack_len;
	__u8 kind;       /* EMBER_KIND_* */
	__u8 wait;       /* EMBER_KIND_BLOCKED: what the thread waits in, EMBER_WAIT_* */
	__u8 ustack_stop;        /* why the user stack ends: EMBER_STOP_* (bpf/unwind.h) */
	__u8 waker_ustack_stop;  /* the same for the waker's user stack */
	__u32 pad;
	char comm[EMBER_COMM_LEN];         /* thread name */
	char process_comm[EMBER_COMM_LEN]; /* thread group leader's name */
	__u32 waker;     /* EMBER_WAKER_* */
	__u32 waker_pid; /* the waking task's tgid and tid */
	__u32 waker_tid;
	__u16 waker_ustack_len;
	__u16 waker_kstack_len;
	char waker_comm[EMBER_COMM_LEN];
	char waker_process_comm[EMBER_COMM_LEN];
	__u64 ips[4 * EMBER_MAX_STACK_DEPTH]; /* two stacks, and the waker's two */
};

#define EMBER_SAMPLE_HEADER_SIZE ((unsigned long)&((struct ember_sample *)0)->ips)

/* -e malloc --live: a sampled block not freed yet, by process (the
 * allocator's probes fire in every process of the host, and the same
 * address is another block elsewhere: a forked child's copy, another
 * program); its value in the live_allocs map is the sample's id. */
struct ember_live_key {
	__u32 pid;
	__u32 pad;
	__u64 ptr;
};

/* Records a CPU builds at once: one per program that interrupts another
 * (bpf/record.bpf.h's scratch). A power of two. */
#define EMBER_SCRATCH_SLOTS 4

/* What the programs count for the collector's summary, one copy per CPU
 * (the collector adds them up): a sample writes no cache line that another
 * CPU's sample reads. */
struct ember_counters {
	__u64 samples_seen;     /* samples that passed the filters */
	__u64 samples_lost;     /* ring buffer full */
	__u64 samples_idle;     /* idle task samples, dropped unless include_idle */
	__u64 targets_full;     /* children not followed: target_pids full */
	__u64 mappings_lost;    /* exit mappings dropped: exits ring buffer full */
	__u64 offcpu_untracked; /* switches out not recorded: offcpu_start full */
	__u64 offcpu_unseen_ends; /* blocks whose switch back passed no tracepoint */
	__u64 malloc_live_full; /* sampled allocations not tracked: live_allocs full */
	__u64 waker_untracked;  /* --waker: wakers seen whose stacks could not be stored */
	__u64 scratch_busy;     /* records not built: every scratch slot of the CPU in use */
};

/* Path of a mapped file as dentry names, leaf first (joined by the
 * collector). Deeper paths keep their last EMBER_PATH_PARTS names. */
#define EMBER_PATH_PARTS 16
#define EMBER_PATH_PART_LEN 64

/* One executable file mapping of a sampled process, sent as the process
 * exits (its memory map is still intact then), so a process that lived
 * only a few milliseconds is still symbolized. */
struct ember_mapping {
	__u64 start, end;  /* [start, end) */
	__u64 offset;      /* file offset of start */
	__u64 inode;
	__u32 dev;         /* kernel dev_t: major << 20 | minor, as /proc/PID/maps */
	__u32 pid;
	__u32 path_parts;
	__u32 pad;
	char path[EMBER_PATH_PARTS][EMBER_PATH_PART_LEN];
};

#endif
