/* Burns CPU in two functions whose shares are fixed by construction:
 * hot_a does 7 units of work for every 3 that hot_b does (70/30).
 * Usage: cpu_split [seconds] (default 5): seconds of CPU time, so a busy
 * machine does not thin the samples of a test.
 *
 * The units of a round all have one length, drawn anew each round: a loop
 * of fixed period beside a periodic sampling timer would have the timer
 * fire at the same few phases of the loop (aliasing) and skew the split;
 * rounds of random length spread the samples over every phase. */
#include <stdlib.h>
#include "elapsed.h"
#include "work.h"

__attribute__((noinline)) void hot_a(unsigned long steps)
{
	for (int i = 0; i < 7; i++)
		work_unit(steps);
}

__attribute__((noinline)) void hot_b(unsigned long steps)
{
	for (int i = 0; i < 3; i++)
		work_unit(steps);
}

__attribute__((noinline)) void run_split(double seconds)
{
	unsigned long state = 88172645463325252UL;
	double end = cpu_seconds_used() + seconds;
	do {
		unsigned long steps = 100000 + next_random(&state) % 200000; /* 200000 on average */
		hot_a(steps);
		hot_b(steps);
	} while (cpu_seconds_used() < end);
}

int main(int argc, char **argv)
{
	run_split(argc > 1 ? atof(argv[1]) : 5.0);
	return 0;
}
