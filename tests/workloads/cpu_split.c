/* Burns CPU in two functions whose shares are fixed by construction:
 * hot_a does 7 units of work for every 3 that hot_b does (70/30).
 * Usage: cpu_split [seconds] (default 5). */
#include <stdlib.h>
#include "elapsed.h"

static volatile unsigned long sink;

__attribute__((noinline)) static void work_unit(void)
{
	unsigned long x = sink;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

__attribute__((noinline)) void hot_a(void)
{
	for (int i = 0; i < 7; i++)
		work_unit();
}

__attribute__((noinline)) void hot_b(void)
{
	for (int i = 0; i < 3; i++)
		work_unit();
}

__attribute__((noinline)) void run_split(double seconds)
{
	struct timespec start = now();
	do {
		hot_a();
		hot_b();
	} while (seconds_since(start) < seconds);
}

int main(int argc, char **argv)
{
	run_split(argc > 1 ? atof(argv[1]) : 5.0);
	return 0;
}
