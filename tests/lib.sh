# Shared helpers for tests/integration/*.sh. A test exits 0 (pass), 77 (skip,
# with the reason on stdout) or anything else (fail, with the reason).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# EMBER: the binary under test (tests/run.sh sets build/san/ember for the
# sanitizer runs).
EMBER=${EMBER:-$ROOT/build/ember}
WORKLOADS=$ROOT/build/workloads
TMP=$(mktemp -d /tmp/ember-test.XXXXXX)
BACKGROUND=()
AT_EXIT=()
MAIN_SHELL=$BASHPID
# at_exit COMMAND: run when the test ends (to stop or restore what it
# changed), once its background commands are signalled, before $TMP goes.
at_exit() { AT_EXIT+=("$1"); }
cleanup() {
	# A shell forked for a background command runs this trap too when a
	# signal reaches it before its exec (a test stopping what it just
	# started): only the test's own shell cleans up.
	[[ $BASHPID == "$MAIN_SHELL" ]] || return 0
	local c p
	for p in "${BACKGROUND[@]}"; do kill "$p" 2>/dev/null; done
	for c in "${AT_EXIT[@]}"; do eval "$c"; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
. "$ROOT/tests/runtimes.sh"

# Recording needs root (CAP_BPF + CAP_PERFMON) and BTF.
need_bpf() {
	[ "$(id -u)" = 0 ] || skip "needs root to load BPF programs"
	[ -e /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF (/sys/kernel/btf/vmlinux)"
}

# The browser tests drive headless Chromium through playwright-core.
need_browser() {
	[ -x /usr/bin/chromium ] || skip "no /usr/bin/chromium (scripts/deps.sh test installs it)"
	[ -d "$ROOT/tests/browser/node_modules/playwright-core" ] || skip "playwright-core not installed in tests/browser"
	command -v node >/dev/null || skip "no node"
}

# java_classes DIR: the Java workloads (tests/java, bench/java) in DIR,
# compiled by make test-build.
java_classes() {
	[ -e "$ROOT/build/java/classes/.built" ] || fail "no build/java/classes: make test-build compiles tests/java"
	mkdir -p "$1" && cp -r "$ROOT/build/java/classes/." "$1"
}

# each_jdk FUNCTION: runs FUNCTION JAVA_HOME LABEL for Debian's JDK 17
# (jdk17) and, where installed, the Temurin JDK 25 (jdk25).
each_jdk() {
	"$1" "$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")" jdk17
	local jdk25
	jdk25=$(ls -d /usr/lib/jvm/temurin-25* 2>/dev/null | head -1)
	if [ -n "$jdk25" ]; then
		"$1" "$jdk25" jdk25
	else
		echo "no /usr/lib/jvm/temurin-25*: JDK 25 not checked"
	fi
}

# The tests' reader of OpenTelemetry profiles (tests/tools/otlp_read.py):
# Debian's python3 with python3-protobuf, and the classes make test-build
# generates from tests/otlp's proto files.
OTLP_READ=(/usr/bin/python3 "$ROOT/tests/tools/otlp_read.py")
need_otlp_reader() {
	/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null || fail "no python3-protobuf: scripts/deps.sh test installs it"
	[ -e "$ROOT/build/otlp_py/.done" ] || fail "no build/otlp_py: make test-build generates it from tests/otlp"
}

# The real pprof, as $PPROF (make test-build builds it from Debian's Go sources).
need_pprof() {
	PPROF=$ROOT/build/pprof
	[ -x "$PPROF" ] || fail "no build/pprof (make test builds it from golang-github-google-pprof-dev)"
}

# A TCP port of 127.0.0.1 free now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Starts a command in the background, killed when the test ends.
background() {
	"$@" &
	BACKGROUND+=($!)
}

# start_ready OUT COMMAND...: starts COMMAND in the background (killed when
# the test ends), its output in OUT, and waits up to 90 s for it to print
# "ready"; its pid in $ready_pid. OUT is emptied here first: a test that
# starts several in turn would otherwise find the last one's "ready" before
# the new one's shell has truncated it.
start_ready() {
	local out=$1 _
	shift
	: >"$out"
	"$@" >"$out" &
	ready_pid=$!
	BACKGROUND+=($ready_pid)
	for _ in $(seq 900); do grep -q ready "$out" && return 0; sleep 0.1; done
	return 1
}

# version_at_least A B: whether version A (3.11, 6.1.0) is B or later.
version_at_least() { [ "$(printf '%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

# Waits until ember (PID) samples. Start it with --progress-fd 3
# 3>PROGRESS: its first line is written once the programs are armed, which
# with -a or -p comes after every JVM's attach (up to --attach-timeout),
# well after its perf events are open. An emulated guest beside a busy
# host (CI's arm64 lane) took over 30 s to attach two JVMs: there it waits
# 330 s, beyond the --attach-timeout its Java tests give (120 s, 300 s for
# java_default_jvm's JIT-heavy JVM).
wait_sampling() {
	local pid=$1 progress=$2 seconds=30
	[[ ${EMBER_EMULATED:-} ]] && seconds=330
	for _ in $(seq $((seconds * 10))); do
		kill -0 "$pid" 2>/dev/null || fail "ember ($pid) exited before sampling"
		grep -qs '"progress"' "$progress" && return
		sleep 0.1
	done
	fail "ember ($pid) not sampling after $seconds s"
}

# record_go_done LABEL OUT EMBER_RECORD_ARGS...: `ember record` in the
# background (its stderr in $TMP/LABEL.err); once it samples, touches
# $TMP/go for a workload waiting on it, and stops ember (SIGINT) once the
# workload's OUT has a line "done ...", within 120 s.
record_go_done() {
	local label=$1 out=$2 rec
	shift 2
	"$EMBER" record "$@" --progress-fd 3 3>"$TMP/$label.progress" 2>"$TMP/$label.err" &
	rec=$!
	wait_sampling "$rec" "$TMP/$label.progress"
	touch "$TMP/go"
	for _ in $(seq 1200); do grep -q '^done' "$out" && break; sleep 0.1; done
	grep -q '^done' "$out" || fail "$label: the workload did not finish in 120 s: $(tail -3 "$out")"
	kill -INT "$rec"
	wait "$rec" || fail "$label: ember exited $?: $(cat "$TMP/$label.err")"
}

# cpu_ticks PID: the CPU time process PID used so far, in clock ticks (its
# utime and stime; 0 once it is gone). Its name, which may hold spaces and
# parentheses, ends at the last ") ". Builtins only: record_for_cpu calls
# it ten times a second, in an emulated guest whose one CPU the workload
# needs.
cpu_ticks() {
	local stat fields
	read -r stat 2>/dev/null <"/proc/$1/stat" || { echo 0; return; }
	read -ra fields <<<"${stat##*) }"
	echo $((fields[11] + fields[12]))
}

# record_for_cpu [--samples N] [--cgroup PATH] SECONDS PIDS ARGS...: `ember
# record -p PIDS ARGS` (PIDS comma-separated; with --cgroup, `ember record
# --cgroup PATH ARGS` watching PIDS), stopped by SIGINT once each process has
# used SECONDS of CPU time since ember began to sample (after any JVM's
# attach) and, with --samples, ember has counted N samples; or after 30
# times SECONDS. A fixed -d gave a workload starved by a busy host (the
# kernel matrix's emulators, an emulated guest's host) a tenth of the
# samples, and sample counts' checks failed by chance. --samples: an
# emulated CPU's sampling interrupts come late, and fewer the busier its
# host (a JVM's 2 s of CPU at 999 Hz gave 1,666 samples in the arm64 guest
# on a quiet host, 434 in CI beside the host's tests).
record_for_cpu() {
	local samples=0 counted=0 seconds pids target=() hz rec p i enough line progress fd start=()
	[[ $1 == --samples ]] && { samples=$2; shift 2; }
	[[ $1 == --cgroup ]] && { target=(--cgroup "$2"); shift 2; }
	seconds=$1 pids=$2
	shift 2
	((${#target[@]})) || target=(-p "$pids")
	hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
	progress=$TMP/record_for_cpu.progress
	"$EMBER" record "${target[@]}" --progress-fd 3 "$@" 3>"$progress" &
	rec=$!
	wait_sampling "$rec" "$progress"
	exec {fd}<"$progress"
	for p in ${pids//,/ }; do start+=("$(cpu_ticks "$p")"); done
	for _ in $(seq $((seconds * 300))); do  # tenths of a second
		enough=1 i=0
		for p in ${pids//,/ }; do
			(($(cpu_ticks "$p") - start[i] >= seconds * hz)) || enough=0
			i=$((i + 1))
		done
		# The lines written since the last turn (a line half written is
		# lost: the next one counts).
		while read -r -u "$fd" line; do
			[[ $line =~ \"samples\":([0-9]+) ]] && counted=${BASH_REMATCH[1]}
		done
		((counted >= samples)) || enough=0
		((enough)) && break
		kill -0 "$rec" 2>/dev/null || break
		sleep 0.1
	done
	exec {fd}<&-
	kill -INT "$rec" 2>/dev/null
	wait "$rec"
}

# Waits until a JVM started with -XX:+PrintCompilation, its standard output
# in LOG, has compiled each METHOD: Class::method by C2, or Class::method@
# (its loop, on-stack replacement) at any tier. How long that takes after
# start-up depends on how busy the machine is, and on emulation (the
# kernel matrix) tenfold. (JDK 25 prints no leading spaces before the time
# stamp.)
wait_compiled() {
	local log=$1 m re missing tries=600
	[[ ${EMBER_EMULATED:-} ]] && tries=6000
	shift
	for _ in $(seq "$tries"); do
		missing=""
		for m in "$@"; do
			case $m in
			*@) re="^ *[0-9]+ +[0-9]+ +%[sbn! ]*[1-4] +${m%@} @" ;;
			*) re="^ *[0-9]+ +[0-9]+ +[sbn! ]*4 +$m \\(" ;;
			esac
			grep -E "$re" "$log" 2>/dev/null | grep -vq 'made not entrant' || missing+=" $m"
		done
		[ -z "$missing" ] && return
		sleep 0.1
	done
	fail "the JVM has not compiled$missing after $((tries / 10)) s ($log)"
}

# Sum of the counts of folded lines matching an extended regex.
weight() { grep -E -- "$2" "$1" | awk '{ s += $NF } END { printf "%.0f\n", s }'; }
total() { awk '{ s += $NF } END { printf "%.0f\n", s }' "$1"; }

# blocked_within NS OFF RUNNABLE PCT: a profiler's blocked time NS agrees
# with a workload's measure of its waits (tests/workloads/elapsed.h's
# wait_clock): OFF ns off CPU, RUNNABLE ns of it waiting for a CPU (a
# wakeup's wait is part of a block, a preemption's is not), within PCT%.
blocked_within() {
	awk -v v="$1" -v off="$2" -v r="$3" -v p="$4" 'BEGIN { exit !(v >= (off - r) * (1 - p / 100) && v <= off * (1 + p / 100)) }'
}
# leak_suspects REPORT: the sites an `ember report` of a --live recording
# lists as leak suspects, fastest first, one a line (its columns: kept/min,
# live and old, each a number and a unit, then fit and samples).
leak_suspects() {
	awk 'on && NF >= 9 { s = $9; for (i = 10; i <= NF; i++) s = s " " $i; print s } /kept\/min +live/ { on = 1 }' "$1"
}
assert_contains() { grep -qE -- "$2" "$1" || fail "${3:-$1 has no line matching /$2/}"; }
assert_absent() { ! grep -qE -- "$2" "$1" || fail "${3:-$1 has a line matching /$2/}"; }

# ember's BPF objects, for tests that kill it: bpf_mark_before (before any
# ember runs), bpf_learn_ember_maps (while one runs with all its maps),
# then assert_no_bpf_left. Lines "prog ID NAME", "link ID prog ID",
# "map ID NAME" (this bpftool has no pid iterator to name owners).
bpf_objects() {
	bpftool -j prog show | jq -r '.[] | "prog \(.id) \(.name // "")"'
	bpftool -j link show | jq -r '.[] | "link \(.id) prog \(.prog_id)"'
	bpftool -j map show | jq -r '.[] | "map \(.id) \(.name // "")"'
}
bpf_mark_before() {
	command -v bpftool >/dev/null || skip "no bpftool (scripts/deps.sh build installs it)"
	command -v jq >/dev/null || skip "no jq (scripts/deps.sh test installs it)"
	bpf_objects >"$TMP/bpf.before"
	: >"$TMP/bpf.names"
}
bpf_learn_ember_maps() {
	bpf_objects | awk '$1 == "map" && $3 != ""' | grep -vxFf "$TMP/bpf.before" | awk '{ print $3 }' | sort -u >"$TMP/bpf.names"
	[ -s "$TMP/bpf.names" ] || fail "no new BPF map while ember runs"
	[ -n "$(ember_bpf_objects)" ] || fail "ember's BPF objects are not seen while it runs: $(bpf_objects | tail -5)"
}
# ember's, made since bpf_mark_before (an ember running before the test is
# not the test's): programs named ember_*, links running them, and maps
# bearing a name ember's maps bear.
ember_bpf_objects() {
	bpf_objects | awk -v before="$TMP/bpf.before" -v names="$TMP/bpf.names" '
		FILENAME == before { old[$1 " " $2] = 1; next }
		FILENAME == names { ours[$1] = 1; next }
		old[$1 " " $2] { next }
		$1 == "prog" && $3 ~ /^ember_/ { prog[$2] = 1; print; next }
		$1 == "link" && prog[$4] { print; next }
		$1 == "map" && ours[$3] { print }
	' "$TMP/bpf.before" "$TMP/bpf.names" -
}
# assert_no_bpf_left WHEN: none within 10 s (the kernel frees a program once
# its last file is closed, a map after an RCU grace period).
assert_no_bpf_left() {
	for _ in $(seq 100); do
		[ -z "$(ember_bpf_objects)" ] && return
		sleep 0.1
	done
	fail "$1: BPF objects of ember's left after 10 s: $(ember_bpf_objects | head -5)"
}
