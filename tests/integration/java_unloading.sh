#!/usr/bin/env bash
# Code unloading: a JVM that defines, JIT-compiles and unloads a class per
# generation (method spin<g>) while ember records. Every generation's
# samples keep their own name: no pile-up on names whose code took over
# freed addresses. (Exact time-versus-address semantics: unit tests in
# tests/unit/test_jit_map.cpp.)
. "$(dirname "$0")/../lib.sh"
need_bpf
java_classes "$TMP/classes"
"$EMBER" record -F 499 -o "$TMP/out.folded" -- java -Xlog:class+unload=info:file="$TMP/unload.log" \
	-cp "$TMP/classes" Unloading 6 >"$TMP/stdout" 2>"$TMP/err" || fail "ember or the JVM exited $?: $(cat "$TMP/err")"
grep -q '^done' "$TMP/stdout" || fail "the JVM did not finish its loop"
unloaded=$(grep -c 'unloading class Gen' "$TMP/unload.log")
(( unloaded >= 10 )) || fail "only $unloaded Gen classes unloaded: the test did not exercise unloading"
grep -oE 'Gen\.spin[0-9]+_\[(j|i)\]' "$TMP/out.folded" >/dev/null || fail "no compiled Gen.spin frames"
# Weight per generation name.
awk '{ n = $NF; if (match($0, /Gen\.spin[0-9]+_/)) w[substr($0, RSTART, RLENGTH)] += n }
	END { for (k in w) print w[k] }' "$TMP/out.folded" | sort -n >"$TMP/weights"
gens=$(wc -l <"$TMP/weights")
median=$(awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }' "$TMP/weights")
max=$(tail -1 "$TMP/weights")
echo "$unloaded classes unloaded; $gens generations named; samples per generation: median $median, max $max"
(( gens >= 20 )) || fail "only $gens generations named"
# A generation runs 100 ms: 50 samples at most at 499 Hz, however the busy
# machine shares the CPU over time. Past 60 or 5 x the median, a name holds
# other generations' samples.
bound=$(( 5 * median + 5 > 60 ? 5 * median + 5 : 60 ))
(( max <= bound )) || fail "one generation has $max samples against a median of $median: misattributed code?"
