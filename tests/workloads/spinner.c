/* An unrelated busy process for system-wide tests: spins in spinner_loop
 * until killed or for the given seconds. Usage: spinner [seconds]. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) void spinner_loop(double seconds)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		for (int i = 0; i < 100000; i++)
			sink += i;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
	spinner_loop(argc > 1 ? atof(argv[1]) : 3600);
	return 0;
}
