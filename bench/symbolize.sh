#!/usr/bin/env bash
# Symbolizing in batch: the same addresses (SYMBOLIZE_ADDRESSES, 100,000,
# a third each in libjvm.so, libc and a large C++ binary with DWARF) named
# by ember and by its peers, each given one file's addresses on stdin:
#   eu-addr2line -a -e F -f -i -C     (elfutils)
#   addr2line -a -e F -f -i -C        (binutils)
#   llvm-symbolizer --obj=F           (inlines on by default)
#   ember symbolize --elf F --lines   (inlines on by default)
# (-a only marks where each address's answer starts, for counting.) Every
# peer prints file:line, so ember does too. Prints wall times per tool:
#   cold: the page cache dropped before each run (needs root);
#   warm: page cache warm, best of REPS runs. A run 10x slower than the
#     best so far on that file cannot be the fastest and is not repeated
#     (eu-addr2line takes ~30 s for 33,000 libjvm.so addresses).
# and how many addresses each tool named (not "??") and how many frames
# (inlined calls count), so a tool that names less cannot win by it.
# Then ember in one process (build/bench/symbolize_bench, the library
# itself): the first pass, and the same batch again with its caches warm,
# which is what a long-running ember does with recurring addresses.
# Ratios are fastest peer / ember: cold against the ember CLI; warm against
# the in-process second pass, with the CLI and the first pass alongside.
# Last, ember's peak RSS naming all three files in one process, inlines
# and lines on (getrusage), next to the peers' (GNU time, per file).
#
# Environment: REPS (2), SYMBOLIZE_ADDRESSES (100000), SEED (1);
# JVM_ELF, LIBC_ELF, CXX_ELF: the three binaries. CXX_ELF defaults to the
# libstdc++ of libstdc++6-12-dbg, a -O0 build that carries its DWARF (the
# package has no debug file for the -O2 libstdc++.so.6, so few inlines);
# any binary with DWARF will do, e.g. CXX_ELF=build/ember (-O2, ~3.5
# frames per address).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
EMBER=build/ember
BENCH=build/bench/symbolize_bench
N=${SYMBOLIZE_ADDRESSES:-100000}
SEED=${SEED:-1}
JVM_ELF=${JVM_ELF:-/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so}
LIBC_ELF=${LIBC_ELF:-/lib/x86_64-linux-gnu/libc.so.6}
CXX_ELF=${CXX_ELF:-/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30}
for f in "$EMBER" "$BENCH"; do
	[ -x "$f" ] || { echo "bench: no $f: run make $f" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "bench: no /usr/bin/time (GNU time): run make deps-bench" >&2; exit 1; }
T=$(mktemp -d /tmp/ember-sbench.XXXXXX)
trap 'rm -rf "$T"' EXIT

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now_ns() { date +%s%N; }
build_id() { readelf -n "$1" 2>/dev/null | awk '/Build ID:/ && !id { id = $3 } END { print id }'; }
sized_functions() { nm -S --defined-only "$1" 2>/dev/null | awk 'NF == 4 && $3 ~ /^[tTwWi]$/ { n++ } END { print n + 0 }'; }

# Where each binary's function symbols are: itself, or (stripped) its
# debug file under /usr/lib/debug/.build-id.
files=("$JVM_ELF" "$LIBC_ELF" "$CXX_ELF")
roles=(JVM: libc: C++:)
names=() symsrc=()
for f in "${files[@]}"; do
	[ -f "$f" ] || { echo "bench: no $f (set JVM_ELF, LIBC_ELF or CXX_ELF)" >&2; exit 1; }
	src=$f
	if [ "$(sized_functions "$f")" = 0 ]; then
		id=$(build_id "$f")
		src=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
		if [ -z "$id" ] || [ ! -f "$src" ]; then
			echo "bench: $f has no symbol table and no debug file by build-id" >&2
			exit 1
		fi
	fi
	names+=("$(basename "$f")") symsrc+=("$src")
done

# The addresses: a third per file (libjvm.so takes the remainder), fixed seed.
echo "bench: $(nproc) CPUs (load average $(cut -d" " -f1-3 /proc/loadavg)), $N addresses (seed $SEED), warm runs best of $REPS, $(uname -r)"
for i in 0 1 2; do
	n=$((N / 3)); [ "$i" = 0 ] && n=$((N - 2 * (N / 3)))
	nm -S --defined-only "${symsrc[$i]}" | "$BENCH" gen $((SEED + i)) "$n" >"$T/addr$i" 2>"$T/gen$i" ||
		{ cat "$T/gen$i" >&2; exit 1; }
	how="its own symbol table"
	[ "${symsrc[$i]}" != "${files[$i]}" ] && how="symbols of its debug file ${symsrc[$i]}"
	pkg=$({ dpkg -S "${files[$i]}" || dpkg -S "$(realpath "${files[$i]}")"; } 2>/dev/null | cut -d: -f1 || true)
	dwarf=no
	readelf -S -W "${files[$i]}" "${symsrc[$i]}" 2>/dev/null | awk '/\.debug_info/ { d = 1 } END { exit !d }' && dwarf=yes
	printf '  %-5s %-20s %6d addresses in %s (%s): %s, DWARF %s, package %s\n' "${roles[$i]}" "${names[$i]}" "$n" \
		"$(cat "$T/gen$i")" "${files[$i]}" "$how" "$dwarf" "${pkg:-?}"
