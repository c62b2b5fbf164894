# Shared helpers for tests/integration/*.sh. A test exits 0 (pass), 77 (skip,
# with the reason on stdout) or anything else (fail, with the reason).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
EMBER=$ROOT/build/ember
WORKLOADS=$ROOT/build/workloads
TMP=$(mktemp -d /tmp/ember-test.XXXXXX)
BACKGROUND=()
cleanup() {
	for p in "${BACKGROUND[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# Recording needs root (CAP_BPF + CAP_PERFMON) and BTF.
need_bpf() {
	[ "$(id -u)" = 0 ] || skip "needs root to load BPF programs"
	[ -e /sys/kernel/btf/vmlinux ] || skip "kernel has no BTF (/sys/kernel/btf/vmlinux)"
}

# Starts a command in the background, killed when the test ends.
background() {
	"$@" &
	BACKGROUND+=($!)
}

# Sum of the counts of folded lines matching an extended regex.
weight() { grep -E -- "$2" "$1" | awk '{ s += $NF } END { printf "%.0f\n", s }'; }
total() { awk '{ s += $NF } END { printf "%.0f\n", s }' "$1"; }

assert_contains() { grep -qE -- "$2" "$1" || fail "${3:-$1 has no line matching /$2/}"; }
assert_absent() { ! grep -qE -- "$2" "$1" || fail "${3:-$1 has a line matching /$2/}"; }
