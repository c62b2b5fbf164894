#!/usr/bin/env bash
# `ember symbolize --pid` on the symbolizer fixtures (tests/fixtures/symbolizer,
# built by the Makefile into build/fixtures), held against independent
# answers for the same live addresses: every other byte of every function of
# the binary (and of its library), placed in the process from /proc/PID/maps
# and the ELF segments. Three references, each must agree on 100%:
#   nm       the unstripped binary's symbol containing the address (function)
#   BCC      libbcc's symbolizer, build/oracle/bcc_symbolize (function)
#   eu       eu-addr2line --pid -f -i -C (function and its inlined calls)
# Cases:
#   pie        PIE with DWARF; libsymlib.so mapped twice (dlopen + dlmopen)
#   nopie      non-PIE; libsymlib-based.so (linked at 0x20000000) mapped
#              twice: at its link address (bias 0) and elsewhere
#   debuglink  stripped; names and inlines in .debug/symtarget-debuglink.debug
#   mini       stripped, only MiniDebugInfo (.gnu_debugdata): BCC does not
#              read it (Debian's libbcc is built without liblzma), so nm and
#              eu (which does) are the references
#   zdebug     compressed DWARF sections (SHF_COMPRESSED, zlib)
#   deleted    copies of the binary and library, removed once running
#   mountns    own mount namespace, binary on a private tmpfs /tmp the host
#              cannot see
# eu-addr2line (and BCC) cannot open a deleted file, nor (eu) a file in
# another mount namespace: there they answer for a twin process running the
# same files from build/fixtures, at the same file offsets.
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/oracle/oracles.sh"
FIX=$ROOT/build/fixtures
for f in "$EMBER" "$BCC_SYMBOLIZE" "$FIX"/{symtarget,symtarget-nopie,symtarget-debuglink,symtarget-mini,symtarget-zdebug} \
	"$FIX"/{libsymlib.so,libsymlib-based.so,.debug/symtarget-debuglink.debug}; do
	[ -e "$f" ] || fail "$f is missing: make build/ember build/oracle/bcc_symbolize $(sed "s|^$ROOT/||" <<<"$f") (make test builds all)"
done
command -v eu-addr2line >/dev/null || skip "no eu-addr2line (elfutils), the oracle for inlined frames"
[ "$(id -u)" = 0 ] || skip "needs root (unshare -m, /proc/PID/map_files)"

# Starts a target in the background and waits for its "ready"; sets PID.
start_target() {
	local name=$1
	shift
	: >"$TMP/$name.out"
	"$@" >"$TMP/$name.out" 2>&1 &
	PID=$!
	BACKGROUND+=("$PID")
	for _ in $(seq 100); do
		grep -q '^ready' "$TMP/$name.out" && return
		sleep 0.05
	done
	fail "$name: the target did not start: $(cat "$TMP/$name.out")"
}

