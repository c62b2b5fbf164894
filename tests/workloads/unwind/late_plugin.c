/* The library tests/workloads/unwind/late_library.c loads late: N sleeps
 * of 1 ms, each in late_sleep (a frame of its own, below libc's nanosleep). */
#include <time.h>

/* The call's result is used after it returns: no tail call. */
__attribute__((noipa)) static int late_sleep(void)
{
	struct timespec t = {0, 1000 * 1000};
	return nanosleep(&t, NULL) == 0;
}

long late_blocks(int n)
{
	long slept = 0;
	for (int i = 0; i < n; i++)
		slept += late_sleep();
	return slept;
}
