/* CPU time in known call chains that a stack unwinder must follow without
 * frame pointers: one thread per variant, each spending the same CPU time
 * (its own clock, so a busy machine or a slower build does not change the
 * shares) in a chain of several levels whose names say where they are.
 *   main thread    library_loop;library_caller;mixlib_entry;mixlib_middle;
 *                  mixlib_leaf_burn, the last three in libunwind_mixlib-*.so
 *   mix-chain      chain_thread;chain_level1;..;chain_level4;chain_leaf_burn
 *   mix-qsort      qsort_thread;qsort_sort_records;qsort;<libc>;
 *                  qsort_compare_slow (a comparator that burns CPU)
 *   mix-signal     signal_thread;signal_victim_loop;signal_victim_work,
 *                  interrupted every few ms of its CPU time by a signal
 *                  whose handler burns a third of the thread's time:
 *                  ...;signal_victim_work;__restore_rt;
 *                  signal_handler_on_timer;signal_handler_burn
 *   mix-exception  exception_thread;exception_catch_loop;exception_level1;
 *                  exception_level2 (whose BurningGuard destructor burns
 *                  while the exception unwinds through it);exception_level3;
 *                  exception_thrower;__cxa_throw;<libgcc's unwinder>
 *   mix-plt        plt_thread;plt_loop;mixlib_step@plt (its PLT entry: a
 *                  fifth of the thread's samples on Intel, a sixtieth on
 *                  AMD EPYC) or mixlib_step, for three times as long
 * Built twice (tests/integration/unwind_native.sh compares the two):
 * -O2 -fomit-frame-pointer and -O2 -fno-omit-frame-pointer.
 * Usage: unwind_mix [seconds] [--wait]: seconds of CPU time per thread
 * (default 1; the PLT thread three times that); --wait: start once a byte arrives on stdin, so that
 * profilers can attach first. */
#include <iterator>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "mixlib.h"

/* noipa: no inlining, cloning (.constprop, .isra) or folding of a chain.
 * Every call's result is used after it returns, so no call is in tail
 * position (a tail call jumps, and its caller leaves the stack). */
#define CHAIN extern "C" __attribute__((noipa))

static volatile unsigned long sink;

static double thread_cpu_seconds()
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64: rounds of random length, so that no loop runs in step with
 * the sampling timer (aliasing); a fixed seed keeps runs alike. */
static unsigned long next_random(unsigned long *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static unsigned long random_steps(unsigned long *state)
{
	return 10000 + next_random(state) % 40000;
}

/* Dependent multiplies: the whole latency of an iteration, so the samples
 * land in the function that runs them (see tests/workloads/inline_hot.c). */
static inline __attribute__((always_inline)) unsigned long burn(unsigned long steps)
{
	unsigned long x = sink | 1;
	for (unsigned long i = 0; i < steps; i++)
		x = x * x + i;
	return x;
}

/* --- mix-chain: a plain chain of five levels. */
CHAIN unsigned long chain_leaf_burn(unsigned long steps) { return burn(steps); }
CHAIN unsigned long chain_level4(unsigned long steps) { unsigned long r = chain_leaf_burn(steps); sink = r; return r + 1; }
CHAIN unsigned long chain_level3(unsigned long steps) { unsigned long r = chain_level4(steps); sink = r; return r + 1; }
CHAIN unsigned long chain_level2(unsigned long steps) { unsigned long r = chain_level3(steps); sink = r; return r + 1; }
CHAIN unsigned long chain_level1(unsigned long steps) { unsigned long r = chain_level2(steps); sink = r; return r + 1; }

/* --- mix-qsort: libc calls back into the program. */
struct Record {
	unsigned long key;
	unsigned long steps;
};

CHAIN int qsort_compare_slow(const void *a, const void *b)
{
	const Record *ra = static_cast<const Record *>(a), *rb = static_cast<const Record *>(b);
	sink = burn(ra->steps);
	return ra->key < rb->key ? -1 : ra->key > rb->key;
}

/* 64 records of 16 bytes: glibc sorts them by merging (msort_with_tmp) in a
 * buffer on the stack, the comparator called from each level of it. */
CHAIN unsigned long qsort_sort_records(Record *records, size_t n)
{
	qsort(records, n, sizeof *records, qsort_compare_slow);
	sink = records[0].key;
	return records[n - 1].key;
}

/* --- mix-signal: a handler that burns CPU above the interrupted code. */
CHAIN unsigned long signal_handler_burn(unsigned long steps) { return burn(steps); }

/* Thread CPU time when the handler last returned (one thread takes it). */
static double handler_returned_at;

/* Burns half as long as the code it interrupted ran since the last signal:
 * a third of the thread's CPU time is in the handler, however coarsely the
 * kernel fires the timer (CPU-time timers expire on scheduler ticks). */
CHAIN void signal_handler_on_timer(int)
{
	double start = thread_cpu_seconds();
	double end = start + (start - handler_returned_at) / 2;
	do
		sink = signal_handler_burn(100000);
	while (thread_cpu_seconds() < end);
	handler_returned_at = thread_cpu_seconds();
}

CHAIN unsigned long signal_victim_work(unsigned long steps) { return burn(steps); }

CHAIN void signal_victim_loop(double end)
{
	unsigned long state = 0x2545f4914f6cdd1dUL;
	do
		sink = signal_victim_work(random_steps(&state));
	while (thread_cpu_seconds() < end);
}

/* A timer on the thread's own CPU clock that signals this thread only. */
static timer_t start_thread_cpu_timer(int signo, long period_ns)
{
	struct sigevent event = {};
	event.sigev_notify = SIGEV_THREAD_ID;
	event.sigev_signo = signo;
	event._sigev_un._tid = gettid(); /* sigev_notify_thread_id: glibc 2.41+ */
	timer_t timer;
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &event, &timer) != 0) {
		perror("unwind_mix: timer_create");
		exit(1);
	}
	struct itimerspec period = {{0, period_ns}, {0, period_ns}};
	timer_settime(timer, 0, &period, nullptr);
	return timer;
}

