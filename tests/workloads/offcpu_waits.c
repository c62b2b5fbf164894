/* Known off-CPU time in known functions: each cycle sleeps 300 ms in waitA
 * and 100 ms in waitB, with nanosleep issued from the function itself (no
 * libc frame without a frame pointer above it), then spins BURN_MS on CPU
 * in burnC. Usage: offcpu_waits [cycles] [burn_ms] */
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
	for (int i = 0; i < cycles; i++) {
		waitA();
		waitB();
		if (burn_ms)
			burnC(burn_ms);
	}
	return 0;
}
