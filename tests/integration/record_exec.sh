#!/usr/bin/env bash
# A command that execs mid-recording, as launchers do (a pyenv shim is bash
# exec'ing bash scripts, then the real python, all in one pid): six bash
# programs in a chain of execs, then a native binary built without frame
# pointers (unwind_mix-nofp). Each program's samples are named as its own, and
# the last one's stacks are whole, unwound with its own tables, not with
# the ones of the bash it replaced.
. "$(dirname "$0")/../lib.sh"
need_bpf
# Each bash busy for 0.4 s, then exec'ing the next: six execs, more than
# the collector's burst of map reads.
cat >"$TMP/chain.sh" <<EOF
end=\$((\${EPOCHREALTIME/./} + 400000))
while ((\${EPOCHREALTIME/./} < end)); do :; done
((\$1 > 0)) && exec bash "$TMP/chain.sh" \$((\$1 - 1))
exec "$WORKLOADS/unwind_mix-nofp" 0.5
EOF
"$EMBER" record -F 999 --no-java -o "$TMP/out.folded" -- bash "$TMP/chain.sh" 5 >/dev/null 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
# Samples of the bash programs, and of unwind_mix's chain thread:
# chain_thread;chain_level1;...;chain_level4;chain_leaf_burn, whole when
# the walk reaches the thread's start.
bash_samples=$(weight "$TMP/out.folded" '^bash;')
leaf=$(weight "$TMP/out.folded" ';chain_leaf_burn( [0-9]+$|;)')
named=$(weight "$TMP/out.folded" ';chain_thread;chain_level1;chain_level2;chain_level3;chain_level4;chain_leaf_burn( [0-9]+$|;)')
whole=$(weight "$TMP/out.folded" ';(start_thread|clone3?);([^;]*;)?chain_thread;chain_level1;chain_level2;chain_level3;chain_level4;chain_leaf_burn( [0-9]+$|;)')
echo "bash: $bash_samples samples; unwind_mix's chain: $leaf samples, $named with the whole chain, $whole reaching the thread's start"
((bash_samples >= 300)) || fail "only $bash_samples samples of the bash programs (2.4 s at 999 Hz)"
((leaf >= 200)) || fail "only $leaf samples in chain_leaf_burn after the execs (0.5 s of CPU at 999 Hz)"
((named * 100 >= leaf * 95)) || fail "only $named of $leaf samples in chain_leaf_burn have the whole chain: $(grep chain_leaf_burn "$TMP/out.folded" | sort -t' ' -k2 -rn | head -3)"
((whole * 100 >= leaf * 95)) || fail "only $whole of $leaf stacks reach the thread's start: $(grep chain_leaf_burn "$TMP/out.folded" | sort -t' ' -k2 -rn | head -3)"
