/* Spends its time in the kernel: read() from /dev/zero in large chunks, with
 * the system call issued inline so the user frame that makes it is
 * read_zero_loop itself (libc's wrappers have no frame pointer).
 * Usage: syscall_loop [seconds] (default 5). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include "elapsed.h"

static char buffer[1 << 20];

static inline long raw_read(int fd, void *buf, unsigned long len)
{
	long ret;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_read), "D"(fd), "S"(buf), "d"(len) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x0 __asm__("x0") = fd, x1 __asm__("x1") = (long)buf, x2 __asm__("x2") = len;
	register long x8 __asm__("x8") = SYS_read;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
	ret = x0;
#else
#error "syscall_loop: add the inline system call for this architecture"
#endif
	return ret;
}

__attribute__((noinline)) void read_zero_loop(int fd, double seconds)
{
	struct timespec start = now();
	do {
		for (int i = 0; i < 64; i++)
			raw_read(fd, buffer, sizeof(buffer));
	} while (seconds_since(start) < seconds);
}

int main(int argc, char **argv)
{
	int fd = open("/dev/zero", O_RDONLY);
	if (fd < 0)
		return 1;
	read_zero_loop(fd, argc > 1 ? atof(argv[1]) : 5.0);
	return 0;
}
