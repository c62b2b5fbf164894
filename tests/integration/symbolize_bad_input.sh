#!/usr/bin/env bash
# Bad input to the symbolizer: never a crash, one answer per address, frames
# fall back to a symbol-table name or to "file+0xoff", and a warning names
# the file where ember can tell what is wrong.
#   a. a -g binary cut short at several points, and copies with corrupt
#      DWARF (.debug_info, .debug_abbrev, .debug_line, .debug_rnglists,
#      .debug_str, section headers pointing past the end): `ember symbolize
#      --elf`, and every copy through the fuzz harness under ASan + UBSan;
#   b. a perf map with garbage lines for a live process with an anonymous
#      executable mapping: the good lines still name their addresses, and a
#      warning counts the skipped lines;
#   c. a debuginfod server that accepts and never answers: ember gives up
#      within the budget DEBUGINFOD_TIMEOUT sets (2 s, asserted < 8 s; the
#      default 10 s is record_stops'), names what the stripped
#      binary's .dynsym names, and warns about debuginfod;
#   d. bad input lines: one line out per line in, the good ones answered
#      as in a clean run, the bad one marked, exit status 2; and an --elf
#      that is missing, a directory or not ELF at all: exit 1 with the cause.
. "$(dirname "$0")/../lib.sh"
REPLAY=$ROOT/build/fuzz/replay
for tool in g++ gcc strip readelf nm node; do
	command -v $tool >/dev/null || fail "$tool missing: scripts/deps.sh test installs it"
done
[ -x "$REPLAY" ] || fail "no $REPLAY: \`make test\` builds it"

# The fuzz seeds' source: functions with and without C++ names, a static one,
# an inlined one. DWARF 5, whose unit header the edits below assume;
# -rdynamic, so the stripped copy in (c) names the global ones from .dynsym.
g++ -O2 -gdwarf-5 -rdynamic "$ROOT/tests/fuzz/seeds/elf_seed.cpp" -o "$TMP/prog" || fail "g++ failed"
addr_of() { printf '0x%x' "$((16#$(nm "$TMP/prog" | awk -v s="$1" '$3 == s { print $1; exit }')))"; }
main=$(addr_of main) hash=$(addr_of _ZN4seed4hashEPKc) helper=$(addr_of _ZL12local_helperi)
weak=$(addr_of weak_entry)
for a in "$main" "$hash" "$helper" "$weak"; do [ "$a" != 0x0 ] || fail "nm lacks the seed's functions"; done
ADDRS=("$main" "$(printf '0x%x' $((hash + 8)))" "$helper" "$weak" 0x10)
# The names the symbol table gives (the last address, in the ELF header, is in no function).
"$EMBER" symbolize --elf "$TMP/prog" --no-inlines "${ADDRS[@]}" >"$TMP/ref" 2>"$TMP/ref.err" || fail "clean binary: exit $?"
# The outermost frame (the last field) of each line, without " (file:line)";
# "??" for a placeholder.
outer_names() { awk -F'\t' '{ n = $NF; sub(/ \([^()]*:[0-9]+\)$/, "", n); if (n ~ /^\?\? /) n = "??"; print n }' "$1"; }
outer_names "$TMP/ref" >"$TMP/ref.names"
[ "$(tr '\n' , <"$TMP/ref.names")" = "main,seed::hash(char const*),local_helper(int),weak_entry,??," ] ||
	fail "clean binary misnamed: $(cat "$TMP/ref")"

# (d) A bad line among good ones on stdin: every line answered, in order.
{ printf '%s\n' "${ADDRS[0]}" zz "${ADDRS[1]}"; echo; printf '%s\n' "${ADDRS[2]}" 0xnothex "${ADDRS[@]:3}"; } >"$TMP/mixed.in"
"$EMBER" symbolize --elf "$TMP/prog" --no-inlines <"$TMP/mixed.in" >"$TMP/mixed" 2>"$TMP/mixed.err"
rc=$?
((rc == 2)) || fail "bad stdin lines: exit $rc, not 2: $(cat "$TMP/mixed.err")"
{ sed -n 1p "$TMP/ref"; printf 'zz\t?? not a hex address\n'; sed -n 2p "$TMP/ref"; echo; sed -n 3p "$TMP/ref"
  printf '0xnothex\t?? not a hex address\n'; sed -n '4,$p' "$TMP/ref"; } >"$TMP/mixed.want"
