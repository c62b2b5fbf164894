/* Off-CPU time through libc, in two functions 3:1, built -O2 without frame
 * pointers as distributions build (libc has none either):
 *   offcpu-reader   reader_thread;blocked_in_read;read: waits, 600 times,
 *                   for a byte on a pipe that offcpu-feeder writes after
 *                   sleeping 1 to 3 ms;
 *   offcpu-sleeper  sleeper_thread;blocked_in_nanosleep;nanosleep: sleeps in
 *                   blocks of 2 to 6 ms until the time it has slept is three
 *                   times the time the reader waited.
 * The split is 3:1 by construction, whatever the machine's load: each thread
 * measures the wall-clock time of its blocking calls (a woken thread that
 * waits for a CPU is still off CPU), and the sleeper tops its own up to
 * three times the reader's once the reader is done. At the end it prints
 * them: "nanosleep_ns N" and "read_ns N". Usage: offcpu_libc [reads] */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "elapsed.h"

#define BLOCKER __attribute__((noipa))

static int pipe_fds[2];
static int reads = 600;
static _Atomic long read_ns;
static atomic_bool reader_done;

static long ns_since(struct timespec start) { return (long)(seconds_since(start) * 1e9); }

/* xorshift64: blocks of random length. */
static unsigned long next_random(unsigned long *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static struct timespec ns_to_timespec(long ns) { return (struct timespec){ns / 1000000000L, ns % 1000000000L}; }

/* The call's result is used after it returns: no tail call, so the
 * function stays on the stack below libc's. */
BLOCKER long blocked_in_nanosleep(long ns)
{
	struct timespec t = ns_to_timespec(ns), start = now();
	int rc = nanosleep(&t, NULL);
	return rc == 0 ? ns_since(start) : -1;
}

BLOCKER long blocked_in_read(int fd)
{
	char byte;
	struct timespec start = now();
	ssize_t n = read(fd, &byte, 1);
	return n == 1 ? ns_since(start) : -1;
}

static void *feeder_thread(void *arg)
{
	unsigned long state = 0x2545f4914f6cdd1dUL;
	for (int i = 0; i < reads; i++) {
		struct timespec t = ns_to_timespec(1000000 + next_random(&state) % 2000000);
		nanosleep(&t, NULL);
		if (write(pipe_fds[1], "x", 1) != 1)
			exit(1);
	}
	return arg;
}

static void *reader_thread(void *arg)
{
	for (int i = 0; i < reads; i++) {
		long ns = blocked_in_read(pipe_fds[0]);
		if (ns < 0)
			exit(1);
		read_ns += ns;
	}
	reader_done = true;
	return arg;
}

static long sleeper_total_ns;

static void *sleeper_thread(void *arg)
{
	unsigned long state = 0x853c49e6748fea9bUL;
	for (;;) {
		long block = 2000000 + next_random(&state) % 4000000;
		if (reader_done) {
			long missing = 3 * read_ns - sleeper_total_ns;
			if (missing <= 0)
				break;
			if (missing < block)
				block = missing;
		}
		long ns = blocked_in_nanosleep(block);
		if (ns < 0)
			exit(1);
		sleeper_total_ns += ns;
	}
	return arg;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		reads = atoi(argv[1]);
	if (pipe(pipe_fds) != 0)
		return 1;
	/* Half a second in main first. On a cold page cache the process can
	 * block in ld.so before libc is mapped, and the profiler reads its
	 * mappings then; the stacks in libc walk wrongly until it reads them
	 * again (a known gap, not what this workload measures), which these
	 * sleeps give it time to do. */
	for (int i = 0; i < 5; i++) {
		struct timespec t = ns_to_timespec(100000000L);
		nanosleep(&t, NULL);
	}
	pthread_t sleeper, reader, feeder;
	pthread_create(&sleeper, NULL, sleeper_thread, NULL);
	pthread_create(&reader, NULL, reader_thread, NULL);
	pthread_create(&feeder, NULL, feeder_thread, NULL);
	pthread_setname_np(sleeper, "offcpu-sleeper");
	pthread_setname_np(reader, "offcpu-reader");
	pthread_setname_np(feeder, "offcpu-feeder");
	pthread_join(feeder, NULL);
	pthread_join(reader, NULL);
	pthread_join(sleeper, NULL);
	printf("nanosleep_ns %ld\nread_ns %ld\n", sleeper_total_ns, (long)read_ns);
	return 0;
}