done
version() { "$@" 2>&1 | awk '/[0-9]+\.[0-9]+/ && !v { v = $NF } END { print v }'; }

# The tools, in the order they run (fastest expected first, for the 10x rule).
peers=()
for p in llvm-symbolizer addr2line eu-addr2line; do
	if command -v "$p" >/dev/null; then peers+=("$p"); else echo "bench: $p not installed: skipped"; fi
done
tools=(ember "${peers[@]}")
echo "  tools: ember (CLI, --lines)$(for p in "${peers[@]}"; do printf ', %s %s' "$p" "$(version "$p" --version)"; done)"

# run TOOL FILE ADDRESSES OUT -> wall ms; peak RSS (KB) in OUT.rss
run() {
	local tool=$1 elf=$2 in=$3 out=$4 cmd start
	case $tool in
	ember) cmd=("$EMBER" symbolize --elf "$elf" --lines) ;;
	llvm-symbolizer) cmd=(llvm-symbolizer --obj="$elf") ;;
	addr2line) cmd=(addr2line -a -e "$elf" -f -i -C) ;;
	eu-addr2line) cmd=(eu-addr2line -a -e "$elf" -f -i -C) ;;
	esac
	start=$(now_ns)
	/usr/bin/time -f %M -o "$out.rss" "${cmd[@]}" <"$in" >"$out" 2>"$out.err"
	echo $((($(now_ns) - start) / 1000000))
}

# count TOOL OUT -> "answers named frames"
count() {
	case $1 in
	ember) awk -F'\t' '{ n++ } $2 !~ /^\?\?/ { k++; f += NF - 1 } END { print n + 0, k + 0, f + 0 }' "$2" ;;
	# blocks of (function, file:line) pairs, a blank line after each
	llvm-symbolizer) awk 'BEGIN { RS = ""; FS = "\n" } { n++ } $1 != "??" { k++; for (i = 1; i <= NF; i += 2) f += $i != "??" }
		END { print n + 0, k + 0, f + 0 }' "$2" ;;
	# the address, then (function, file:line) pairs
	*) awk '/^0x[0-9a-f]+$/ { n++; line = 0; next } { line++ } line == 1 && $0 != "??" { k++ }
		line % 2 == 1 && $0 != "??" { f++ } END { print n + 0, k + 0, f + 0 }' "$2" ;;
	esac
}

declare -A cold warm named frames rss best
for tool in "${tools[@]}"; do
	for i in 0 1 2; do
		out=$T/$tool.$i
		drop_caches
		cold[$tool.$i]=$(run "$tool" "${files[$i]}" "$T/addr$i" "$out")
		w=
		for ((rep = 0; rep < REPS; rep++)); do
			ms=$(run "$tool" "${files[$i]}" "$T/addr$i" "$out")
			[ -z "$w" ] || [ "$ms" -lt "$w" ] && w=$ms
			[ -n "${best[$i]:-}" ] && [ "$ms" -gt $((10 * best[$i])) ] && break
		done
		warm[$tool.$i]=$w
		[ -z "${best[$i]:-}" ] || [ "$w" -lt "${best[$i]}" ] && best[$i]=$w
		read -r answers k fr < <(count "$tool" "$out")
		[ "$answers" = "$(wc -l <"$T/addr$i")" ] || echo "bench: $tool gave $answers answers for $(wc -l <"$T/addr$i") addresses of ${names[$i]}"
		named[$tool]=$((${named[$tool]:-0} + k)) frames[$tool]=$((${frames[$tool]:-0} + fr))
		kb=$(tail -1 "$out.rss")
		[ "$kb" -gt "${rss[$tool]:-0}" ] && rss[$tool]=$kb
	done
done

# table WHAT ARRAY-NAME: one row per tool, ms per file and in total
table() {
	local -n t=$2
	printf '\n%s, ms:\n%-16s %14s %14s %14s %9s %8s %8s\n' "$1" tool "${names[0]:0:14}" "${names[1]:0:14}" "${names[2]:0:14}" \
		total named frames
	for tool in "${tools[@]}"; do
		printf '%-16s %14d %14d %14d %9d %8d %8d\n' "$tool" "${t[$tool.0]}" "${t[$tool.1]}" "${t[$tool.2]}" \
			$((t[$tool.0] + t[$tool.1] + t[$tool.2])) "${named[$tool]}" "${frames[$tool]}"
	done
}
table "cold (page cache dropped before each run)" cold
table "warm (page cache warm, best of $REPS)" warm
cat "$T"/ember.?.err >&2