diff "$TMP/mixed.want" "$TMP/mixed" >&2 || fail "bad stdin lines: not one answer per line, in order"
assert_contains "$TMP/mixed.err" "^ember: line 2: 'zz' is not a hex address$" "no error for line 2: $(cat "$TMP/mixed.err")"
assert_contains "$TMP/mixed.err" "^ember: line 6: '0xnothex' is not a hex address$" "no error for line 6"
echo "bad stdin lines: $(wc -l <"$TMP/mixed") lines for $(wc -l <"$TMP/mixed.in"), exit 2"
# An --elf ember cannot use at all is an error, not a column of "??".
echo 'not an ELF file' >"$TMP/text"
for elf in "$TMP/missing" "$TMP" "$TMP/text"; do
	"$EMBER" symbolize --elf "$elf" 0x10 >"$TMP/out" 2>"$TMP/err"
	rc=$?
	((rc == 1)) || fail "--elf $elf: exit $rc, not 1: $(cat "$TMP/out" "$TMP/err")"
	[ ! -s "$TMP/out" ] || fail "--elf $elf: answered: $(cat "$TMP/out")"
	assert_contains "$TMP/err" "^ember: (cannot open $elf: No such file|$elf is not a regular file|$elf is not an ELF file)" \
		"--elf $elf: no cause: $(cat "$TMP/err")"
	echo "--elf $(basename "$elf"): $(cat "$TMP/err")"
done

