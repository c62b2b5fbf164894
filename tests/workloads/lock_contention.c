/* Two threads contending on one pthread mutex: each holds it for HOLD_MS
 * in hold_lock, so the other waits in wait_for_lock. Prints the time the
 * threads spent waiting, as measured around pthread_mutex_lock (elapsed.h's
 * wait_clock): "waited_ns N" off CPU, "waited_runnable_ns N" of it runnable.
 * A third thread waits for work on a condition variable all along, in
 * wait_for_work: an idle wait, not a lock wait.
 * Usage: lock_contention [rounds] [hold_ms] [pi] (default 10, 20); "pi":
 * the mutex inherits priority (glibc waits in FUTEX_LOCK_PI, not FUTEX_WAIT). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "elapsed.h"

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static int rounds = 10;
static long hold_ms = 20;
static double waited, runnable;  /* under the mutex */
static pthread_mutex_t work_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static int done;  /* under work_mutex */

__attribute__((noinline)) void hold_lock(void)
{
	struct timespec ts = {0, hold_ms * 1000000L};
	nanosleep(&ts, NULL);
}

__attribute__((noinline)) void wait_for_lock(void)
{
	struct wait_clock start = wait_start();
	pthread_mutex_lock(&mutex);
	wait_end(start, &waited, &runnable);
}

__attribute__((noinline)) void wait_for_work(void)
{
	pthread_mutex_lock(&work_mutex);
	while (!done)
		pthread_cond_wait(&work, &work_mutex);
	pthread_mutex_unlock(&work_mutex);
}

static void *idle(void *arg)
{
	(void)arg;
	wait_for_work();
	return NULL;
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
	pthread_t a, b, c;
	if (argc > 1)
		rounds = atoi(argv[1]);
	if (argc > 2)
		hold_ms = atol(argv[2]);
	if (argc > 3) {
		pthread_mutexattr_t attr;
		pthread_mutexattr_init(&attr);
		pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
		pthread_mutex_init(&mutex, &attr);
	}
	pthread_create(&c, NULL, idle, NULL);
	pthread_create(&a, NULL, worker, NULL);
	pthread_create(&b, NULL, worker, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_mutex_lock(&work_mutex);
	done = 1;
	pthread_cond_signal(&work);
	pthread_mutex_unlock(&work_mutex);
	pthread_join(c, NULL);
	printf("waited_ns %.0f\nwaited_runnable_ns %.0f\n", waited * 1e9, runnable * 1e9);
	return 0;
}
