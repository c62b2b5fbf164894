/* Blocks a parent keeps while its forked child frees its own copies: the
 * child's free() gets the very addresses of the parent's blocks. kept_here
 * mallocs 256 blocks of 64 KiB (16 MiB) and keeps them; the child frees
 * them all and exits; the parent waits for it, then another second (for a
 * profiler to read what is still allocated). Usage: fork_free */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCKS 256
#define BLOCK (64 * 1024)

static void *kept[BLOCKS];

__attribute__((noinline)) void kept_here(void)
{
	for (int i = 0; i < BLOCKS; i++) {
		kept[i] = malloc(BLOCK);
		memset(kept[i], 1, 64);
	}
}

int main(void)
{
	kept_here();
	pid_t child = fork();
	if (child == 0) {
		for (int i = 0; i < BLOCKS; i++)
			free(kept[i]);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	struct timespec wait = {1, 0};
	nanosleep(&wait, NULL);
	return kept[0] == NULL;
}
