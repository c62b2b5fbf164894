# Helpers for the symbolizer tests that hold ember's names against other
# symbolizers' (sourced after tests/lib.sh). Every tool's answers become
# "frames" files: one line per address, frames innermost first,
# tab-separated, "??" when the tool could not name the address.
ORACLES=$ROOT/tests/oracle
BCC_SYMBOLIZE=$ROOT/build/oracle/bcc_symbolize

# ember symbolize output -> frames.
ember_frames() { cut -f2- | sed -e 's/ \[inlined\]\t/\t/g; s/ \[inlined\]$//; s/^?? .*/??/'; }

# bcc_symbolize output -> frames (one: BCC has no inlined frames). BCC
# leaves versioned names ("_ZNSs4_Rep...Em@@GLIBCXX_3.4.5", in .symtab of
# libraries built with .symver) mangled: c++filt demangles them.
bcc_frames() { awk -F'\t' '{ print $2 }' | c++filt; }

# eu-addr2line -a -f -i output -> frames. Per address: the address line, then
# a name line and a file:line line per frame; the innermost name says
# " inlined at FILE:LINE:COL in FUNCTION" when it was inlined (kept: see
# compare.awk).
eu_frames() {
	awk '/^0x[0-9a-f]+$/ { if (n) print line; line = ""; n = 1; k = 0; next }
		{ if (k++ % 2) next; line = line (line == "" ? "" : "\t") $0 }
		END { if (n) print line }'
}

# The function symbols of ELF files (.symtab and .dynsym), for aliases:
# "FILE:ADDRESS<TAB>demangled name".
alias_table() {
	local f
	for f in "$@"; do
		{ nm -C --defined-only "$f"; nm -D -C --defined-only "$f"; } 2>/dev/null | sort -u |
			awk -v f="$(basename "$f")" '$2 ~ /^[TtWwi]$/ { name = $0; sub(/^[^ ]+ [^ ]+ /, "", name); print f ":" $1 "\t" name }'
	done
}

# agreement WHO MODE ALIASES LABELS EMBER OTHER [CAP]: prints the
# disagreements and "WHO: n of m agree (p%)"; sets AGREE and TOTAL.
agreement() {
	local out
	out=$(awk -v who="$1" -v mode="$2" -v cap="${7:-}" -f "$ORACLES/compare.awk" "$3" "$4" "$5" "$6")
	grep -v '^AGREE ' <<<"$out"
	read -r _ AGREE _ TOTAL <<<"$(grep '^AGREE ' <<<"$out")"
	awk -v w="$1" -v m="$2" -v a="$AGREE" -v t="$TOTAL" \
		'BEGIN { printf "%s (%s): %d of %d agree (%.2f%%)\n", w, m == "chain" ? "inlined frames and function" : "function", a, t, t ? 100 * a / t : 0 }'
}

# The executable PT_LOAD segments of an ELF: "offset vaddr filesz" (hex).
exec_segments() { readelf -lW "$1" | awk '$1 == "LOAD" && / E +0x[0-9a-f]+$/ { print $2, $3, $5 }'; }

# live_addresses PID PATH ELF: reads "VADDR REST" lines (VADDR hex, as in
# ELF's symbol table, ELF laid out as the file PID maps at PATH) and prints
# "ADDRESS REST" for every executable mapping of PATH in PID that holds it:
# a library mapped twice gives two lines. Computed from the segments and
# /proc/PID/maps alone, independently of ember.
live_addresses() {
	local pid=$1 path=$2 elf=$3 v rest off i j
	local -a so=() sv=() ss=() ms=() me=() mo=()
	while read -r i j v; do so+=($((i))) sv+=($((j))) ss+=($((v))); done < <(exec_segments "$elf")
	while read -r i j v; do ms+=($((i))) me+=($((j))) mo+=($((v))); done < <(awk -v p="$path" '$2 ~ /x/ {
		f = $0; for (i = 0; i < 5; i++) sub(/^[^ ]+ +/, "", f)
		if (f == p) { split($1, r, "-"); print "0x" r[1], "0x" r[2], "0x" $3 } }' /proc/"$pid"/maps)
	while read -r v rest; do
		for i in "${!so[@]}"; do
			(( 16#$v >= sv[i] && 16#$v < sv[i] + ss[i] )) || continue
			off=$(( 16#$v - sv[i] + so[i] ))
			for j in "${!ms[@]}"; do
				(( off >= mo[j] && off < mo[j] + me[j] - ms[j] )) && printf '%x %s\n' $(( ms[j] + off - mo[j] )) "$rest"
			done
		done
	done
}
