/* Burns CPU in two functions whose shares are fixed by construction:
 * hot_a does 7 units of work for every 3 that hot_b does (70/30).
 * Usage: cpu_split [seconds] (default 5). */
#include <stdlib.h>
#include <time.h>

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
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		hot_a();
		hot_b();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
	run_split(argc > 1 ? atof(argv[1]) : 5.0);
	return 0;
}
