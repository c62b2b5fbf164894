#!/usr/bin/env bash
# A host's mixed load for SECONDS (30): a C++ compiler, a compressor,
# Python and javac, each over and over, so that a recording meets what a
# real host shows it: many binaries with their DWARF, short-lived
# processes, JVMs. The programs are Debian's; the inputs, ember's sources.
# Usage: bench/mixed_load.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
T=$(mktemp -d /tmp/ember-load.XXXXXX)
trap 'rm -rf "$T"' EXIT
end=$(($(date +%s) + secs))
more() { [ "$(date +%s)" -lt "$end" ]; }
(while more; do g++ -O2 -std=c++2b -I. -c symbolizer/dwarf_index.cpp -o "$T/x.o"; done) &
(while more; do head -c 20000000 /dev/urandom | xz -6 -T1 >/dev/null; done) &
(while more; do javac -d "$T/classes" bench/java/*.java; done) &
/usr/bin/python3 - "$secs" <<'PY' &
import json, sys, time
def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    fib(20)
    json.dumps([{"a": i, "b": str(i)} for i in range(2000)])
PY
wait
