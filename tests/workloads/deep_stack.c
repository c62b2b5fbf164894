/* Recurses deeper than kernel.perf_event_max_stack (127 by default) and
 * spins at the bottom, so every sample's user stack is truncated.
 * Usage: deep_stack [depth] [seconds] (default 300, 3): seconds of CPU time,
 * so a busy machine does not thin the samples of a test. */
#include <stdlib.h>
#include "elapsed.h"

static volatile unsigned long sink;

__attribute__((noinline)) static void spin_at_bottom(double seconds)
{
	double end = cpu_seconds_used() + seconds;
	do {
		for (int i = 0; i < 100000; i++)
			sink += i;
	} while (cpu_seconds_used() < end);
}

__attribute__((noinline)) void descend(int depth, double seconds)
{
	if (depth > 0)
		descend(depth - 1, seconds);
	else
		spin_at_bottom(seconds);
	sink++; /* not a tail call */
}

int main(int argc, char **argv)
{
	descend(argc > 1 ? atoi(argv[1]) : 300, argc > 2 ? atof(argv[2]) : 3.0);
	return 0;
}
