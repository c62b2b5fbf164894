/* Blocks in a library loaded after the process's first samples (issue 13:
 * its tables are made then, without the library), built -O2 without frame
 * pointers as distributions build:
 *   main;settle;nanosleep    20 sleeps of 10 ms: the collector reads the
 *                            process's mappings here, before the dlopen;
 *   main;late_blocks;late_sleep;nanosleep
 *                            then N sleeps of 1 ms in the library
 *                            (late_plugin.c), dlopen()ed from the path given.
 * Usage: late_library PLUGIN [N] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noipa)) static long settle(void)
{
	long slept = 0;
	for (int i = 0; i < 20; i++) {
		struct timespec t = {0, 10 * 1000 * 1000};
		slept += nanosleep(&t, NULL) == 0;
	}
	return slept;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: late_library PLUGIN [N]\n");
		return 2;
	}
	if (settle() != 20)
		return 1;
	void *plugin = dlopen(argv[1], RTLD_NOW);
	if (!plugin) {
		fprintf(stderr, "late_library: %s\n", dlerror());
		return 1;
	}
	long (*late_blocks)(int) = (long (*)(int))dlsym(plugin, "late_blocks");
	if (!late_blocks)
		return 1;
	long n = argc > 2 ? atol(argv[2]) : 400;
	long slept = late_blocks((int)n);
	printf("late_sleeps %ld\n", slept);
	return slept == n ? 0 : 1;
}
