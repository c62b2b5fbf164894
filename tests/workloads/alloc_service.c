/* An allocating service stand-in for malloc-profiling overhead: one thread
 * per CPU runs requests of integer work (ROUNDS) that each allocate and
 * free four buffers of 64 B to 4 KiB, for S seconds and until LEAST
 * requests are done (a test's count, however starved the run), then prints
 * "requests N". With SHIFT, buffers are 2^SHIFT times larger, and those of
 * 128 KiB and more are mapped and unmapped by malloc (mmap) each time.
 * Usage: alloc_service [seconds] [rounds] [shift] [least] (default 10,
 * 20000, 0, 0). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static long rounds = 20000;
static unsigned shift;
static volatile unsigned long completed[256];
static void *volatile escape;

__attribute__((noinline)) static unsigned long handle_request(unsigned long x)
{
	void *buffers[4];
	for (int i = 0; i < 4; i++) {
		buffers[i] = malloc((64ul << (x + i) % 7) << shift);
		memset(buffers[i], (int)i, 64);
		escape = buffers[i];
	}
	for (long i = 0; i < rounds; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	for (int i = 0; i < 4; i++)
		free(buffers[i]);
	return x;
}

static unsigned long requests(long threads)
{
	unsigned long total = 0;
	for (long i = 0; i < threads; i++)
		total += completed[i];
	return total;
}

static void *worker(void *arg)
{
	unsigned long id = (unsigned long)arg, x = id + 1, n = 0;
	while (!stop) {
		x = handle_request(x);
		completed[id] = ++n;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	if (argc > 2)
		rounds = atol(argv[2]);
	if (argc > 3) {
		shift = atoi(argv[3]);
		/* Fixed: glibc would raise it as mapped blocks are freed. */
		mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	}
	unsigned long least = argc > 4 ? strtoul(argv[4], NULL, 10) : 0;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t threads[256];
	if (n > 256)
		n = 256;
	for (long i = 0; i < n; i++)
		pthread_create(&threads[i], NULL, worker, (void *)i);
	struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	while (requests(n) < least)
		usleep(10000);
	stop = 1;
	for (long i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	printf("requests %lu\n", requests(n));
	return 0;
}
