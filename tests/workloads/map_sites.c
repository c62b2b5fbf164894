/* Memory a program maps itself, and large malloc blocks, which glibc maps
 * with the same mmap: COUNT times each, map_keep_here maps 64 MiB of
 * anonymous memory and keeps it, map_drop_here maps as much and unmaps it,
 * big_keep_here mallocs 1 MiB and keeps it, big_drop_here mallocs 1 MiB and
 * frees it (above M_MMAP_THRESHOLD: each is an mmap inside malloc, and an
 * munmap inside free). reserve_here maps 256 MiB of PROT_NONE address space
 * (reserved, not allocated) and shared_here 64 MiB of shared memory; neither
 * is a private allocation. Then waits a second, for a profiler to read what
 * is still allocated. Usage: map_sites [count] (default 4) */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAP (64UL << 20)
#define BIG (1UL << 20)

static void *volatile last; /* the compiler may not drop what escapes */

__attribute__((noinline)) void map_keep_here(void)
{
	char *p = mmap(NULL, MAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED)
		p[0] = 1; /* one page, not 64 MiB, of memory */
	last = p;
}

__attribute__((noinline)) void map_drop_here(void)
{
	char *p = mmap(NULL, MAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		p[0] = 1;
		munmap(p, MAP);
	}
}

__attribute__((noinline)) void big_keep_here(void)
{
	char *p = malloc(BIG);
	p[0] = 1;
	last = p;
}

__attribute__((noinline)) void big_drop_here(void)
{
	char *p = malloc(BIG);
	p[0] = 1;
	last = p;
	free(last);
}

__attribute__((noinline)) void reserve_here(void)
{
	last = mmap(NULL, 4 * MAP, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

__attribute__((noinline)) void shared_here(void)
{
	last = mmap(NULL, MAP, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
}

int main(int argc, char **argv)
{
	int count = argc > 1 ? atoi(argv[1]) : 4;
	/* Setting it also turns off glibc's raising of it as mapped blocks are
	 * freed, after which 1 MiB blocks would come from the heap. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	for (int i = 0; i < count; i++) {
		map_keep_here();
		map_drop_here();
		reserve_here();
		shared_here();
		for (int j = 0; j < 16; j++) {
			big_keep_here();
			big_drop_here();
		}
	}
	struct timespec wait = {1, 0};
	nanosleep(&wait, NULL);
	return 0;
}
