#!/usr/bin/env bash
# Frame geometry of JIT code (G lines, symbolizer/jit_map.h), from HotSpot's
# VMStructs, for a JVM with default flags (no -XX:+PreserveFramePointer):
# - ember attached to a running JVM (the agent replays the code there is):
#   every compiled method's L line has its G line, with a plausible frame
#   size and frame-complete offset; stubs that are blobs of their own have
#   theirs; the stubs inside one blob (the interpreter) none;
# - every vtable and itable stub has a G line of 0 words (frameless: the
#   agent tells their blob by its kind, not by their name);
# - checked against the code itself: the prologue of each method still
#   entrant, read from the JVM's memory and disassembled with objdump,
#   builds the frame the G line says, before its frame-complete offset
#   (x86_64: push %rbp; sub $N,%rsp: N/8 + 2 words; or sub $N,%rsp alone:
#   N/8 + 1; aarch64: sub sp, sp, #N: N/8; stp x29, x30, [sp, #-16]!
#   first: N/8 + 2);
# - on JDK 17 and, if installed, on the Temurin JDK 25 (other offsets,
#   other field types); the agent loaded at start-up (before the code cache
#   exists) too.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v objdump >/dev/null || skip "no objdump (binutils)"
java_classes "$TMP/classes"
AGENT=$ROOT/build/libember-agent.so

