# Compares ember's frames with another symbolizer's, address by address.
#   awk -v who=NAME -v mode=chain|outer [-v cap=N] -f compare.awk ALIASES LABELS EMBER OTHER
# ALIASES: "KEY<TAB>name" per function symbol, KEY = file and address of the
#   symbol: names with a KEY in common are aliases (one function).
# LABELS: one line per address, what to call it in a disagreement.
# EMBER, OTHER: one line per address, its frames innermost first,
#   tab-separated, "??" when unnamed (the *_frames helpers of oracles.sh).
# mode=outer compares the outermost frame (the function: all that BCC or a
# symbol table give); mode=chain also the inlined frames, one by one, and
# their number. An address either side leaves unnamed is a disagreement.
# Prints each disagreement (up to cap), then "AGREE n TOTAL m".
#
# Names are compared demangled, without parameter lists, cv/ref qualifiers
# or the return type a demangled template function carries, and without
# GCC's clone suffixes (.cold, .part.N, .isra.N, .constprop.N), since DWARF
# names a split-off part after its function while the symbol table names the
# part; without symbol versions (@GLIBC_2.2.5) and ABI tags ([abi:cxx11]).
# An unqualified name (DWARF's DW_AT_name of a function with internal
# linkage, which has no DW_AT_linkage_name) agrees with a qualified one that
# ends in it, template arguments aside (DWARF spells them its own way).
# Outermost frames also agree when they are aliases: symbols at one address.
BEGIN { FS = "\t"; if (cap == "") cap = 1000000 }

function strip_clones(s, old) {
	do {
		old = s
		if (match(s, / \[clone [^]]*\]$/)) s = substr(s, 1, RSTART - 1)
		if (match(s, /\.(cold|part\.[0-9]+|isra\.[0-9]+|constprop\.[0-9]+|lto_priv\.[0-9]+|localalias)$/))
			s = substr(s, 1, RSTART - 1)
	} while (s != old)
	return s
}

function strip_params(s, i, d, c) {
	while (match(s, / (const|volatile|&|&&|noexcept)$/)) s = substr(s, 1, RSTART - 1)
	if (substr(s, length(s), 1) != ")") return s
	d = 0
	for (i = length(s); i > 1; i--) {
		c = substr(s, i, 1)
		if (c == ")") d++
		else if (c == "(" && --d == 0) break
	}
	# "operator()" has no parameter list left to strip
	return i > 1 && substr(s, i - 8, 8) != "operator" ? substr(s, 1, i - 1) : s
}

# Position after the last top-level occurrence of `sep` (a space or "::").
function after_last(s, sep, i, d, c, cut) {
	d = 0; cut = 0
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "<" || c == "(" || c == "[" || c == "{") d++
		else if (c == ">" || c == ")" || c == "]" || c == "}") d--
		else if (d == 0 && substr(s, i, length(sep)) == sep) cut = i + length(sep) - 1
	}
	return cut
}

function norm(s, cut) {
	sub(/ \[inlined\]$/, "", s)       # ember's mark
	sub(/ inlined at .*$/, "", s)     # eu-addr2line's
	sub(/@.*$/, "", s)                # symbol version: "memcpy@GLIBC_2.2.5"
	gsub(/\[abi:[^]]*\]/, "", s)      # ABI tags: "message[abi:cxx11]"
	s = strip_params(strip_clones(s))
	# "long ns::f<long>": a template function's return type.
	if (!index(s, "operator") && (cut = after_last(s, " "))) s = substr(s, cut + 1)
	return s
}

function last_part(s, cut) { cut = after_last(s, "::"); return cut ? substr(s, cut + 1) : s }

# Without template arguments: DW_AT_name spells them its own way
# ("print_literal<37>", "<lambda()>") where the demangler says
# "print_literal<37ul>", "{lambda()#1}".
function untemplated(s, out, i, d, c) {
	out = ""; d = 0
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "<" && !(substr(s, i - 8, 8) == "operator" || substr(s, i - 9, 9) == "operator<")) d++
		else if (c == ">" && d > 0) d--
		else if (d == 0) out = out c
	}
	return out
}

function same(a, b) {
	if (a == b) return 1
	if (last_part(a) == a && (last_part(b) == a || untemplated(last_part(b)) == untemplated(a))) return 1
	if (last_part(b) == b && (last_part(a) == b || untemplated(last_part(a)) == untemplated(b))) return 1
	return 0
}

function aliases(a, b, n, k, i) {
	if (!(a in keys) || !(b in keys)) return 0
	n = split(keys[a], k, " ")
	for (i = 1; i <= n; i++)
		if (index(keys[b], " " k[i] " ")) return 1
	return 0
}

function outer_same(a, b) { return same(norm(a), norm(b)) || aliases(norm(a), norm(b)) }

# Frames fe[1..ne] against fo[1..no], innermost first.
function chains_agree(fe, ne, fo, no, i) {
	if (mode == "outer") return outer_same(fe[ne], fo[no])
	if (ne != no) return 0
	for (i = 1; i < ne; i++)
		if (!same(norm(fe[i]), norm(fo[i]))) return 0
	return outer_same(fe[ne], fo[no])
}

function agree(e, o, ne, no, fe, fo) {
	if (e == "??" || o == "??") return 0
	ne = split(e, fe, "\t")
	no = split(o, fo, "\t")
	if (chains_agree(fe, ne, fo, no)) return 1
	# eu-addr2line says which function the innermost frame is inlined in:
	# "leaf inlined at f.c:3 in outer", outer named from the symbol table.
	# When DWARF has no subprogram around the inlined code (an inlined
	# subroutine straight under the compile unit: glibc's IFUNC resolvers,
	# some GCC destructors), eu-addr2line's frames stop before that
	# function: complete them with it.
	if (mode == "chain" && match(fo[1], / inlined at [^ ]+ in /)) {
		fo[no + 1] = substr(fo[1], RSTART + RLENGTH)
		return chains_agree(fe, ne, fo, no + 1)
	}
	return 0
}

FILENAME == ARGV[1] {
	n = norm($2)
	if (!(n in keys)) keys[n] = " "
	if (!index(keys[n], " " $1 " ")) keys[n] = keys[n] $1 " "
	next
}
FILENAME == ARGV[2] { label[++nl] = $0; next }
FILENAME == ARGV[3] { ember[++ne] = $0; next }
{ other[++no] = $0 }

END {
	if (ne != nl || no != nl) {
		printf "%s: %d addresses, but %d answers from ember and %d from %s\n", who, nl, ne, no, who
		print "AGREE 0 TOTAL " nl
		exit
	}
	ok = 0; shown = 0
	for (i = 1; i <= nl; i++) {
		if (agree(ember[i], other[i])) { ok++; continue }
		if (shown++ < cap) {
			e = ember[i]; o = other[i]
			gsub(/\t/, " | ", e); gsub(/\t/, " | ", o)
			printf "  %s\n      ember:  %s\n      %s: %s\n", label[i], e, who, o
		}
	}
	if (shown > cap) printf "  ... and %d more disagreements\n", shown - cap
	print "AGREE " ok " TOTAL " nl
}
