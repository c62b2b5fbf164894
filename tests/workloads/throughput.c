/* A CPU-bound service stand-in for overhead benchmarks: N threads run
 * requests (a few nested calls of integer work and an occasional system
 * call) for S seconds, then it prints "requests N" (total completed).
 * Usage: throughput [seconds] [threads] (default 10, number of CPUs). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static unsigned long completed[256];
static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long mix(unsigned long x, int rounds)
{
	for (int i = 0; i < rounds; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) static unsigned long parse_request(unsigned long x) { return mix(x, 3000); }
__attribute__((noinline)) static unsigned long compute_response(unsigned long x) { return mix(x, 6000); }
__attribute__((noinline)) static unsigned long encode_response(unsigned long x) { return mix(x, 1000); }

__attribute__((noinline)) static unsigned long handle_request(unsigned long x, long n)
{
	x = encode_response(compute_response(parse_request(x)));
	if (n % 64 == 0)
		syscall(SYS_getppid);
	return x;
}

static void *worker(void *arg)
{
	unsigned long id = (unsigned long)arg, x = id + 1, n = 0;
	while (!stop)
		x = handle_request(x, (long)n++);
	completed[id] = n;
	sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	int threads = argc > 2 ? atoi(argv[2]) : (int)sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t tid[256];
	if (threads < 1 || threads > 256)
		return 2;
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[i], NULL, worker, (void *)(unsigned long)i);
	struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	stop = 1;
	unsigned long total = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
		total += completed[i];
	}
	printf("requests %lu\n", total);
	return 0;
}
