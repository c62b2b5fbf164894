/* Stands in for a JIT: maps anonymous executable memory, names it in
 * /tmp/perf-PID.map (PID as the process sees itself, as JITs do inside a
 * container), prints its address, then waits. Usage: jit_stub */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void)
{
	unsigned char *code = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[64];
	FILE *map;

	if (code == MAP_FAILED)
		return 1;
	code[0] = 0xc3; /* ret */
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	map = fopen(path, "w");
	if (!map)
		return 1;
	fprintf(map, "%lx 100 jitted_alpha\n%lx 100 jitted_beta\n", (unsigned long)code,
		(unsigned long)code + 0x100);
	fclose(map);
	printf("%lx\n", (unsigned long)code);
	fflush(stdout);
	pause();
	return 0;
}
