#!/usr/bin/env bash
# The layers of docs/architecture.md, checked on every quoted #include of
# the C and C++ sources: a folder includes its own headers and those of
# lower layers, never a higher one's, nor a sibling command's.
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || fail "no $ROOT"

# Rank of each folder, lowest first: the layers of docs/architecture.md,
# and within one the folders that stand on another (user/heap on
# flamegraph, user/runtimes on bpf's layouts, user/events below the
# session that runs them, the fleet below serve and the CLI, which read
# its spool). agent/protocol.h is the agent's wire format, below
# everything that reads it.
rank() {
	case $1 in
	agent) echo 0 ;;
	flamegraph | unwind | user/net) echo 10 ;;
	user/heap) echo 15 ;;
	symbolizer) echo 20 ;;
	bpf | user/host) echo 30 ;;
	user/runtimes | user/java) echo 35 ;;
	user/events) echo 40 ;;
	user/session) echo 50 ;;
	user/fleet) echo 55 ;;
	user/cli | user/serve) echo 60 ;;
	*) echo "" ;;
	esac
}
folder() { [[ $1 == user/* ]] && echo "${1%%/*}/$(cut -d/ -f2 <<<"$1")" || echo "${1%%/*}"; }

found=""
checked=0
while IFS=: read -r file _ line; do
	target=$(sed -nE 's/^#include "([^"]+)".*/\1/p' <<<"$line")
	[[ $target == */* ]] || continue # a header beside the file
	from=$(folder "$file") to=$(folder "$target")
	[ "$from" = "$to" ] && continue
	checked=$((checked + 1))
	from_rank=$(rank "$from") to_rank=$(rank "$to")
	[ -n "$from_rank" ] || fail "$file: folder $from has no layer in this script (docs/architecture.md's table)"
	[ -n "$to_rank" ] || fail "$file includes $target: folder $to has no layer in this script"
	((to_rank < from_rank)) && continue
	# The one main dispatches to every command.
	[ "$file" = user/cli/main.cpp ] && ((to_rank == from_rank)) && continue
	found+="$file $target"$'\n'
done < <(grep -nE '^#include "' --include='*.h' --include='*.c' --include='*.cpp' -r agent bpf flamegraph symbolizer unwind user)

((checked > 100)) || fail "only $checked includes across folders: the scan found too little"
echo "$checked includes across folders"
[ -z "$found" ] || fail "includes that run up a layer or into a sibling command (docs/architecture.md):"$'\n'"$(sort <<<"$found")"
true
