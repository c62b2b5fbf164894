#!/usr/bin/env bash
# No function a reader must scroll: every function of the C and C++
# sources defined at a file's top level (or two spaces into a class) is
# under 150 lines, unless the comment just above it says why it is not,
# after "Long:" (one case per instruction of a table, say).
. "$(dirname "$0")/../lib.sh"
cd "$ROOT" || fail "no $ROOT"
LIMIT=150

# Prints "LINES FILE:LINE" for each function of LIMIT lines or more
# whose comment gives no reason, then how many functions it measured. A definition starts at an unindented
# line (not namespace, struct, class...) and ends at the first "}" alone
# on a line; a member function, two spaces in, at "  }".
long=$(find agent flamegraph symbolizer unwind user -name '*.cpp' -o -name '*.h' | sort | xargs awk -v limit=$LIMIT '
FNR == 1 { start = 0; inbody = 0; said = 0; member = 0 }
/^\/\// { if (/Long:/) said = 1; next }
/^[A-Za-z_].*\}$/ { start = 0; inbody = 0; said = 0; next }
/^[A-Za-z_]/ && !/^(namespace|struct|class|enum|union|using|typedef|extern|static_assert|template)[ <{(]/ && !inbody {
  start = FNR; reason = said; said = 0
}
/^  \/\// { if (/Long:/) said = 1 }
/^  [A-Za-z_~][^=]*\)( const)?( override)?( noexcept)? \{$/ && !/^  (if|for|while|switch|else|do|try|catch|return)[ ({]/ {
  member = FNR; member_reason = said; said = 0
}
/^  }$/ && member { measured++; if (FNR - member + 1 >= limit && !member_reason) print FNR - member + 1, FILENAME ":" member; member = 0 }
start && /\{$/ { inbody = 1 }
/^}$/ && start && inbody { measured++; if (FNR - start + 1 >= limit && !reason) print FNR - start + 1, FILENAME ":" start; start = 0; inbody = 0 }
/;$/ && start && !inbody { start = 0 }
!/^ *\/\// && !/^[A-Za-z_]/ { said = 0 }
END { print "measured", measured + 0 }
')
measured=$(sed -n 's/^measured //p' <<<"$long")
long=$(grep -v '^measured ' <<<"$long")
# The scan must see the functions it checks (about 1,200).
((measured > 1000)) || fail "only $measured functions measured: the scan found too little"
[ -z "$long" ] || fail "functions of $LIMIT lines or more (split them, or say why above them after 'Long:'):
$long"
echo "$measured functions, each under $LIMIT lines but those that say why"
