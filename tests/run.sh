#!/usr/bin/env bash
# Runs every test tier and ends with the line "N passed, N failed, N skipped".
#   unit:        build/unit-tests (Catch2, no root, under ASan + UBSan)
#   integration: tests/integration/*.sh (exit 0 pass, 77 skip, else fail)
# Usage: tests/run.sh [NAME_FILTER]
set -u
cd "$(dirname "$0")/.."
filter=${1:-}
passed=0 failed=0 skipped=0 failures=()

echo "== unit tests (ASan + UBSan)"
unit_log=$(mktemp)
build/unit-tests >"$unit_log" 2>&1
unit_rc=$?
tail -n 3 "$unit_log"
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

echo "== integration tests"
for t in tests/integration/*.sh; do
	name=$(basename "$t" .sh)
	[[ -n $filter && $name != *$filter* ]] && continue
	start=$(date +%s)
	out=$(timeout 300 "$t" 2>&1)
	rc=$?
	secs=$(( $(date +%s) - start ))
	case $rc in
	0) passed=$((passed + 1)); echo "ok      $name (${secs}s)" ;;
	77) skipped=$((skipped + 1)); echo "skipped $name: $(tail -n 1 <<<"$out")" ;;
	*) failed=$((failed + 1)); failures+=("$name"); echo "FAILED  $name (exit $rc, ${secs}s)"; sed 's/^/    /' <<<"$out" ;;
	esac
done

(( failed )) && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
(( failed == 0 ))
