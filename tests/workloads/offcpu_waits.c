/* Known off-CPU time in known functions: each cycle sleeps 300 ms in waitA
 * and 100 ms in waitB, with nanosleep issued from the function itself (no
 * libc frame without a frame pointer above it), then spins BURN_MS on CPU
 * in burnC. Usage: offcpu_waits [cycles] [burn_ms]
 * At the end it prints the time it measured in each ("waitA_ns N", ...):
 * on a busy machine a thread woken from a sleep waits its turn for a CPU,
 * and a loop that checks the clock overruns when it is preempted. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "elapsed.h"

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
#ifdef __x86_64__
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(SYS_nanosleep), "D"(&ts), "S"(0) : "rcx", "r11", "memory");
#else
	nanosleep(&ts, 0);
#endif
}

/* always_inline: the syscall instruction sits in waitA/waitB themselves. */
static inline __attribute__((always_inline)) void sleep_here(long ms) { sleep_ms(ms); }

__attribute__((noinline)) void waitA(void) { sleep_here(300); }
__attribute__((noinline)) void waitB(void) { sleep_here(100); }

static volatile unsigned long sink;

__attribute__((noinline)) void burnC(long ms)
{
	struct timespec start = now();
	while (seconds_since(start) * 1000 < ms)
		for (int i = 0; i < 10000; i++)
			sink += i;
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 4;
	long burn_ms = argc > 2 ? atol(argv[2]) : 0;
	double a = 0, b = 0, c = 0;
	for (int i = 0; i < cycles; i++) {
		struct timespec t = now();
		waitA();
		a += seconds_since(t);
		t = now();
		waitB();
		b += seconds_since(t);
		t = now();
		if (burn_ms)
			burnC(burn_ms);
		c += seconds_since(t);
	}
	printf("waitA_ns %.0f\nwaitB_ns %.0f\nburnC_ns %.0f\n", a * 1e9, b * 1e9, c * 1e9);
	return 0;
}
