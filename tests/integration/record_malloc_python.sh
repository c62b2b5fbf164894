#!/usr/bin/env bash
# -e malloc --live on Debian's python3, recorded while it runs (-p): CPython
# frees what it holds on its way out, so a recording that ends with the
# command's exit finds almost nothing live. tests/workloads/py_leak_age.py
# keeps 1000 young 16 KiB bytearrays in a cache and, for its first 3 s, leaks
# one every tenth turn from leak_here. Plain --live: the cache's 1000 blocks
# at the stop, exactly; --min-age 2s: none of them, and every leaked byte,
# as CPython asked malloc for it (the leak is 4 s old or more at the stop).
. "$(dirname "$0")/../lib.sh"
need_bpf
[ -x /usr/bin/python3 ] || fail "no /usr/bin/python3: scripts/deps.sh installs python3"
WORKLOAD=$ROOT/tests/workloads/py_leak_age.py
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
within() { awk -v v="$1" -v p="$2" -v e="$3" 'BEGIN { exit !(v >= e * (1 - p / 100) && v <= e * (1 + p / 100)) }'; }

# leaking LABEL RECORD_ARGS...: the workload leaking for 3 s of 7 once ember
# samples, ember stopped at its "done"; its line in $TMP/LABEL.out.
leaking() {
	local label=$1
	shift
	rm -f "$TMP/go"
	start_ready "$TMP/$label.out" /usr/bin/python3 "$WORKLOAD" "$TMP/go" 3 7 || fail "$label: the workload did not start"
	# --alloc-interval 1: every allocation is a sample of its own size.
	record_go_done "$label" "$TMP/$label.out" -p "$ready_pid" -e malloc --live --alloc-interval 1 "$@" \
		-o "$TMP/$label.folded"
	kill "$ready_pid"
}
# A bytearray's block, under the Python function that made it.
block_of() { printf '%s \\(py_leak_age\\.py\\);(.*;)?PyByteArray_Resize;' "$1"; }

leaking live
cache=$(weight "$TMP/live.folded" "$(block_of cache_fill)")
cache_truth=$((1000 * 16385))
echo "--live: cache_fill's bytearrays $(mib "$cache") MiB (the cache holds $(mib "$cache_truth"))"
# An emulated guest fills fewer in the cache's 1.5 s: there, some at least.
if [[ ${EMBER_EMULATED:-} ]]; then
	((cache >= 16385)) || fail "--live: none of the cache's bytearrays"
else
	within "$cache" 1 "$cache_truth" || fail "--live: cache_fill's bytearrays $cache bytes, not the cache's $cache_truth ±1%"
fi

leaking old --min-age 2s
leak_truth=$(awk '/^done/ { print $3 }' "$TMP/old.out")
leak=$(weight "$TMP/old.folded" "$(block_of leak_here)")
cache=$(weight "$TMP/old.folded" "$(block_of cache_fill)")
echo "--live --min-age 2s: leak_here $(mib "$leak") MiB (leaked: $(mib "$leak_truth") MiB), cache_fill's bytearrays $cache bytes"
((leak == leak_truth)) || fail "--min-age 2s: leak_here $leak bytes, the workload leaked $leak_truth"
((cache == 0)) || fail "--min-age 2s: $cache bytes of the cache's bytearrays, all younger than 1.5 s"
