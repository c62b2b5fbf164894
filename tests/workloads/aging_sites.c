/* A slow leak among a cache ten times as busy: each turn of a 1 ms loop
 * puts a 16 KiB block in a cache (cache_fill), every tenth turn also keeps
 * one for good (leak_here), and the cache is emptied every CACHE_MS
 * milliseconds (cache_empty). With the defaults the run ends 2 s after the
 * last emptying: the cache then holds more than twice what the leak has
 * kept in 8 s, and nothing in it is older than 2 s. The leak pauses from
 * 0.2 s before the moment that is MIN_AGE_S before the end to 0.8 s after
 * it: a profiler that stops up to 0.8 s after the exit (and takes the ages
 * then) counts the same old blocks as the program. Runs SECONDS, then
 * prints the bytes leak_here allocated at least MIN_AGE_S seconds before
 * its exit ("leak_old_bytes N"), all it kept ("leak_bytes N") and the
 * bytes the cache still held ("cache_bytes N").
 * Usage: aging_sites [seconds] [min_age_s] [cache_ms] (default 8, 3, 3000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "elapsed.h"

#define BLOCK (16 * 1024)
#define MAX_KEPT 100000

static void *kept[MAX_KEPT];
static double kept_at[MAX_KEPT];
static size_t nkept;
static void *cache[100000];
static size_t ncache;

__attribute__((noinline)) void leak_here(double at)
{
	void *p = malloc(BLOCK);
	memset(p, 1, 64);
	if (nkept < MAX_KEPT) {
		kept_at[nkept] = at;
		kept[nkept++] = p;
	}
}

__attribute__((noinline)) void cache_fill(void)
{
	void *p = malloc(BLOCK);
	memset(p, 2, 64);
	if (ncache < sizeof cache / sizeof cache[0])
		cache[ncache++] = p;
	else
		free(p);
}

__attribute__((noinline)) void cache_empty(void)
{
	while (ncache)
		free(cache[--ncache]);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 8;
	double min_age = argc > 2 ? atof(argv[2]) : 3;
	double cache_s = (argc > 3 ? atof(argv[3]) : 3000) / 1000;
	struct timespec start = now(), tick = {0, 1000000};
	double last_empty = 0;
	/* Turns, not time, set the two rates: a busy machine slows both alike. */
	for (unsigned long turn = 0;; turn++) {
		double t = seconds_since(start);
		if (t >= seconds)
			break;
		if (turn % 10 == 0 && !(t > seconds - min_age - 0.2 && t < seconds - min_age + 0.8))
			leak_here(t);
		if (t - last_empty >= cache_s) {
			cache_empty();
			last_empty = t;
		}
		cache_fill();
		nanosleep(&tick, 0);
	}
	double end = seconds_since(start);
	unsigned long long old = 0;
	for (size_t i = 0; i < nkept; i++)
		if (end - kept_at[i] >= min_age)
			old += BLOCK;
	printf("leak_old_bytes %llu\nleak_bytes %llu\ncache_bytes %llu\n", old, (unsigned long long)nkept * BLOCK,
	       (unsigned long long)ncache * BLOCK);
	return 0;
}
