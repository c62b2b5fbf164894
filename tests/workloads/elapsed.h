/* Time for the workloads' run-for-N-seconds loops: wall-clock time, or the
 * CPU time the process used, for workloads whose samples are counted (their
 * number is then the same on a busy machine as on an idle one). */
#ifndef EMBER_WORKLOADS_ELAPSED_H
#define EMBER_WORKLOADS_ELAPSED_H

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline struct timespec now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static inline double seconds_since(struct timespec start)
{
	struct timespec t = now();
	return (t.tv_sec - start.tv_sec) + (t.tv_nsec - start.tv_nsec) / 1e9;
}

static inline double cpu_seconds_used(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A thread's wait, in the terms a profiler of blocks sees it. Wall-clock
 * time less the thread's own CPU time (the system call's work: slow in an
 * emulator) is the time it was off CPU, `off`; of that, `runnable` is the
 * time it waited for a CPU (the kernel's run delay, /proc/thread-self/
 * schedstat): after its wakeup, part of its block; when preempted, not a
 * block at all. So the time blocked lies in [off - runnable, off], and both
 * ends meet on an idle machine. */
struct wait_clock {
	struct timespec wall;
	double cpu, runnable;
};

static inline double thread_cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Read with plain system calls: stdio's and malloc's locks would be lock
 * waits of their own, inside the waits measured. */
static inline double thread_run_delay_seconds(void)
{
	char text[96] = "";
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
	char *delay;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	text[n] = 0;
	/* "ON_CPU_NS RUN_DELAY_NS TIMESLICES" */
	strtoull(text, &delay, 10);
	return strtoull(delay, NULL, 10) / 1e9;
}

static inline struct wait_clock wait_start(void)
{
	struct wait_clock c;

	c.runnable = thread_run_delay_seconds();
	c.cpu = thread_cpu_seconds();
	c.wall = now();
	return c;
}

/* Adds the wait since `start` to *off and *runnable. */
static inline void wait_end(struct wait_clock start, double *off, double *runnable)
{
	double wall = seconds_since(start.wall);

	*off += wall - (thread_cpu_seconds() - start.cpu);
	*runnable += thread_run_delay_seconds() - start.runnable;
}

#endif
