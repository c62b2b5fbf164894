/* The CPU work of the sampling workloads: a unit of work_unit(steps)
 * multiply-adds, of a length drawn with next_random so that a periodic
 * sampling timer does not alias with it (see cpu_split.c). */
#ifndef EMBER_WORKLOADS_WORK_H
#define EMBER_WORKLOADS_WORK_H

static volatile unsigned long sink;

__attribute__((noinline)) static void work_unit(unsigned long steps)
{
	unsigned long x = sink;
	for (unsigned long i = 0; i < steps; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

/* xorshift64: cheap, and a fixed seed keeps runs alike. */
static unsigned long next_random(unsigned long *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

#endif
