/* Wall-clock time for the workloads' run-for-N-seconds loops. */
#ifndef EMBER_WORKLOADS_ELAPSED_H
#define EMBER_WORKLOADS_ELAPSED_H

#include <time.h>

static inline struct timespec now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

static inline double seconds_since(struct timespec start)
{
	struct timespec t = now();
	return (t.tv_sec - start.tv_sec) + (t.tv_nsec - start.tv_nsec) / 1e9;
}

#endif
