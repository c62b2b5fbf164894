/* Two allocation sites of equal volume: leak_here keeps every block,
 * churn_here frees each at once. Allocates 64 KiB blocks through malloc
 * from each site in turn for the given seconds, then waits (so a profiler
 * can read what is still allocated) for another second.
 * Usage: leak_sites [seconds] */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "elapsed.h"

#define BLOCK (64 * 1024)

static void **kept;
static void *volatile last; /* the compiler may not drop an allocation that escapes */
static size_t nkept, cap;

__attribute__((noinline)) void leak_here(void)
{
	void *p = malloc(BLOCK);
	memset(p, 1, 64);
	if (nkept == cap) {
		cap = cap ? 2 * cap : 1024;
		kept = realloc(kept, cap * sizeof *kept);
	}
	kept[nkept++] = p;
}

__attribute__((noinline)) void churn_here(void)
{
	void *p = malloc(BLOCK);
	memset(p, 2, 64);
	last = p;
	free(last);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1;
	struct timespec start = now();
	struct timespec pause = {0, 2000000};
	while (seconds_since(start) < seconds) {
		for (int i = 0; i < 16; i++) {
			leak_here();
			churn_here();
		}
		nanosleep(&pause, NULL); /* a few hundred MiB per second, not all of memory */
	}
	struct timespec wait = {1, 0};
	nanosleep(&wait, NULL);
	return nkept == 0;
}
