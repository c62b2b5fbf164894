/* Changes phase halfway: burns N seconds of CPU time in phase_a, then N
 * more in phase_b (usage: phases [N], default 3). What the heatmap must
 * tell apart: each half of the recording has one function. CPU time, not
 * wall-clock time, so that each half has its samples on a busy machine.
 * The work units are of random length, as in cpu_split, so a periodic
 * sampling timer does not alias with them. */
#include <stdlib.h>
#include "elapsed.h"
#include "work.h"

__attribute__((noinline)) void phase_a(double seconds, unsigned long *random)
{
	double end = thread_cpu_seconds() + seconds;
	while (thread_cpu_seconds() < end)
		work_unit(20000 + next_random(random) % 40000);
}

__attribute__((noinline)) void phase_b(double seconds, unsigned long *random)
{
	double end = thread_cpu_seconds() + seconds;
	while (thread_cpu_seconds() < end)
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
