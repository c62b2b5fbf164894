# Writes a synthetic folded profile for the viewer bench: STACKS unique
# stacks (default 100,000) of depth 8 to 60 over a pool of ~6,000 function
# names, weights summing to about SAMPLES (default 1,000,000). Stacks share
# prefixes like real ones do: each grows from an earlier stack's prefix.
# Deterministic (fixed seed).  awk -v STACKS=100000 -f bench/big_profile.awk
BEGIN {
	srand(42)
	if (!STACKS) STACKS = 100000
	if (!SAMPLES) SAMPLES = 1000000
	for (i = 0; i < 6000; i++)
		name[i] = sprintf("%s::%s_%d", (i % 7 == 0 ? "kernel" : i % 5 == 0 ? "java.app.Service" : "app::Module" i % 97), \
			(i % 3 == 0 ? "handle" : i % 3 == 1 ? "compute" : "lookup"), i)
	n = 0
	while (n < STACKS) {
		depth = 8 + int(rand() * 53)
		if (n > 0 && rand() < 0.9) {
			# grow from a prefix of an earlier stack
			base = stack[int(rand() * n)]
			k = split(base, f, ";")
			keep = 1 + int(rand() * (k < depth ? k : depth))
			s = f[1]
			for (i = 2; i <= keep; i++) s = s ";" f[i]
		} else {
			keep = 1
			s = "proc" int(rand() * 20)
		}
		for (i = keep + 1; i <= depth; i++) s = s ";" name[int(rand() * 6000)]
		if (s in seen) continue
		seen[s] = 1
		stack[n++] = s
	}
	for (i = 0; i < n; i++) print stack[i], 1 + int(rand() * 2 * SAMPLES / STACKS)
}
