/* Hot code that the compiler inlines: run_inline calls hot_outer, which
 * calls hot_leaf, both always inlined (even under -fno-inline), so the
 * profile shows them only through DWARF. Usage: inline_hot [seconds]. */
#include <stdlib.h>
#include "elapsed.h"

static volatile unsigned long sink;

static inline __attribute__((always_inline)) void hot_leaf(unsigned long i)
{
	sink += i * i;
}

static inline __attribute__((always_inline)) void hot_outer(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		hot_leaf(i);
}

__attribute__((noinline)) void run_inline(double seconds)
{
	struct timespec start = now();
	do
		hot_outer(100000);
	while (seconds_since(start) < seconds);
}

int main(int argc, char **argv)
{
	run_inline(argc > 1 ? atof(argv[1]) : 1);
	return 0;
}
