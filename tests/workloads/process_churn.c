/* A stream of short-lived processes, as a build or a busy service host
 * makes: process_churn N SECONDS starts N processes one after another,
 * paced to take at least SECONDS in all, each an exec of this binary that
 * burns 1 ms of CPU in churn_child_work and exits.
 * Usage: process_churn N SECONDS */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "elapsed.h"

extern char **environ;
static volatile unsigned long sink;

__attribute__((noinline)) void churn_child_work(double seconds)
{
	double end = cpu_seconds_used() + seconds;
	unsigned long x = sink;
	while (cpu_seconds_used() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "child") == 0) {
		churn_child_work(0.001);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: process_churn N SECONDS\n");
		return 2;
	}
	long n = atol(argv[1]);
	double seconds = atof(argv[2]);
	/* Its own path, so the children are named process_churn too. */
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0) {
		perror("readlink");
		return 1;
	}
	self[len] = 0;
	struct timespec start = now();
	char *child_argv[] = {self, "child", NULL};
	for (long i = 0; i < n; i++) {
		pid_t pid;
		if (posix_spawn(&pid, self, NULL, NULL, child_argv, environ) != 0) {
			perror("posix_spawn");
			return 1;
		}
		int status;
		waitpid(pid, &status, 0);
		double due = seconds * (i + 1) / n;  /* ahead of the pace: wait */
		double ahead = due - seconds_since(start);
		if (ahead > 0)
			usleep((useconds_t)(ahead * 1e6));
	}
	return 0;
}
