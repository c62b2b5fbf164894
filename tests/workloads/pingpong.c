/* A blocking service stand-in for off-CPU overhead benchmarks: pairs of
 * threads pass a token through pipes, each doing a little integer work per
 * turn, so every request blocks and wakes twice (two context switches).
 * Runs S seconds, then prints "requests N" (round trips completed).
 * Usage: pingpong [seconds] [pairs] [work] (default 10, number of CPUs,
 * 20000 rounds of work per turn: about 20 us). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static volatile unsigned long sink;
static long rounds = 20000;

struct pair {
	int ping[2], pong[2];
	unsigned long round_trips;
};

__attribute__((noinline)) static unsigned long work(unsigned long x)
{
	for (long i = 0; i < rounds; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

static void *server(void *arg)
{
	struct pair *p = arg;
	char token;
	unsigned long x = 1;
	while (read(p->ping[0], &token, 1) == 1) {
		x = work(x);
		if (write(p->pong[1], &token, 1) != 1)
			break;
	}
	sink = x;
	return NULL;
}

static void *client(void *arg)
{
	struct pair *p = arg;
	char token = 't';
	unsigned long x = 2;
	while (!stop) {
		x = work(x);
		if (write(p->ping[1], &token, 1) != 1 || read(p->pong[0], &token, 1) != 1)
			break;
		p->round_trips++;
	}
	sink = x;
	close(p->ping[1]);
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	long pairs = argc > 2 ? atol(argv[2]) : sysconf(_SC_NPROCESSORS_ONLN);
	if (argc > 3)
		rounds = atol(argv[3]);
	struct pair *p = calloc(pairs, sizeof *p);
	pthread_t *threads = calloc(2 * pairs, sizeof *threads);
	unsigned long total = 0;

	for (long i = 0; i < pairs; i++) {
		if (pipe(p[i].ping) || pipe(p[i].pong))
			return 1;
		pthread_create(&threads[2 * i], NULL, server, &p[i]);
		pthread_create(&threads[2 * i + 1], NULL, client, &p[i]);
	}
	struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	stop = 1;
	for (long i = 0; i < pairs; i++) {
		pthread_join(threads[2 * i + 1], NULL);
		pthread_join(threads[2 * i], NULL);
		total += p[i].round_trips;
	}
	printf("requests %lu\n", total);
	return 0;
}
