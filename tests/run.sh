#!/usr/bin/env bash
# Runs every test tier and ends with the line "N passed, N failed, N skipped";
# exits 0 when nothing failed.
#   unit:        build/unit-tests (Catch2, no root, under ASan + UBSan)
#   integration: tests/integration/*.sh (exit 0 pass, 77 skip, else fail)
#   sanitized:   the scripts in SANITIZED again, with build/san/ember (ASan +
#                UBSan): any report, even from an ember in the background,
#                fails the run
#   matrix:      the integration scripts of kind structural again, inside
#                each kernel of tests/kernels/matrix.sh (qemu), booted
#                beside the tiers above; a line each
# Usage: tests/run.sh [--repeat N] [--kind KIND | --integration] [--verbose] [NAME_FILTER]
#   NAME_FILTER   run only the integration scripts whose file name contains
#                 it (record_offcpu: two scripts; record_offcpu.sh: one), or
#                 one of its comma-separated words (record_lock,record_malloc)
#   --kind KIND   only the integration scripts that say "# kind: KIND"
#                 (structural: asserts what load and slow clocks cannot
#                 change, so it runs in the kernel matrix's emulated guests;
#                 timing: measures rates or durations); no unit tests, no
#                 sanitized runs, no matrix
#   --integration the integration scripts of every kind, and nothing else
#   --verbose     say when each script starts, and print every script's
#                 output, not only a failure's
#   --repeat N    run each matching integration script N times in a row and
#                 count every run (a flaky test shows as some failed runs);
#                 the unit tests are skipped: repeating is for hunting chance
#                 failures in tests that sample a live system.
#                 Example: tests/run.sh --repeat 20 record_inlines
set -u
cd "$(dirname "$0")/.."
usage() { echo "usage: tests/run.sh [--repeat N] [--kind KIND | --integration] [--verbose] [NAME_FILTER]" >&2; exit 2; }
repeat=0 kind="" integration="" verbose=""
while [[ ${1:-} == --* ]]; do
	case $1 in
	--repeat) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; repeat=$2; shift 2 ;;
	--kind) [[ ${2:-} =~ ^[a-z]+$ ]] || usage; kind=$2 integration=1; shift 2 ;;
	--integration) integration=1; shift ;;
	--verbose) verbose=1; shift ;;
	*) usage ;;
	esac
