/* Changes phase halfway: burns CPU in phase_a for N seconds of wall-clock
 * time, then in phase_b for N more (usage: phases [N], default 3). What
 * the heatmap must tell apart: each half of the recording has one function.
 * The work units are of random length, as in cpu_split, so a periodic
 * sampling timer does not alias with them. */
#include <stdlib.h>
#include "elapsed.h"
#include "work.h"

__attribute__((noinline)) void phase_a(double seconds, unsigned long *random)
{
	struct timespec start = now();
	while (seconds_since(start) < seconds)
		work_unit(20000 + next_random(random) % 40000);
}

__attribute__((noinline)) void phase_b(double seconds, unsigned long *random)
{
	struct timespec start = now();
	while (seconds_since(start) < seconds)
		work_unit(20000 + next_random(random) % 40000);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3;
	unsigned long random = 88172645463325252UL;
	phase_a(seconds, &random);
	phase_b(seconds, &random);
	return 0;
}