# Offset and size (decimal) of a section.
section() {
	readelf -S -W "$1" | sed 's/^ *\[ *[0-9]*\] //' | awk -v n="$2" '$1 == n { print $4, $5 }' |
		{ read -r o s && echo $((16#$o)) $((16#$s)); }
}
# fill FILE OFFSET COUNT BYTE (as tr writes it, e.g. '\377')
fill() { head -c "$3" /dev/zero | tr '\0' "$4" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
# put64 FILE OFFSET VALUE: a little-endian 64-bit word
put64() {
	local v=$3 bytes="" i
	for ((i = 0; i < 8; i++)); do bytes+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done
	printf "$bytes" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# symbolize FILE [--lines]: runs ember on the copy; checks the exit status and
# that every address got exactly one well-formed line.
symbolize() {
	local file=$1 name
	name=$(basename "$file")
	shift
	"$EMBER" symbolize --elf "$file" "$@" "${ADDRS[@]}" >"$TMP/out" 2>"$TMP/err"
	local rc=$?
	((rc == 0)) || fail "$name: ember exited $rc: $(cat "$TMP/err")"
	(($(wc -l <"$TMP/out") == ${#ADDRS[@]})) || fail "$name: not one line per address: $(cat "$TMP/out")"
	grep -vqE $'^0x[0-9a-f]+\t([^?\t]|\\?\\? '"$name"$'\\+0x[0-9a-f]+: .+$)' "$TMP/out" &&
		fail "$name: a line is neither a name nor $name+0xoff: $(cat "$TMP/out")"
	! grep -v '^ember: warning: ' "$TMP/err" | grep -q . || fail "$name: unexpected stderr: $(cat "$TMP/err")"
}

# (a) Truncated copies: the section headers (last in the file) are gone, so
# nothing can be named: every frame is file+0xoff, and a warning says why.
size=$(stat -c %s "$TMP/prog")
read -r text_off _ < <(section "$TMP/prog" .text)
read -r info_off info_size < <(section "$TMP/prog" .debug_info)
shoff=$(readelf -h "$TMP/prog" | awk '/Start of section headers/ { print $5 }')
declare -A cuts=([in-elf-header]=40 [in-program-headers]=100 [in-text]=$((text_off + 32))
	[in-debug-info]=$((info_off + info_size / 2)) [in-section-headers]=$((shoff + 5 * 64 + 10))
	[last-byte]=$((size - 1)))
for cut in "${!cuts[@]}"; do
	f=$TMP/trunc-$cut
	head -c "${cuts[$cut]}" "$TMP/prog" >"$f"
	symbolize "$f" --lines
	grep -vq $'\t?? ' "$TMP/out" && fail "$cut: a truncated file named something: $(cat "$TMP/out")"
	assert_contains "$TMP/err" "^ember: warning: .*trunc-$cut: (truncated|not an ELF file)" \
		"$cut: no warning naming the file: $(cat "$TMP/err")"
	echo "truncated $cut (${cuts[$cut]} of $size bytes): $(head -1 "$TMP/err")"
done

# Corrupt DWARF: the symbol table is intact, so every frame keeps its name
# (without lines where the DWARF is gone). Where libdw refuses the DWARF when
# it is opened, a warning names the file; damage deeper inside a unit shows
# only when that unit is read, and costs its inlined frames and lines.
read -r abbrev_off abbrev_size < <(section "$TMP/prog" .debug_abbrev)
read -r line_off _ < <(section "$TMP/prog" .debug_line)
read -r rng_off _ < <(section "$TMP/prog" .debug_rnglists)
read -r str_off str_size < <(section "$TMP/prog" .debug_str)
info_index=$(readelf -S -W "$TMP/prog" | sed -n 's/^ *\[ *\([0-9]*\)\] \.debug_info .*/\1/p')
corrupt() { # NAME: a fresh copy in $f, to edit
	f=$TMP/dwarf-$1
	cp "$TMP/prog" "$f"
}
check_corrupt() { # NAME WARNS: 1 if ember must refuse the file's DWARF, 2 if it reads the DWARF in part
	symbolize "$TMP/dwarf-$1" --lines
	outer_names "$TMP/out" >"$TMP/names"
	diff -q "$TMP/names" "$TMP/ref.names" >/dev/null ||
		fail "$1: names differ from the symbol table's: $(paste "$TMP/names" "$TMP/ref.names")"
	local warned=""
	if (($2 == 1)); then
		assert_contains "$TMP/err" "^ember: warning: .*dwarf-$1: DWARF unreadable" "$1: no warning naming the file: $(cat "$TMP/err")"
		warned=", warned"
	elif (($2 == 2)); then
		assert_contains "$TMP/err" "^ember: warning: .*dwarf-$1: its DWARF is damaged" "$1: no warning naming the file: $(cat "$TMP/err")"
		warned=", warned (damaged)"
	fi
	echo "corrupt $1: names kept$warned"
}
corrupt abbrev-offset && fill "$f" $((info_off + 8)) 4 '\377'  # DWARF 5 unit header: debug_abbrev_offset
check_corrupt abbrev-offset 1
corrupt unit-length && fill "$f" "$info_off" 4 '\377'  # 0xffffffff: 64-bit DWARF, length past the end
check_corrupt unit-length 1
corrupt info-garbage && fill "$f" $((info_off + 40)) 200 '\377'
check_corrupt info-garbage 2
corrupt abbrev-garbage && fill "$f" $((abbrev_off + 10)) 100 '\377'
check_corrupt abbrev-garbage 2
corrupt abbrev-zeroed && fill "$f" "$abbrev_off" "$abbrev_size" '\0'
check_corrupt abbrev-zeroed 1
corrupt line-garbage && fill "$f" $((line_off + 4)) 60 '\377'
check_corrupt line-garbage 2
corrupt rnglists-garbage && fill "$f" $((rng_off + 12)) 30 '\377'
check_corrupt rnglists-garbage 1
corrupt str-unterminated && fill "$f" "$str_off" "$str_size" 'A'  # libdw would strlen past its end
check_corrupt str-unterminated 1
corrupt info-size-past-eof && put64 "$f" $((shoff + info_index * 64 + 32)) $((1 << 20))  # sh_size
check_corrupt info-size-past-eof 1
corrupt info-offset-past-eof && put64 "$f" $((shoff + info_index * 64 + 24)) $((1 << 28))  # sh_offset
check_corrupt info-offset-past-eof 1

# Every copy through everything the symbolizer does with an ELF file, under
# AddressSanitizer and UBSan (tests/fuzz/fuzz_elf.cpp).
"$REPLAY" elf "$TMP"/trunc-* "$TMP"/dwarf-* >"$TMP/replay" 2>&1 || fail "ASan replay: $(tail -30 "$TMP/replay")"
echo "ASan + UBSan: $(cat "$TMP/replay")"

# (b) A perf map with garbage lines, for a process with anonymous code.
cat >"$TMP/anon.c" <<'EOF'
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
  void* code = mmap(NULL, 1 << 16, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 1;
  printf("%lx\n", (unsigned long)code);
  fflush(stdout);
  pause();
  return 0;
}
EOF
gcc -O1 -o "$TMP/anon" "$TMP/anon.c" || fail "gcc failed"
background "$TMP/anon" >"$TMP/anon.out"
anon_pid=${BACKGROUND[-1]}
at_exit 'rm -f "/tmp/perf-$anon_pid.map"'
for _ in $(seq 50); do [ -s "$TMP/anon.out" ] && break; sleep 0.1; done
base=$((16#$(cat "$TMP/anon.out")))
((base != 0)) || fail "the anonymous mapping's address did not arrive"
hex() { printf '%x' "$1"; }
map=/tmp/perf-$anon_pid.map
{
	echo "$(hex "$base") 40 jit_alpha"
	echo "not a perf map line"
	echo "0x$(hex $((base + 0x40))) 0x40 jit_beta"
	echo "zz 10 bad start"
	echo ""
	echo "$(hex $((base + 0x80)))"
	echo "$(hex $((base + 0x80))) 10"
	echo "$(hex $((base + 0x80))) 0 zero size"
	echo "$(hex $((base + 0x80))) -4 negative size"
	printf '\x01\x02\xff\xfe binary junk\n'
	head -c 65536 /dev/zero | tr '\0' x
	echo
	echo "$(hex $((base + 0x100))) 80 Lcom/example/Gamma;::run"
} >"$map"
bad_lines=8
probe=("0x$(hex $((base + 0x10)))" "0x$(hex $((base + 0x50)))" "0x$(hex $((base + 0x120)))" "0x$(hex $((base + 0x400)))")
"$EMBER" symbolize --pid "$anon_pid" "${probe[@]}" >"$TMP/out" 2>"$TMP/err" ||
	fail "perf map: ember exited $?: $(cat "$TMP/err")"
sed 's/^/  perf map: /' "$TMP/out"
(($(wc -l <"$TMP/out") == 4)) || fail "perf map: not one line per address"
printf '%s\t%s\n' "${probe[0]}" jit_alpha "${probe[1]}" jit_beta "${probe[2]}" 'Lcom/example/Gamma;::run' >"$TMP/want"
[ "$(head -3 "$TMP/out")" = "$(cat "$TMP/want")" ] || fail "perf map: good lines misnamed: $(cat "$TMP/out")"
assert_contains "$TMP/out" "^${probe[3]}"$'\t\\?\\? \\[anon\\]: ' "perf map: an address no line covers is not [anon]"
assert_contains "$TMP/err" "^ember: warning: $map: $bad_lines lines .* skipped" \
	"perf map: no warning counting $bad_lines skipped lines: $(cat "$TMP/err")"
head -1 "$TMP/err"
"$REPLAY" perfmap "$map" >"$TMP/replay" 2>&1 || fail "perf map ASan replay: $(tail -30 "$TMP/replay")"
rm -f "$map"

# (c) A debuginfod server that accepts connections and never answers.
background node -e '
	const net = require("net");
	const held = [];  // open, unanswered
	const server = net.createServer((c) => { held.push(c); console.log("accepted"); });
	server.listen(0, "127.0.0.1", () => console.log(server.address().port));
' >"$TMP/listener"
for _ in $(seq 50); do [ -s "$TMP/listener" ] && break; sleep 0.1; done
port=$(head -1 "$TMP/listener")
[[ $port =~ ^[0-9]+$ ]] || fail "the listener did not start: $(cat "$TMP/listener")"
strip --strip-all -o "$TMP/prog-stripped" "$TMP/prog" || fail "strip failed"
[ -n "$(readelf -n "$TMP/prog-stripped" | grep 'Build ID')" ] || fail "the stripped binary has no build-id"
start=$(date +%s%N)
DEBUGINFOD_URLS=http://127.0.0.1:$port DEBUGINFOD_CACHE_PATH=$TMP/cache DEBUGINFOD_TIMEOUT=2 timeout 60 \
	"$EMBER" symbolize --elf "$TMP/prog-stripped" "${ADDRS[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
echo "debuginfod that never answers: ember took $ms ms (budget 2000 ms)"
sed 's/^/  /' "$TMP/out" "$TMP/err"
((rc == 0)) || fail "debuginfod: ember exited $rc"
((ms >= 2000 && ms < 8000)) || fail "debuginfod: took $ms ms with a budget of 2 s"
grep -q accepted "$TMP/listener" || fail "debuginfod: ember never connected to the listener"
(($(wc -l <"$TMP/out") == ${#ADDRS[@]})) || fail "debuginfod: not one line per address"
# .dynsym names the exported functions; the static one falls back to file+0xoff.
assert_contains "$TMP/out" $'\tmain$'
assert_contains "$TMP/out" $'\tseed::hash\\(char const\\*\\)$'
assert_contains "$TMP/out" $'\tweak_entry$'
assert_contains "$TMP/out" $'^'"$helper"$'\t\\?\\? prog-stripped\\+'"$helper"': '
assert_contains "$TMP/err" "^ember: warning: debuginfod: .*prog-stripped" "debuginfod: no warning: $(cat "$TMP/err")"
assert_contains "$TMP/err" "debuginfod: stopped asking after 2[0-9]{3} ms" "debuginfod: DEBUGINFOD_TIMEOUT=2 not the budget"