# check_stream STREAM LABEL: the L/G and S/G pairs of a stream.
check_stream() {
	perl -e '
		use strict; use warnings; no warnings "portable";
		my ($label) = @ARGV;
		my (%name, $last, $kind, $size, $methods, $with_g, $stub_g, $dispatch, $dispatch_g, @bad);
		while (<STDIN>) {
			chomp;
			if (/^M (\d+) (.*)$/) { $name{$1} = $2; next }
			if (/^O frames-unavailable (.*)$/) { push @bad, "the agent says frames are unavailable: $1" }
			if (/^D \d+ frames-unmatched (\d+)$/) { push @bad, "$1 compiled methods unmatched in the code cache" }
			if (/^G ([0-9a-f]+) (-?\d+) (-?\d+)((?: \d+:\d+:-?\d+)*)$/) {
				my ($start, $words, $complete) = ($1, $2, $3);
				if (!defined $last || $start ne $last) { push @bad, "G line not after its L or S line: $_"; next }
				if ($kind eq "L") {
					$with_g++;
					my $mh = $name{$size->[1]} =~ /^java\.lang\.invoke\.MethodHandle\.(linkTo|invokeBasic)/;
					# Method-handle intrinsics build no frame: they jump on to their target.
					push @bad, "frame of $words words: $_ ($name{$size->[1]})" unless ($words >= 2 && $words <= 1000) || ($mh && $words == 0);
					push @bad, "frame complete at $complete, outside the method: $_" unless $complete >= 0 && $complete < $size->[0];
				} else {
					push @bad, "a G line for $size->[1], a stub without a frame of its own" if $size->[1] =~ /^Interpreter$/;
					# vtable and itable stubs jump on to their target without a frame.
					if ($size->[1] =~ /^(vtable|itable) stub$/) { $dispatch_g++; push @bad, "$size->[1] with a frame: $_" if $words != 0 }
					else { $stub_g++; push @bad, "stub frame of $words words: $_" unless $words >= 2 && $words <= 1000 }
				}
				undef $last;
				next;
			}
			if (/^L \d+ ([0-9a-f]+) ([0-9a-f]+) (\d+)$/) { ($last, $kind, $size) = ($1, "L", [hex $2, $3]); $methods++; next }
			if (/^S \d+ ([0-9a-f]+) ([0-9a-f]+) (.*)$/) { ($last, $kind, $size) = ($1, "S", [hex $2, $3]); $dispatch++ if $3 =~ /^(vtable|itable) stub$/; next }
			undef $last;
		}
		$dispatch //= 0;
		push @bad, "G lines for only " . ($dispatch_g // 0) . " of $dispatch vtable and itable stubs" if ($dispatch_g // 0) < $dispatch;
		$methods //= 0; $with_g //= 0; $stub_g //= 0; $dispatch_g //= 0;
		print "$label: $with_g of $methods compiled methods with a G line; $stub_g stubs with one, $dispatch_g vtable and itable stubs\n";
		push @bad, "only $methods compiled methods" if $methods < 20;
		push @bad, "G lines for only $with_g of $methods compiled methods" if $with_g < $methods;
		push @bad, "no stub with a G line (SafepointBlob, RuntimeStubs)" if $stub_g < 3;
		if (@bad) { print "$_\n" for @bad[0 .. ($#bad < 9 ? $#bad : 9)]; exit 1 }
	' "$2" <"$1"
}

# check_prologues STREAM PID LABEL: each compiled method's code against
# the frame its prologue builds.
check_prologues() {
	perl -e '
		use strict; use warnings; no warnings "portable";
		my ($pid, $tmp, $label, $arch) = @ARGV;
		my (@methods, %name, %unloaded, $last);
		while (<STDIN>) {
			if (/^M (\d+) (.*)$/) { $name{$1} = $2; next }
			if (/^U \d+ ([0-9a-f]+)$/) { $unloaded{$1} = 1; next }
			if (/^L \d+ ([0-9a-f]+) [0-9a-f]+ (\d+)$/) { $last = [$1, $2]; next }
			if (/^G ([0-9a-f]+) (\d+) (\d+)(?: \d+:\d+:-?\d+)*$/ && $last && $1 eq $last->[0]) { push @methods, [$1, $2, $3, $last->[1]] }
			undef $last;
		}
		open(my $mem, "<", "/proc/$pid/mem") or die "cannot read the memory of JVM $pid: $!\n";
		my ($match, $skipped, @bad, %seen);
		for my $m (@methods) {
			my ($start, $words, $complete, $id) = @$m;
			next if $unloaded{$start} || $complete == 0;
			my $code;
			sysseek($mem, hex $start, 0) && sysread($mem, $code, $complete) == $complete or die "cannot read $start: $!\n";
			open(my $f, ">", "$tmp/prologue.bin") or die; print $f $code; close $f;
			my ($push, $sub, $jump, $last) = (0, 0, 0, "");
			# A jump before the frame is complete: an entry patched when
			# the code was made not entrant (HotSpot writes a jump over
			# it), or code that jumps on; on aarch64 not the jump of the
			# inline-cache check to its miss stub, after its b.eq.
			if ($arch eq "aarch64") {
				for (`objdump -D -b binary -m aarch64 --no-show-raw-insn $tmp/prologue.bin`) {
					next unless /^\s+[0-9a-f]+:\s+(.*?)\s*$/;
					my $insn = $1;
					$push = 1 if $insn =~ /^stp\s+x29, x30, \[sp, #-16\]!$/;
					$sub = hex $1 if $insn =~ /^sub\s+sp, sp, #0x([0-9a-f]+)$/;
					$jump = 1 if $insn =~ /^b\s/ && $last !~ /^b\.eq\s/;
					$last = $insn;
				}
			} else {
				for (`objdump -D -b binary -m i386:x86-64 --no-show-raw-insn $tmp/prologue.bin`) {
					$push = 1 if /^\s+[0-9a-f]+:\s+push\s+%rbp$/;
					$sub = hex $1 if /^\s+[0-9a-f]+:\s+sub\s+\$0x([0-9a-f]+),%rsp$/;
					$jump = 1 if /^\s+[0-9a-f]+:\s+jmp\s/;
				}
			}
			if ($jump) { $skipped++; next }
			# On x86_64 the return address on the stack counts too.
			my $built = $arch eq "aarch64" ? $sub / 8 + 2 * $push : $sub / 8 + 1 + $push;
			if ($built == $words) { $match++; $seen{$name{$id}} = 1 }
			else { push @bad, "$name{$id} at $start: G says $words words, its prologue builds $built (fp pushed: $push, sub $sub)" }
		}
		$match //= 0; $skipped //= 0;
		print "$label: $match prologues build the frame their G line says, ", scalar(@bad), " do not, $skipped skipped (a jump in the prologue)\n";
		print "$_\n" for @bad;
		exit 1 if @bad;
		if ($match < 10) { print "only $match prologues checked\n"; exit 1 }
		for (qw(Workload.hotA Workload.hotB)) { if (!$seen{$_}) { print "the prologue of $_ was not checked\n"; exit 1 } }
	' "$2" "$TMP" "$3" "$(uname -m)" <"$1"
}

# attached JAVA_HOME LABEL: ember attached to a running JVM, its stream read
# while it records (ember removes it at the end: kept open on fd 3).
attached() {
	local java=$1/bin/java label=$2 jvm ember stream=""
	"$java" -XX:CompileThresholdScaling=0.1 -XX:+PrintCompilation -cp "$TMP/classes" Workload 900 >"$TMP/$label.jit" 2>"$TMP/$label.jvm.err" &
	jvm=$!
	BACKGROUND+=($jvm)
	wait_compiled "$TMP/$label.jit" Workload::hotA Workload::hotB Workload::main@
	# --attach-timeout: an emulated JVM beside busy emulators took over 10 s
	# to answer.
	"$EMBER" record -p "$jvm" -d 3 --attach-timeout 120 -o "$TMP/$label.folded" 2>"$TMP/$label.err" &
	ember=$!
	for _ in $(seq 600); do
		stream=$(ls /tmp/ember-"$ember"-*/"$jvm".jitmap 2>/dev/null | head -1)
		[ -n "$stream" ] && exec 3<"$stream" && break
		kill -0 "$ember" 2>/dev/null || break
		sleep 0.05
	done
	wait "$ember" || fail "$label: ember exited $?: $(cat "$TMP/$label.err")"
	[ -n "$stream" ] || fail "$label: the agent's stream never appeared: $(cat "$TMP/$label.err")"
	cat <&3 >"$TMP/$label.jitmap"
	exec 3<&-
	check_stream "$TMP/$label.jitmap" "$label" || fail "$label: the stream's frame geometry"
	# The code as the stream left it: the JVM stopped while its memory is
	# read (code freed after the stream ended could be reused meanwhile).
	kill -STOP "$jvm"
	check_prologues "$TMP/$label.jitmap" "$jvm" "$label" || fail "$label: frame geometry against the code"
	kill -CONT "$jvm"
	grep -qE ', [1-9][0-9]* code-map lines unreadable' "$TMP/$label.err" &&
		fail "$label: ember could not read lines of the stream: $(grep code-map "$TMP/$label.err")"
	kill "$jvm"
	wait "$jvm" 2>/dev/null || true
}

# The JDK of javac (17, Debian's).
attached "$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")" jdk17

# At start-up the agent finds the layout before the code cache is set up.
java -agentpath:"$AGENT=out=$TMP/startup.jitmap" -cp "$TMP/classes" Workload 2 ||
	fail "start-up: the JVM with the agent exited $?"
check_stream "$TMP/startup.jitmap" "jdk17 start-up" || fail "start-up: the stream's frame geometry"

jdk25=$(ls -d /usr/lib/jvm/temurin-25* 2>/dev/null | head -1)
if [ -n "$jdk25" ]; then
	attached "$jdk25" jdk25
else
	echo "no /usr/lib/jvm/temurin-25*: JDK 25 not checked"
fi
