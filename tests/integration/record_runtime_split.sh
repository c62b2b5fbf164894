#!/usr/bin/env bash
# Python and JavaScript frames in their true proportions: under each
# CPython (3.8+) and node the tests run (tests/runtimes.sh), a workload
# whose CPU time splits about 50:30:20 between three functions of the same
# code (py_split.py, js_split.js: work units of random length, picked
# 5:3:2), started by ember. The workload measures the time each function
# took; of the samples whose innermost Python or JavaScript frame is one of
# the three (start-up runs none of them), each function's share is within
# 5 points of its measured one: at 3,000 samples a share's sampling error
# is under a point, and on a busy host node's wall-clock measure adds
# about one more.
. "$(dirname "$0")/../lib.sh"
need_bpf

# shares FOLDED: "alpha beta gamma samples", in percent of the samples
# whose innermost frame of the three names one.
shares() {
	awk '{
		n = split($0, f, ";"); w = f[n]; sub(/.* /, "", w)
		for (i = n; i > 0; i--) if (match(f[i], /^(alpha|beta|gamma) \(/)) { c[substr(f[i], 1, RLENGTH - 2)] += w; t += w; break }
	} END { if (t) printf "%.1f %.1f %.1f %d\n", 100 * c["alpha"] / t, 100 * c["beta"] / t, 100 * c["gamma"] / t, t; else print "0 0 0 0" }' "$1"
}
# truth OUT: the workload's "alpha beta gamma" in percent of their time.
truth() { awk '{ v[$1] = $2; t += $2 } END { if (t) printf "%.1f %.1f %.1f\n", 100 * v["alpha_ns"] / t, 100 * v["beta_ns"] / t, 100 * v["gamma_ns"] / t }' "$1"; }
within() { awk -v v="$1" -v e="$2" 'BEGIN { d = v - e; exit !(d <= 5 && d >= -5) }'; }

check() {
	local name=$1 out=$TMP/split.folded a b g n ta tb tg
	shift
	"$EMBER" record -F 999 -o "$out" -- "$@" 5 >"$TMP/truth" 2>"$TMP/err" || fail "$name: ember exited $?: $(cat "$TMP/err")"
	read -r a b g n < <(shares "$out")
	read -r ta tb tg < <(truth "$TMP/truth") || fail "$name: the workload did not say its times: $(cat "$TMP/truth")"
	echo "$name: alpha $a%, beta $b%, gamma $g% of $n samples (measured by the workload: $ta%, $tb%, $tg%)"
	((n >= 3000)) || fail "$name: $n samples in alpha, beta and gamma: $(sort -t' ' -k2 -nr "$out" | head -3 | cut -c1-600)"
	within "$a" "$ta" && within "$b" "$tb" && within "$g" "$tg" || fail "$name: the split is off by more than 5 points"
}

while read -r py; do
	version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || fail "$py does not run"
	version_at_least "$version" 3.8 || continue  # refused by name: python_layout.sh
	check "CPython $version ($py)" "$py" "$ROOT/tests/workloads/py_split.py"
done < <(cpythons)
while read -r node; do
	check "node $("$node" --version) ($node)" "$node" "$ROOT/tests/workloads/js_split.js"
done < <(nodes)
