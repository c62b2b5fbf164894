/* An unrelated busy process for system-wide tests: spins in spinner_loop
 * until killed or for the given seconds. Usage: spinner [seconds]. */
#include <stdlib.h>
#include "elapsed.h"

static volatile unsigned long sink;

__attribute__((noinline)) void spinner_loop(double seconds)
{
	struct timespec start = now();
	do {
		for (int i = 0; i < 100000; i++)
			sink += i;
	} while (seconds_since(start) < seconds);
}

int main(int argc, char **argv)
{
	spinner_loop(argc > 1 ? atof(argv[1]) : 3600);
	return 0;
}
