#!/usr/bin/env bash
# `ember symbolize --elf` on real system binaries, held against independent
# symbolizers on the same addresses: random addresses inside random function
# symbols (EMBER_SYSTEM_SAMPLES per library, default 2000; the same ones each
# run unless EMBER_SYSTEM_SEED changes), named by
#   eu-addr2line -e LIB -f -i -C   the function and its inlined calls
#   BCC (build/oracle/bcc_symbolize) the function, asked about the same file
#                                  offsets in a live process that maps LIB
# Each must agree on at least 99% of the addresses; every disagreement is
# listed (up to 40 per library and oracle, then counted). Libraries:
#   libc.so.6          stripped; symbols and DWARF (compressed) in its
#                      /usr/lib/debug/.build-id file (libc6-dbg)
#   libstdc++.so.6     stripped, and no detached debug file exists for it in
#                      Debian 12: its .dynsym (exported functions) only
#   libstdc++ (debug)  libstdc++6-12-dbg's debug build of the library
#                      (/usr/lib/x86_64-linux-gnu/debug), .symtab and DWARF
#   libjvm.so          OpenJDK 17's, .symtab but no DWARF
. "$(dirname "$0")/../lib.sh"
. "$ROOT/tests/oracle/oracles.sh"
SAMPLES=${EMBER_SYSTEM_SAMPLES:-2000}
SEED=${EMBER_SYSTEM_SEED:-1}
FIX=$ROOT/build/fixtures
for f in "$EMBER" "$BCC_SYMBOLIZE" "$FIX/symtarget"; do
	[ -e "$f" ] || fail "$f is missing: make build/ember build/oracle/bcc_symbolize build/fixtures/symtarget (make test builds all)"
done
command -v eu-addr2line >/dev/null || skip "no eu-addr2line (elfutils), the oracle for inlined frames"
# Local files only, for every tool: no debuginfod downloads.
unset DEBUGINFOD_URLS

LIBC=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
STDCXX=$(readlink -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6)
STDCXX_DEBUG_DIR=/usr/lib/x86_64-linux-gnu/debug
JAVA=/usr/lib/jvm/java-17-openjdk-amd64
LIBJVM=$JAVA/lib/server/libjvm.so
build_id() { readelf -n "$1" | awk '/Build ID:/ { print $3 }'; }
id=$(build_id "$LIBC")
LIBC_DEBUG=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug

failures=() missing=()
# check NAME LIB SYMBOLS NM_FLAGS PID: samples functions of LIB from the
# symbol table of SYMBOLS (nm NM_FLAGS), names them with ember --elf LIB,
# eu-addr2line -e LIB and BCC in PID (which maps LIB).
check() {
	local name=$1 lib=$2 symbols=$3 nm_flags=$4 pid=$5 d=$TMP/$1
	echo "== $name: $lib (symbols from $symbols)"
	# Distinct function starts, then one random address inside each picked.
	nm -S -C --defined-only $nm_flags "$symbols" | awk '$3 ~ /^[TtWi]$/ && $2 ~ /^[0-9a-f]+$/ && $2 !~ /^0+$/' |
		sort -u -k1,1 | shuf -n "$SAMPLES" --random-source=<(yes "$SEED") >"$d.symbols"
	RANDOM=$SEED
	local addr size type sym label v
	label=$(basename "$lib")
	while read -r addr size type sym; do
		v=$(( 16#$addr + (RANDOM * 32768 + RANDOM) % 16#$size ))
		printf '%x %s+0x%x\t%s\n' "$v" "$label" "$v" "$sym"
	done <"$d.symbols" >"$d.sample"
	cut -d' ' -f1 "$d.sample" | sed 's/^/0x/' >"$d.vaddrs"
	cut -f1 "$d.sample" | cut -d' ' -f2 >"$d.labels"
	alias_table "$symbols" >"$d.aliases"

	local start=$SECONDS
	"$EMBER" symbolize --elf "$lib" <"$d.vaddrs" >"$d.ember" 2>"$d.ember.err" || fail "$name: ember exited $?: $(cat "$d.ember.err")"
	ember_frames <"$d.ember" >"$d.ember.frames"
	echo "ember: $(wc -l <"$d.vaddrs") addresses in $((SECONDS - start)) s$([ -s "$d.ember.err" ] && echo "; $(head -c 300 "$d.ember.err")")"
	eu-addr2line -e "$lib" -a -f -i -C <"$d.vaddrs" | eu_frames >"$d.eu.frames"
	agreement eu-addr2line chain "$d.aliases" "$d.labels" "$d.ember.frames" "$d.eu.frames" 40
	(( AGREE * 100 >= TOTAL * 99 && TOTAL > 0 )) || failures+=("$name vs eu-addr2line")

	live_addresses "$pid" "$lib" "$lib" <"$d.sample" >"$d.live"
	[ "$(wc -l <"$d.live")" = "$(wc -l <"$d.sample")" ] ||
		fail "$name: pid $pid does not map $lib once: $(grep -F "$lib" /proc/"$pid"/maps | head -3)"
	cut -d' ' -f1 "$d.live" | "$BCC_SYMBOLIZE" "$pid" | bcc_frames >"$d.bcc.frames"
	agreement BCC outer "$d.aliases" "$d.labels" "$d.ember.frames" "$d.bcc.frames" 40
	(( AGREE * 100 >= TOTAL * 99 && TOTAL > 0 )) || failures+=("$name vs BCC")
}

# Waits until a process maps a file (or prints "ready"), then sets PID.
started() {
	local pid=$1 file=$2
	BACKGROUND+=("$pid")
	for _ in $(seq 100); do
		grep -qF " $file" /proc/"$pid"/maps 2>/dev/null && { PID=$pid; return; }
		sleep 0.05
	done
	fail "pid $pid never mapped $file"
}

if [ -e "$LIBC_DEBUG" ]; then
	sleep 300 &
	started $! "$LIBC"
	check libc "$LIBC" "$LIBC_DEBUG" "" "$PID"
else
	missing+=("libc's debug file $LIBC_DEBUG (libc6-dbg)")
fi

"$FIX/symtarget" >/dev/null &
started $! "$STDCXX"
check libstdc++ "$STDCXX" "$STDCXX" --dynamic "$PID"

if [ -e "$STDCXX_DEBUG_DIR/libstdc++.so.6" ]; then
	lib=$(readlink -f "$STDCXX_DEBUG_DIR/libstdc++.so.6")
	LD_LIBRARY_PATH=$STDCXX_DEBUG_DIR "$FIX/symtarget" >/dev/null &
	started $! "$lib"
	check libstdc++-debug "$lib" "$lib" "" "$PID"
else
	missing+=("the debug build of libstdc++ in $STDCXX_DEBUG_DIR (libstdc++6-12-dbg)")
fi

if [ -e "$LIBJVM" ]; then
	# A JVM held at its start (libjvm mapped, nothing run): cheaper than any program.
	"$JAVA/bin/java" -XX:+UnlockDiagnosticVMOptions -XX:+PauseAtStartup -XX:PauseAtStartupFile="$TMP/jvm.paused" \
		-version >/dev/null 2>&1 &
	started $! "$LIBJVM"
	check libjvm "$LIBJVM" "$LIBJVM" "" "$PID"
else
	missing+=("$LIBJVM (openjdk-17-jdk-headless)")
fi

(( ${#failures[@]} == 0 )) || fail "below 99% agreement (disagreements listed above): ${failures[*]}"
(( ${#missing[@]} == 0 )) || skip "the libraries above agree, but these are missing: ${missing[*]}"
echo "system libraries: at least 99% agreement with eu-addr2line and BCC"
