/* Many distinct stacks, for the limits on how many a profile may hold: a
 * walk down DEPTH calls, each through one of 8 functions (zoo0 ... zoo7)
 * picked by a digit of a counter in base 8, ends in a sleep of 50 us; the
 * counter goes round 8^DEPTH values, each a stack of its own. Runs for
 * SECONDS of wall-clock time.
 * Usage: stack_zoo [seconds] [depth] (default 10, 4: 4,096 stacks) */
#include <stdlib.h>
#include <time.h>
#include "elapsed.h"

static long walk(int depth, unsigned path);

/* The result is used after the call: no tail call, each stays on the stack. */
#define ZOO(k) \
	__attribute__((noinline)) static long zoo##k(int depth, unsigned path) { return walk(depth - 1, path / 8) + k; }
ZOO(0) ZOO(1) ZOO(2) ZOO(3) ZOO(4) ZOO(5) ZOO(6) ZOO(7)

static long (*const zoo[8])(int, unsigned) = {zoo0, zoo1, zoo2, zoo3, zoo4, zoo5, zoo6, zoo7};

__attribute__((noinline)) static long walk(int depth, unsigned path)
{
	if (depth == 0) {
		struct timespec t = {0, 50 * 1000};
		return nanosleep(&t, NULL);
	}
	return zoo[path % 8](depth, path) + 1;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	int depth = argc > 2 ? atoi(argv[2]) : 4;
	unsigned stacks = 1;
	for (int i = 0; i < depth; i++)
		stacks *= 8;
	struct timespec start = now();
	long sum = 0;
	for (unsigned i = 0; seconds_since(start) < seconds; i = (i + 1) % stacks)
		sum += walk(depth, i);
	return sum < 0;
}
