/* Two threads contending on one pthread mutex: each holds it for HOLD_MS
 * in hold_lock, so the other waits in wait_for_lock. Prints the time the
 * threads spent waiting, as measured around pthread_mutex_lock: "waited_ns N".
 * Usage: lock_contention [rounds] [hold_ms] (default 10, 20). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "elapsed.h"

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static int rounds = 10;
static long hold_ms = 20;
static unsigned long waited_ns;  /* under the mutex */

__attribute__((noinline)) void hold_lock(void)
{
	struct timespec ts = {0, hold_ms * 1000000L};
	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void wait_for_lock(void)
{
	struct timespec start = now();
	pthread_mutex_lock(&mutex);
	waited_ns += (unsigned long)(seconds_since(start) * 1e9);
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < rounds; i++) {
		wait_for_lock();
		hold_lock();
		pthread_mutex_unlock(&mutex);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t a, b;
	if (argc > 1)
		rounds = atoi(argv[1]);
	if (argc > 2)
		hold_ms = atol(argv[2]);
	pthread_create(&a, NULL, worker, NULL);
	pthread_create(&b, NULL, worker, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("waited_ns %lu\n", waited_ns);
	return 0;
}
