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
ranks="agent=0 flamegraph=10 unwind=10 user/net=10 user/heap=15 symbolizer=20 bpf=30 user/host=30
user/runtimes=35 user/java=35 user/events=40 user/session=50 user/fleet=55 user/cli=60 user/serve=60"

# One awk over every quoted include (a process per include took 20 s
# here): "checked N", then each include that runs up, or an error.
out=$(grep -nE '^#include "' --include='*.h' --include='*.c' --include='*.cpp' -r agent bpf flamegraph symbolizer unwind user |
	awk -v ranks="$ranks" '
	BEGIN { n = split(ranks, pairs, /[ \n]+/); for (i = 1; i <= n; i++) { split(pairs[i], kv, "="); rank[kv[1]] = kv[2] } }
	# A path'"'"'s folder: user/X for user/X/..., else its first part.
	function folder(path, parts) { split(path, parts, "/"); return parts[1] == "user" ? "user/" parts[2] : parts[1] }
	{
		file = $0; sub(/:.*/, "", file)
		target = $0; sub(/^[^"]*"/, "", target); sub(/".*/, "", target)
		if (target !~ /\//) next  # a header beside the file
		from = folder(file); to = folder(target)
		if (from == to) next
		checked++
		if (!(from in rank)) { print "error " file ": folder " from " has no layer in this script (docs/architecture.md'"'"'s table)"; next }
		if (!(to in rank)) { print "error " file " includes " target ": folder " to " has no layer in this script"; next }
		if (rank[to] < rank[from]) next
		# The one main dispatches to every command.
		if (file == "user/cli/main.cpp" && rank[to] == rank[from]) next
		print "up " file " " target
	}
	END { print "checked " checked + 0 }')
errors=$(sed -n 's/^error //p' <<<"$out")
[ -z "$errors" ] || fail "$errors"
checked=$(sed -n 's/^checked //p' <<<"$out")
found=$(sed -n 's/^up //p' <<<"$out" | sort)
((checked > 100)) || fail "only $checked includes across folders: the scan found too little"
echo "$checked includes across folders"
[ -z "$found" ] || fail "includes that run up a layer or into a sibling command (docs/architecture.md):"$'\n'"$found"
true
