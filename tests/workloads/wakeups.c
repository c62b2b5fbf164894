/* Known wakers of known waits, across processes: the main process blocks
 * on a pipe in wait_for_x; a second process (this program executed again,
 * so its code lies at other addresses, named "ywaker") writes to the pipe
 * from wake_from_y after 30 ms, then from wake_from_z after 10 ms, each
 * cycle. So wait_for_x is blocked 30 ms per cycle until wake_from_y and
 * 10 ms until wake_from_z. The pipe calls are system calls issued from the
 * functions themselves (no libc frame without a frame pointer between).
 * Prints how long wait_for_x was off CPU until each waker, as it measured
 * it ("blocked_y_ns N", "blocked_z_ns N", and "blocked_y_runnable_ns N",
 * "blocked_z_runnable_ns N" of that runnable: elapsed.h's wait_clock), and
 * how long ywaker slept ("slept_ns N", "slept_runnable_ns N": timer
 * interrupts end those waits). Both run at real-time
 * priority where allowed: on a busy machine a thread preempted on its way
 * into a wait is runnable, not blocked, yet its own clock counts it.
 * Usage: wakeups [cycles] (default 20) */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "elapsed.h"

static long sys3(long nr, long a, long b, long c)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c;
	register long x8 __asm__("x8") = nr;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
	return x0;
#else
	return syscall(nr, a, b, c);
#endif
}

/* Returns the byte read (the waker's name), 0 at the end. */
__attribute__((noinline)) char wait_for_x(int fd)
{
	char c;
	return sys3(SYS_read, fd, (long)&c, 1) == 1 ? c : 0;
}

__attribute__((noinline)) void wake_from_y(int fd)
{
	char c = 'y';
	sys3(SYS_write, fd, (long)&c, 1);
}

__attribute__((noinline)) void wake_from_z(int fd)
{
	char c = 'z';
	sys3(SYS_write, fd, (long)&c, 1);
}

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int waker(int fd, int cycles)
{
	double slept = 0, runnable = 0;
	prctl(PR_SET_NAME, "ywaker");
	for (int i = 0; i < cycles; i++) {
		struct wait_clock start = wait_start();
		pause_ms(30);
		wait_end(start, &slept, &runnable);
		wake_from_y(fd);
		start = wait_start();
		pause_ms(10);
		wait_end(start, &slept, &runnable);
		wake_from_z(fd);
	}
	printf("slept_ns %.0f\nslept_runnable_ns %.0f\n", slept * 1e9, runnable * 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && argv[1][0] == 'w')
		return waker(atoi(argv[2]), atoi(argv[3]));
	int cycles = argc > 1 ? atoi(argv[1]) : 20;
	struct sched_param rt = {.sched_priority = 1};
	sched_setscheduler(0, SCHED_FIFO, &rt); /* inherited by the waker */
	int fds[2];
	char fd[16], n[16];
	if (pipe(fds))
		return 1;
	snprintf(fd, sizeof fd, "%d", fds[1]);
	snprintf(n, sizeof n, "%d", cycles);
	pid_t child = fork();
	if (child == 0) {
		close(fds[0]);
		execl("/proc/self/exe", argv[0], "waker", fd, n, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	int woken = 0;
	double blocked[2] = {0, 0}, runnable[2] = {0, 0};
	for (;;) {
		struct wait_clock start = wait_start();
		char by = wait_for_x(fds[0]);
		if (!by)
			break;
		wait_end(start, &blocked[by == 'z'], &runnable[by == 'z']);
		woken++;
	}
	waitpid(child, NULL, 0);
	printf("blocked_y_ns %.0f\nblocked_z_ns %.0f\nblocked_y_runnable_ns %.0f\nblocked_z_runnable_ns %.0f\n",
	       blocked[0] * 1e9, blocked[1] * 1e9, runnable[0] * 1e9, runnable[1] * 1e9);
	return woken != 2 * cycles;
}
