# Helpers of the unwinding tests (tests/integration/unwind_*.sh), after
# lib.sh: perf as the independent reference, and stacks of ember and perf
# brought to one form to compare them.

# perf's DWARF unwinder (elfutils or libunwind, not ember's code) is the
# reference; it samples cpu-clock (no PMU in most VMs) with the user
# registers and stack (perf 6.1 cannot on an arm64 CPU with SVE: "PMU
# Hardware doesn't support sampling/overflow-interrupts"; the kernel
# matrix's arm64 guest has none).
need_perf() {
	local probe=(perf record -q -e cpu-clock --call-graph dwarf -o "$TMP/perf-probe.data" -- true)
	command -v perf >/dev/null || skip "perf is not installed (scripts/deps.sh test installs linux-perf)"
	"${probe[@]}" >/dev/null 2>&1 ||
		skip "perf cannot record cpu-clock with --call-graph dwarf here: $("${probe[@]}" 2>&1 | grep -v '^$' | head -1)"
}

# EMBER_UNWIND=MODE runs the tests with --unwind MODE (default: ember's default).
UNWIND_OPTS=(${EMBER_UNWIND:+--unwind "$EMBER_UNWIND"})

# PERF_RECORD: perf record's options for the reference. --no-bpf-event:
# BPF programs loaded meanwhile (ember's, other tools') add ksymbol records
# that perf script 6.1 failed to parse at times ("failed to process type:
# 17"), dropping every sample after them. -m 16M: a ring buffer of 16 MiB
# per CPU, as each sample copies KBs of stack and a busy machine drains it
# late.
PERF_RECORD=(perf record -q --no-bpf-event -m 16M -e cpu-clock -F 999)

# perf_folded DATA: perf's samples as folded stacks of user frames, root
# first, under a root frame of the process id: "PID;f1;..;leaf COUNT".
# --no-inline: physical frames only (canonical drops ember's inlined ones).
# perf script's complaints are in $TMP/perf-script.err.
perf_folded() {
	perf script --no-inline -i "$1" -F pid,ip,sym,dso 2>"$TMP/perf-script.err" | awk '
		function flush(  s, i) {
			if (pid != "") { s = pid; for (i = n; i >= 1; i--) s = s ";" f[i]; count[s]++ }
			pid = ""; n = 0
		}
		/^[ \t]*$/ { flush(); next }
		/^[ \t]*[0-9]+ *$/ { flush(); pid = $1; next }
		{
			line = $0; sub(/^[ \t]+[0-9a-f]+ /, "", line); dso = ""
			if (match(line, / \([^()]*\)$/)) { dso = substr(line, RSTART + 2, RLENGTH - 3); line = substr(line, 1, RSTART - 1) }
			if (dso ~ /^\[kernel/) next
			f[++n] = line
		}
		END { flush(); for (s in count) print s, count[s] }'
}

# canonical FOLDED: user stacks in one form for ember's and perf's, the
# root frame (process) removed, identical stacks merged:
# - kernel (_[k]) and inlined (_[i]) frames dropped (perf's --no-inline
#   lists physical frames only);
# - addresses and offsets removed (libgcc_s.so.1+0x165bb: libgcc_s.so.1),
#   and the -nofp / -fp of the workloads' file names, so builds compare;
# - symbol versions, __GI_ and leading underscores, C++ parameter lists
#   dropped: tools pick different aliases of one address (perf:
#   __GI___qsort_r, ember: qsort_r; __libc_start_main@@GLIBC_2.34).
# Stacks left with no user frame are dropped.
canonical() {
	awk '{
		count = $NF; sub(/ [0-9]+$/, "")
		n = split($0, f, ";"); s = ""
		for (i = 2; i <= n; i++) {
			x = f[i]
			if (x ~ /_\[[ki]\]$/) continue
			sub(/@.*/, "", x); sub(/\+0x[0-9a-f]+$/, "", x); gsub(/-(no)?fp/, "", x)
			sub(/^__GI_/, "", x); sub(/^_+/, "", x); sub(/\([^()]*\)( const)?$/, "", x)
			s = s (s == "" ? "" : ";") x
		}
		if (s != "") sum[s] += count
	} END { for (s in sum) printf "%s %.0f\n", s, sum[s] }' "$1"
}

# Outermost frames a complete user stack starts with (canonical names): the
# thread's entry (THREAD_ROOT: clone3, or on arm64 the label of clone3's
# child, thread_start; then start_thread), the program's (_start,
# __libc_start_main), or the dynamic loader's before it (_dl_start_user).
THREAD_ROOT='(clone3|thread_start);start_thread'
ROOTS='^(clone3?|thread_start|start_thread|start|libc_start_main[a-z_]*|dl_start_user|dl_start)(;| )'

# root_reach CANONICAL: "REACHED TOTAL" samples.
root_reach() {
	awk -v roots="$ROOTS" '{ t += $NF } $0 ~ roots { r += $NF } END { printf "%d %d\n", r, t }' "$1"
}

# Percentage with one decimal of A in B.
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b ? 100 * a / b : 0 }'; }