/* --- mix-exception: CPU in destructors run by the unwinder, and in it. */
struct LevelException {
	unsigned long steps;
};

CHAIN unsigned long exception_destructor_burn(unsigned long steps) { return burn(steps); }

struct BurningGuard {
	unsigned long steps;
	__attribute__((noipa)) ~BurningGuard() { sink = exception_destructor_burn(steps); }
};

CHAIN unsigned long exception_thrower(unsigned long steps)
{
	if (steps)
		throw LevelException{steps};
	return 0;
}

CHAIN unsigned long exception_level3(unsigned long steps) { unsigned long r = exception_thrower(steps); sink = r; return r + 1; }

CHAIN unsigned long exception_level2(unsigned long steps)
{
	BurningGuard guard{steps};
	unsigned long r = exception_level3(steps);
	sink = r;
	return r + 1;
}

CHAIN unsigned long exception_level1(unsigned long steps) { unsigned long r = exception_level2(steps); sink = r; return r + 1; }

/* Each throw costs the unwinder a few microseconds; the destructor burns
 * about as long, so both show. */
CHAIN void exception_catch_loop(double end)
{
	unsigned long state = 0x853c49e6748fea9bUL;
	do {
		for (int i = 0; i < 16; i++) { /* the clock costs about a throw */
			try {
				sink = exception_level1(next_random(&state) % 2000 + 1);
			} catch (const LevelException &e) {
				sink = e.steps;
			}
		}
	} while (thread_cpu_seconds() < end);
}

/* --- main thread: a shared library's own chain. */
CHAIN unsigned long library_caller(unsigned long steps) { unsigned long r = mixlib_entry(steps); sink = r; return r + 1; }

CHAIN void library_loop(double end)
{
	unsigned long state = 0x5851f42d4c957f2dUL;
	do
		sink = library_caller(random_steps(&state));
	while (thread_cpu_seconds() < end);
}

/* --- threads */
static double seconds_per_thread = 1.0;

CHAIN void *chain_thread(void *)
{
	unsigned long state = 0xda3e39cb94b95bdbUL;
	double end = thread_cpu_seconds() + seconds_per_thread;
	do
		sink = chain_level1(random_steps(&state));
	while (thread_cpu_seconds() < end);
	return nullptr;
}

CHAIN void *qsort_thread(void *)
{
	unsigned long state = 0x14057b7ef767814fUL;
	Record records[64];
	double end = thread_cpu_seconds() + seconds_per_thread;
	do {
		for (Record &r : records)
			r = {next_random(&state), 20 + next_random(&state) % 400};
		sink = qsort_sort_records(records, 64);
	} while (thread_cpu_seconds() < end);
	return nullptr;
}

CHAIN void *signal_thread(void *)
{
	struct sigaction action = {};
	action.sa_handler = signal_handler_on_timer;
	action.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN, &action, nullptr);
	handler_returned_at = thread_cpu_seconds();
	timer_t timer = start_thread_cpu_timer(SIGRTMIN, 2000000);
	signal_victim_loop(thread_cpu_seconds() + seconds_per_thread);
	timer_delete(timer);
	return nullptr;
}

CHAIN void *exception_thread(void *)
{
	exception_catch_loop(thread_cpu_seconds() + seconds_per_thread);
	return nullptr;
}

/* Calls through the PLT, in a loop: the walk must step from the entry (no
 * frame, the return address on top) to plt_loop. */
CHAIN unsigned long plt_loop(double end)
{
	unsigned long x = 1;
	do
		for (int i = 0; i < 100000; i++)
			x = mixlib_step(x);
	while (thread_cpu_seconds() < end);
	return x;
}

/* Three times the others' CPU time: how many samples land in the PLT
 * entry itself depends on the CPU (see mix-plt above), and the test needs
 * enough of them to judge. */
CHAIN void *plt_thread(void *)
{
	sink = plt_loop(thread_cpu_seconds() + 3 * seconds_per_thread);
	return nullptr;
}

struct Variant {
	const char *thread_name;
	void *(*run)(void *);
};

int main(int argc, char **argv)
{
	if (argc > 1)
		seconds_per_thread = atof(argv[1]);
	if (argc > 2 && strcmp(argv[2], "--wait") == 0) {
		char go;
		if (read(0, &go, 1) != 1)
			return 1;
	}
	const Variant variants[] = {
		{"mix-chain", chain_thread},
		{"mix-qsort", qsort_thread},
		{"mix-signal", signal_thread},
		{"mix-exception", exception_thread},
		{"mix-plt", plt_thread},
	};
	pthread_t threads[std::size(variants)];
	for (size_t i = 0; i < std::size(variants); i++) {
		pthread_create(&threads[i], nullptr, variants[i].run, nullptr);
		pthread_setname_np(threads[i], variants[i].thread_name);
	}
	library_loop(thread_cpu_seconds() + seconds_per_thread);
	for (pthread_t t : threads)
		pthread_join(t, nullptr);
	return 0;
}
