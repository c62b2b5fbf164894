/* A deep, random call graph, for pricing the stack walk on stacks unlike a
 * benchmark loop's: each thread goes down a chain of 8 to 96 calls through
 * 12 functions of different frame sizes (a few words to a few hundred
 * bytes of locals, some with arguments spilled), each picked by a
 * pseudo-random draw, burns a few microseconds at the bottom, and starts
 * again: thousands of distinct stacks, of every depth in that range.
 * Built twice (bench/unwind.sh): -O2 -fomit-frame-pointer and -O2
 * -fno-omit-frame-pointer.
 * Usage: call_graph [seconds] [threads] (default 10, 2): wall-clock time. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds = 10;

struct walk {
	uint64_t rng;
	int depth;
	volatile uint64_t sink;
};

static uint64_t draw(struct walk *w)
{
	w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
	return w->rng >> 33;
}

static void step(struct walk *w);

/* WORDS of locals used after the call: each function's frame keeps its
 * size, and the call cannot become a jump. */
#define NODE(name, WORDS)                                   \
	__attribute__((noinline)) static void name(struct walk *w) \
	{                                                         \
		volatile uint64_t local[WORDS];                         \
		for (int i = 0; i < (WORDS); i++)                       \
			local[i] = w->rng + i;                          \
		step(w);                                                \
		w->sink += local[(WORDS) - 1];                          \
	}
NODE(node_a, 1)
NODE(node_b, 2)
NODE(node_c, 4)
NODE(node_d, 7)
NODE(node_e, 12)
NODE(node_f, 16)
NODE(node_g, 24)
NODE(node_h, 33)
NODE(node_i, 48)
NODE(node_j, 3)
NODE(node_k, 9)
NODE(node_l, 64)

static void (*const nodes[])(struct walk *) = {node_a, node_b, node_c, node_d, node_e, node_f,
					       node_g, node_h, node_i, node_j, node_k, node_l};

__attribute__((noinline)) static void leaf_burn(struct walk *w)
{
	for (int i = 0; i < 2000; i++)
		w->sink += i * w->rng;
}

static void step(struct walk *w)
{
	if (w->depth-- <= 0) {
		leaf_burn(w);
		return;
	}
	nodes[draw(w) % (sizeof nodes / sizeof nodes[0])](w);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *run(void *seed)
{
	struct walk w = {.rng = (uintptr_t)seed};
	double end = now() + seconds;
	while (now() < end)
		for (int i = 0; i < 100; i++) {
			w.depth = 8 + draw(&w) % 89;
			step(&w);
		}
	return 0;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 2;
	pthread_t t[64];
	if (argc > 1)
		seconds = atof(argv[1]);
	if (threads < 1 || threads > 64)
		return 2;
	for (int i = 1; i < threads; i++)
		pthread_create(&t[i], 0, run, (void *)(uintptr_t)(i * 7919 + 1));
	run((void *)1);
	for (int i = 1; i < threads; i++)
		pthread_join(t[i], 0);
	return 0;
}
