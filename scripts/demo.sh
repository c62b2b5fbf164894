#!/usr/bin/env bash
# `make demo`: profile the whole host for a few seconds while a bundled
# workload runs, and write the flamegraph to ember-demo.html.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "ember: the demo loads BPF programs: run it as root (sudo make demo)" >&2
	exit 1
fi
build/workloads/cpu_split 6 &
work1=$!
build/workloads/syscall_loop 6 &
work2=$!
trap 'kill $work1 $work2 2>/dev/null || true' EXIT
build/ember record -a -d 5 -o ember-demo.html
echo "ember: open ember-demo.html in a browser (file://$PWD/ember-demo.html)"