# The fastest peer by total, cold and warm, among those that named at
# least 99% as many addresses as ember.
fastest() {
	local -n t=$1
	local p best_p='' best_ms=''
	for p in "${peers[@]}"; do
		((100 * named[$p] >= 99 * named[ember])) || continue
		ms=$((t[$p.0] + t[$p.1] + t[$p.2]))
		[ -z "$best_ms" ] || [ "$ms" -lt "$best_ms" ] && best_p=$p best_ms=$ms
	done
	echo "$best_p $best_ms"
}
for p in "${peers[@]}"; do
	((100 * named[$p] >= 99 * named[ember])) || echo "bench: $p named under 99% of what ember named: not a contender"
done
read -r cold_peer cold_peer_ms < <(fastest cold)
read -r warm_peer warm_peer_ms < <(fastest warm)
cold_cli=$((${cold[ember.0]} + ${cold[ember.1]} + ${cold[ember.2]}))
warm_cli=$((${warm[ember.0]} + ${warm[ember.1]} + ${warm[ember.2]}))

# ember in one process: all three files, first pass then second pass.
# inproc OPTIONS... -> the total line's fields, then rss_kb
inproc() {
	"$BENCH" run "$@" "${files[0]}" "$T/addr0" "${files[1]}" "$T/addr1" "${files[2]}" "$T/addr2" >"$T/inproc" 2>"$T/inproc.err"
	grep -q . "$T/inproc.err" && sed 's/^/  /' "$T/inproc.err" >&2
	awk '$1 == "total" { t = $0 } $1 == "rss_kb" { r = $2 } END { print t, "rss_kb", r }' "$T/inproc"
}
field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' <<<"$2"; }
drop_caches
first_cold=$(inproc --lines)
p1='' p2='' rss_in=0 differ=0
for ((r = 0; r < REPS; r++)); do
	line=$(inproc --lines)
	a=$(field pass1_ms "$line") b=$(field pass2_ms "$line")
	[ -z "$p1" ] || awk -v a="$a" -v b="$p1" 'BEGIN { exit !(a < b) }' && p1=$a
	[ -z "$p2" ] || awk -v a="$b" -v b="$p2" 'BEGIN { exit !(a < b) }' && p2=$b
	[ "$(field rss_kb "$line")" -gt "$rss_in" ] && rss_in=$(field rss_kb "$line")
	differ=$((differ + $(field differ "$line")))
done
per_file=$(awk '$1 == "file" { n = split($2, p, "/"); printf "%s%s %s/%s ms", sep, p[n], $10, $12; sep = ", " }' "$T/inproc")
names_only=$(inproc)

echo
echo "ember in one process ($BENCH, --lines, inlines on):"
printf '  %-48s %10.2f ms\n' "first pass, page cache cold" "$(field pass1_ms "$first_cold")" \
	"first pass, page cache warm (best of $REPS)" "$p1" \
	"second pass, ember's caches warm (best of $REPS)" "$p2"
echo "  per file, first/second pass (last run): $per_file"
echo "  named $(field named "$first_cold") of $N, $(field frames "$first_cold") frames; answers that differ between passes: $differ"
printf '  %-48s %10.2f ms, second pass %.2f ms\n' "names only (no --lines), first pass" \
	"$(field pass1_ms "$names_only")" "$(field pass2_ms "$names_only")"

echo
echo "ratios, fastest peer / ember (target: at least 5x warm):"
[ -n "$warm_peer" ] || { echo "  no peer to compare with"; cold_peer_ms=0 warm_peer_ms=0; }
awk -v p="$cold_peer" -v pm="$cold_peer_ms" -v e="$cold_cli" 'BEGIN {
	printf "  cold: %s %d ms / ember CLI %d ms = %.2fx\n", p, pm, e, pm / (e > 0 ? e : 1) }'
awk -v p="$warm_peer" -v pm="$warm_peer_ms" -v e2="$p2" -v e1="$p1" -v c="$warm_cli" 'BEGIN {
	printf "  warm: %s %d ms / ember second pass %.2f ms = %.1fx", p, pm, e2, pm / (e2 > 0 ? e2 : 0.01)
	printf " (first pass %.1f ms: %.2fx; CLI %d ms: %.2fx)\n", e1, pm / e1, c, pm / (c > 0 ? c : 1) }'

echo
echo "peak RSS (inlines on):"
echo "  ember, all three files in one process, --lines: $((rss_in / 1024)) MB (target: < 300 MB)"
for tool in "${tools[@]}"; do
	printf '  %-16s one file per run, largest: %d MB\n' "$tool" $((rss[$tool] / 1024))
done
