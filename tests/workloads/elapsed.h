/* Time for the workloads' run-for-N-seconds loops: wall-clock time, or the
 * CPU time the process used, for workloads whose samples are counted (their
 * number is then the same on a busy machine as on an idle one). */
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

static inline double cpu_seconds_used(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif
