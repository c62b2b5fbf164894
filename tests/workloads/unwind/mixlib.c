/* unwind_mix's shared library (see unwind_mix.cpp): three levels of its own.
 * noipa: no inlining, cloning (.constprop, .isra) or folding of the chain. */
#include "mixlib.h"

static volatile unsigned long mixlib_sink;

/* Dependent multiplies: the whole latency of an iteration, so the samples
 * land in this function (see tests/workloads/inline_hot.c). */
__attribute__((noipa)) static unsigned long mixlib_leaf_burn(unsigned long steps)
{
	unsigned long x = mixlib_sink | 1;
	for (unsigned long i = 0; i < steps; i++)
		x = x * x + i;
	return x;
}

/* The result is used after each call: no call is in tail position, so none
 * becomes a jump that would take its caller's frame off the stack. */
__attribute__((noipa)) static unsigned long mixlib_middle(unsigned long steps)
{
	unsigned long r = mixlib_leaf_burn(steps);
	mixlib_sink = r;
	return r + 1;
}

unsigned long mixlib_entry(unsigned long steps)
{
	unsigned long r = mixlib_middle(steps);
	mixlib_sink = r;
	return r + 1;
}

unsigned long mixlib_step(unsigned long x)
{
	return x * 3 + 1;
}