# "VADDR MODULE+0xVADDR<TAB>function" for every other byte of every sized
# function of an unstripped ELF.
sample() {
	local label
	label=$(basename "$1")
	nm -S -C --defined-only "$1" | while read -r addr size type name; do
		[[ $type == [TtWi] && $size =~ ^[0-9a-f]+$ ]] || continue
		for ((o = 0; o < 16#$size; o += 2)); do
			printf '%x %s+0x%x\t%s\n' $((16#$addr + o)) "$label" $((16#$addr + o)) "$name"
		done
	done
}
for elf in symtarget symtarget-nopie libsymlib.so libsymlib-based.so; do sample "$FIX/$elf" >"$TMP/$elf.sample"; done
alias_table "$FIX"/{symtarget,symtarget-nopie,libsymlib.so,libsymlib-based.so} >"$TMP/aliases"

failures=()
# check CASE PID BCC_PID EU_PID: compares ember's answers for the addresses
# in $TMP/CASE.entries ("ADDRESS LABEL<TAB>function") of PID with nm's, with
# BCC's (unless BCC_PID is -) and eu-addr2line's, asked for the same files
# and offsets in BCC_PID and EU_PID ($TMP/CASE.twin, when not PID).
check() {
	local c=$1 pid=$2 bcc_pid=$3 eu_pid=$4 d=$TMP/$1
	cut -d' ' -f1 "$d.entries" >"$d.addrs"
	awk -F'\t' '{ split($1, a, " "); print "0x" a[1] " " a[2] }' "$d.entries" >"$d.labels"
	cut -f2 "$d.entries" >"$d.nm.frames"
	local n
	n=$(wc -l <"$d.addrs")
	(( n > 100 )) || fail "$c: only $n addresses sampled"
	"$EMBER" symbolize --pid "$pid" <"$d.addrs" >"$d.ember" 2>"$d.ember.err" || fail "$c: ember exited $?: $(cat "$d.ember.err")"
	ember_frames <"$d.ember" >"$d.ember.frames"
	echo "== $c: $n addresses in pid $pid"
	agreement nm outer "$TMP/aliases" "$d.labels" "$d.ember.frames" "$d.nm.frames"
	(( AGREE == TOTAL )) || failures+=("$c vs nm")
	local twin=$d.addrs
	if [ "$bcc_pid" != - ]; then
		[ "$bcc_pid" = "$pid" ] || twin=$d.twin
		"$BCC_SYMBOLIZE" "$bcc_pid" <"$twin" | bcc_frames >"$d.bcc.frames"
		agreement BCC outer "$TMP/aliases" "$d.labels" "$d.ember.frames" "$d.bcc.frames"
		(( AGREE == TOTAL )) || failures+=("$c vs BCC")
	fi
	twin=$d.addrs
	[ "$eu_pid" = "$pid" ] || twin=$d.twin
	sed 's/^/0x/' "$twin" | eu-addr2line --pid="$eu_pid" -a -f -i -C | eu_frames >"$d.eu.frames"
	agreement eu-addr2line chain "$TMP/aliases" "$d.labels" "$d.ember.frames" "$d.eu.frames"
	(( AGREE == TOTAL )) || failures+=("$c vs eu-addr2line")
}

# add CASE PID PATH ELF SAMPLE: appends to $TMP/CASE.entries the addresses
# sampled from SAMPLE's ELF as mapped in PID from PATH (laid out as ELF).
add() { live_addresses "$2" "$3" "$FIX/$4" <"$TMP/$5.sample" >>"$TMP/$1.entries"; }

start_target pie "$FIX/symtarget"
pie=$PID
add pie "$pie" "$FIX/symtarget" symtarget symtarget
add pie "$pie" "$FIX/libsymlib.so" libsymlib.so libsymlib.so
(( $(grep -c 'libsymlib.so+' "$TMP/pie.entries") == 2 * $(wc -l <"$TMP/libsymlib.so.sample") )) ||
	fail "pie: libsymlib.so is not mapped twice: $(grep libsymlib /proc/$pie/maps)"
check pie "$pie" "$pie" "$pie"

start_target nopie "$FIX/symtarget-nopie" "$FIX/libsymlib-based.so"
add nopie "$PID" "$FIX/symtarget-nopie" symtarget-nopie symtarget-nopie
add nopie "$PID" "$FIX/libsymlib-based.so" libsymlib-based.so libsymlib-based.so
grep -q '^20001000-.* r-xp .*libsymlib-based.so$' /proc/"$PID"/maps ||
	echo "note: libsymlib-based.so is not at its link address: $(grep libsymlib-based /proc/$PID/maps)"
check nopie "$PID" "$PID" "$PID"

for v in debuglink mini zdebug; do
	start_target "$v" "$FIX/symtarget-$v"
	add "$v" "$PID" "$FIX/symtarget-$v" "symtarget-$v" symtarget
	if [ "$v" = mini ]; then check "$v" "$PID" - "$PID"; else check "$v" "$PID" "$PID" "$PID"; fi
done

# Deleted: its twin is the pie process (same files, same offsets).
mkdir "$TMP/del"
cp "$FIX/symtarget" "$FIX/libsymlib.so" "$TMP/del/"
start_target deleted "$TMP/del/symtarget"
rm "$TMP/del/symtarget" "$TMP/del/libsymlib.so"
add deleted "$PID" "$TMP/del/symtarget (deleted)" symtarget symtarget
add deleted "$PID" "$TMP/del/libsymlib.so (deleted)" libsymlib.so libsymlib.so
cut -d' ' -f1 "$TMP/pie.entries" >"$TMP/deleted.twin"
cmp -s <(cut -d' ' -f2- "$TMP/deleted.entries") <(cut -d' ' -f2- "$TMP/pie.entries") ||
	fail "deleted: its mappings differ from the twin's: $(grep del/ /proc/$PID/maps)"
check deleted "$PID" "$pie" "$pie"

# Own mount namespace: /tmp there is a fresh tmpfs holding the binary and
# library, copied through open files (the checkout may itself be under /tmp).
command -v unshare >/dev/null || skip "no unshare(1) (util-linux)"
start_target mountns unshare -m --propagation private sh -c \
	'exec 3<"$0" 4<"$1" && mount -t tmpfs tmpfs /tmp && mkdir /tmp/ember-ns && cat <&3 >/tmp/ember-ns/symtarget &&
	 cat <&4 >/tmp/ember-ns/libsymlib.so && chmod +x /tmp/ember-ns/symtarget && exec /tmp/ember-ns/symtarget' \
	"$FIX/symtarget" "$FIX/libsymlib.so"
[ ! -e /tmp/ember-ns/symtarget ] || fail "mountns: the host sees /tmp/ember-ns/symtarget"
grep -q ' /tmp/ember-ns/symtarget$' /proc/"$PID"/maps || fail "mountns: the target does not run /tmp/ember-ns/symtarget"
add mountns "$PID" /tmp/ember-ns/symtarget symtarget symtarget
add mountns "$PID" /tmp/ember-ns/libsymlib.so libsymlib.so libsymlib.so
cp "$TMP/deleted.twin" "$TMP/mountns.twin"
cmp -s <(cut -d' ' -f2- "$TMP/mountns.entries") <(cut -d' ' -f2- "$TMP/pie.entries") ||
	fail "mountns: its mappings differ from the twin's"
check mountns "$PID" "$PID" "$pie"

(( ${#failures[@]} == 0 )) || fail "disagreements (listed above): ${failures[*]}"
echo "all fixture cases: 100% agreement with nm, BCC and eu-addr2line"
