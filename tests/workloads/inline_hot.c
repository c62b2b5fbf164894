/* Hot code that the compiler inlines: run_inline calls hot_outer, which
 * calls hot_leaf, both always inlined (even under -fno-inline), so the
 * profile shows them only through DWARF. Usage: inline_hot [seconds]
 * (of CPU time, so a busy machine does not thin the samples of a test).
 *
 * Nearly all the time is spent inside hot_leaf, on purpose. A timer
 * interrupt is taken where retirement stands, so in a loop whose time is one
 * stall it lands on the same instruction or two, whatever the timer's rate:
 * with hot_leaf a single `sink += i * i`, the stall was the read-modify-write
 * of sink, and the samples went mostly to hot_outer's loop counter after it
 * (an AMD machine gave hot_leaf 11% of them; issue 12's machine at times
 * none of 500).
 * Here hot_leaf is a chain of 32 dependent multiplies, the whole latency of
 * an iteration, so the samples land in it on any out-of-order CPU. */
#include <stdlib.h>
#include "elapsed.h"

static volatile unsigned long sink;

static inline __attribute__((always_inline)) void hot_leaf(unsigned long i)
{
	unsigned long x = i;
	for (int k = 0; k < 32; k++)
		x = x * x + i; /* not affine: the compiler cannot fold the chain */
	sink += x;
}

static inline __attribute__((always_inline)) void hot_outer(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		hot_leaf(i);
}

__attribute__((noinline)) void run_inline(double seconds)
{
	double end = cpu_seconds_used() + seconds;
	do
		hot_outer(100000);
	while (cpu_seconds_used() < end);
}

int main(int argc, char **argv)
{
	run_inline(argc > 1 ? atof(argv[1]) : 1);
	return 0;
}