done
(( $# <= 1 )) || usage
filter=${1:-}
# wanted FILE: no filter, or the file's name holds one of its words.
wanted() {
	local word
	[[ -z $filter ]] && return 0
	for word in ${filter//,/ }; do [[ $1 == *$word* ]] && return 0; done
	return 1
}
passed=0 failed=0 skipped=0 failures=()
# A script or two of each command (record, Java, serve, agent), short
# ones: the sanitized ember runs each about 1.5 times slower.
SANITIZED=(record_offcpu record_java_alloc_lock serve_api agent_ingest jvm_heap jvm_leaks)

run_unit_tests() {
	echo "== unit tests (ASan + UBSan)"
	local unit_log unit_rc line n p f start
	unit_log=$(mktemp)
	start=$(date +%s)
	build/unit-tests >"$unit_log" 2>&1
	unit_rc=$?
	tail -n 3 "$unit_log"
	echo "(unit tests: $(( $(date +%s) - start ))s)"
	# Catch2 ends with "All tests passed (A assertions in N test cases)" or
	# "test cases: N | P passed | F failed".
	if line=$(grep -E '^All tests passed' "$unit_log"); then
		n=$(sed -E 's/.* in ([0-9]+) test cases?.*/\1/' <<<"$line")
		passed=$((passed + n))
	elif line=$(grep -E '^test cases:' "$unit_log"); then
		p=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")
		f=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")
		passed=$((passed + p)) failed=$((failed + f))
		failures+=("unit tests")
		cat "$unit_log"
	fi
	if (( unit_rc != 0 )) && ! grep -qE '^test cases:' "$unit_log"; then
		failed=$((failed + 1)) failures+=("unit tests (exit $unit_rc)")
		cat "$unit_log"
	fi
	rm -f "$unit_log"
}

# cpu_ticks: "BUSY TOTAL", the machine's CPU time so far (/proc/stat, all
# CPUs; idle and iowait are not busy).
cpu_ticks() {
	# guest time, the last fields, is counted in user already
	local _ user nice system idle iowait irq softirq steal
	read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
	local busy=$((user + nice + system + irq + softirq + steal))
	echo "$busy $((busy + idle + iowait))"
}

# run_script SCRIPT LABEL [sanitized]: runs one integration script and
# counts its result. Beside its seconds, how busy it kept the machine: a
# test that waits more than it works is where the suite's time can go.
run_script() {
	local t=$1 label=$2 sanitized=${3:-} start out rc secs reports="" ticks0 ticks1 busy limit=300
	# An emulated kernel (the matrix's guests) runs ember's start-up, its
	# verifier above all, tens of times slower (java_jit_windows and
	# java_jit_stubs, three JVMs emulated, took past 900 s together in CI's
	# arm64 lane on a busy host: they are two scripts now).
	[[ ${EMBER_EMULATED:-} ]] && limit=900
	start=$(date +%s)
	ticks0=$(cpu_ticks)
	# Where a hung run stopped (the kernel matrix's guests).
	[[ $verbose ]] && echo "start   $label"
	if [[ $sanitized ]]; then
		reports=$(mktemp -d /tmp/ember-sanitizer.XXXXXX)
		out=$(EMBER=$PWD/build/san/ember ASAN_OPTIONS=log_path=$reports/asan \
			UBSAN_OPTIONS=log_path=$reports/ubsan:print_stacktrace=1 timeout "$limit" "$t" 2>&1)
		rc=$?
		if (( rc != 77 )) && compgen -G "$reports/*" >/dev/null; then
			out+=$'\n'"sanitizer reports:"$'\n'$(head -c 20000 "$reports"/*)
			rc=1
		fi
		rm -rf "$reports"
	else
		out=$(timeout "$limit" "$t" 2>&1)
		rc=$?
	fi
	secs=$(( $(date +%s) - start ))
	ticks1=$(cpu_ticks)
	busy=$(( (${ticks1% *} - ${ticks0% *}) * 100 / (${ticks1#* } - ${ticks0#* } + 1) ))
	[[ $verbose ]] && (( rc == 0 || rc == 77 )) && sed 's/^/    /' <<<"$out"
	case $rc in
	0) passed=$((passed + 1)); echo "ok      $label (${secs}s, ${busy}% busy)" ;;
	77) skipped=$((skipped + 1)); echo "skipped $label: $(tail -n 1 <<<"$out")" ;;
	*) failed=$((failed + 1)); failures+=("$label"); echo "FAILED  $label (exit $rc, ${secs}s)"; sed 's/^/    /' <<<"$out" ;;
	esac
}

# run_each SCRIPT LABEL [sanitized]: once, or --repeat times.
run_each() {
	if (( repeat )); then
		for (( i = 1; i <= repeat; i++ )); do run_script "$1" "$2 [run $i/$repeat]" "${3:-}"; done
	else
		run_script "$@"
	fi
}

# The kernel matrix: a whole run only, its guests booted at once, beside
# the host's tests. Its lines come at the end. Niced: its emulators take
# the CPU time the host's tests leave, rather than half of the machine
# (two emulators at equal priority made the host's tests wait for a CPU
# for seconds at a time, and their time bounds flaky).
# In a session of its own, so that a run stopped early (Ctrl-C) stops its
# emulators too: a background job ignores the terminal's SIGINT. A session
# is also a scheduling group of its own (autogroup), and groups share the
# CPUs equally whatever their processes' nice values: the group is niced
# too (without it the host's tests got a CPU at most, and a workload
# beside them 3% of one: too few samples).
matrix_log=""
if [[ -z $integration && -z $filter ]] && (( ! repeat )); then
	matrix_log=$(mktemp /tmp/ember-matrix.XXXXXX)
	setsid bash -c 'echo 10 >/proc/self/autogroup 2>/dev/null; exec nice -n 10 tests/kernels/matrix.sh' >"$matrix_log" 2>&1 &
	matrix_pid=$!
	trap 'kill -- -"$matrix_pid" 2>/dev/null; rm -f "$matrix_log"' EXIT
	trap 'exit 130' INT TERM
fi

(( repeat )) || [[ $integration ]] || run_unit_tests

echo "== integration tests${kind:+ of kind $kind}"
for t in tests/integration/*.sh; do
	name=$(basename "$t" .sh)
	wanted "$(basename "$t")" || continue
	[[ -n $kind ]] && ! grep -q "^# kind: $kind\$" "$t" && continue
	run_each "$t" "$name"
done

if [[ -z $integration ]]; then
	echo "== integration tests with build/san/ember (ASan + UBSan)"
	for name in "${SANITIZED[@]}"; do
		wanted "$name.sh" || continue
		run_each "tests/integration/$name.sh" "$name [sanitized]" sanitized
	done
fi

# Each kernel's line counts into the totals; one that cannot be had here
# is one skip.
if [[ $matrix_log ]]; then
	echo "== kernel matrix (tests/kernels/matrix.sh, from ${SECONDS}s)"
	wait "$matrix_pid"
	lanes=0
	while IFS= read -r line; do
		echo "$line"
		if [[ $line =~ ^kernel\ ([^ ]+).*:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped ]]; then
			passed=$((passed + BASH_REMATCH[2])) failed=$((failed + BASH_REMATCH[3])) skipped=$((skipped + BASH_REMATCH[4]))
			(( BASH_REMATCH[3] )) && failures+=("kernel ${BASH_REMATCH[1]}")
			lanes=$((lanes + 1))
		elif [[ $line =~ ^kernel\ [^\ ]+:\ skipped: ]]; then
			skipped=$((skipped + 1))
			lanes=$((lanes + 1))
		fi
	done < <(cat "$matrix_log" 2>/dev/null)
	# A matrix that left no lane's line (its log gone, the script killed)
	# proved nothing: a failure, not a silent pass.
	if ((lanes == 0)); then
		failed=$((failed + 1))
		failures+=("kernel matrix (no results)")
	fi
	rm -f "$matrix_log"
fi

(( failed )) && echo "failed: ${failures[*]}"
echo "(tests: ${SECONDS}s)"
echo "$passed passed, $failed failed, $skipped skipped"
(( failed == 0 ))
