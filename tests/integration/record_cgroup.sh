#!/usr/bin/env bash
# kind: structural
# --cgroup keeps the tasks of a cgroup (v2) and of the cgroups below it,
# and nothing else, in every event: workloads in a test cgroup and in a
# child cgroup of it are recorded (CPU samples, blocks, allocations), the
# same workloads outside (copies named outside_*) are not; the summary
# names both cgroups from the records' cgroup ids; PATH is taken relative
# to the cgroup2 mount or as a directory under it. A JVM outside the
# cgroup gets no agent (one inside does).
. "$(dirname "$0")/../lib.sh"
need_bpf
mount=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
[ -n "$mount" ] || skip "cgroup v2 is not mounted (no cgroup2 line in /proc/self/mountinfo)"
name=ember-test.$$
cg=$mount/$name
remove_cgroups() {
	# A cgroup goes once its last process is reaped.
	wait 2>/dev/null
	for _ in $(seq 50); do
		rmdir "$cg/child" "$cg" 2>/dev/null
		[ -d "$cg" ] || return 0
		sleep 0.1
	done
	echo "FAIL: cgroup $cg left behind: $(cat "$cg"/cgroup.procs "$cg"/child/cgroup.procs 2>/dev/null)"
	exit 1
}
at_exit remove_cgroups
mkdir "$cg" "$cg/child" || skip "cannot make a cgroup under $mount"

# in_cgroup DIR CMD...: CMD in the background, in cgroup DIR from its first instruction.
in_cgroup() {
	local dir=$1
	shift
	background sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$dir" "$@"
}
stop_background() {
	kill "${BACKGROUND[@]}" 2>/dev/null
	wait 2>/dev/null
	BACKGROUND=()
}
for w in spinner alloc_service offcpu_waits; do cp "$WORKLOADS/$w" "$TMP/outside_${w%%_*}"; done

# They run until stopped. Under emulation (the kernel matrix: one slow
# CPU) they run niced, or ember's start-up beside them takes minutes.
nice=0
[[ ${EMBER_EMULATED:-} ]] && nice=5
in_cgroup "$cg" nice -n $nice "$WORKLOADS/spinner" 900
spinner_pid=${BACKGROUND[-1]}
in_cgroup "$cg/child" nice -n $nice "$WORKLOADS/alloc_service" 900
alloc_pid=${BACKGROUND[-1]}
in_cgroup "$cg/child" nice -n $nice "$WORKLOADS/offcpu_waits" 2000 10
background nice -n $nice "$TMP/outside_spinner" 900
background nice -n $nice "$TMP/outside_alloc" 900
background nice -n $nice "$TMP/outside_offcpu" 2000 10
sleep 0.3

# Until each of the cgroup's busy processes has had 2 s of CPU: a fixed
# -d 4 gave them 0.6 s in an emulated guest beside the copies outside.
record_for_cpu --cgroup "$name" 2 "$spinner_pid,$alloc_pid" -e cpu-clock,offcpu,malloc --alloc-interval 16384 -o "$TMP/in.folded" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
for g in cpu-clock offcpu malloc; do
	assert_absent "$TMP/in.$g.folded" '^outside_' "$g: a process outside the cgroup recorded: $(grep '^outside_' "$TMP/in.$g.folded" | head -2)"
	assert_absent "$TMP/in.$g.folded" '^ember' "$g: ember recorded itself"
done
# At 99 Hz, 2 s of CPU is about 200 samples each.
spin=$(weight "$TMP/in.cpu-clock.folded" '^spinner;')
alloc=$(weight "$TMP/in.cpu-clock.folded" '^alloc_service;')
(( spin >= 20 && alloc >= 20 )) || fail "too few samples of the cgroup's processes: spinner $spin, alloc_service (child cgroup) $alloc: $(cat "$TMP/err")"
assert_contains "$TMP/in.offcpu.folded" '^offcpu_waits;.*waitA' "offcpu: the child cgroup's sleeper missing"
mallocs=$(sed -nE 's/^  malloc .* in ([0-9]+) samples.*/\1/p' "$TMP/err")
(( ${mallocs:-0} >= 20 )) || fail "malloc: ${mallocs:-no} samples of the child cgroup's allocations, expected at least 20: $(cat "$TMP/err")"
grep -qE "^  cgroup +[0-9]+ records in /$name\$" "$TMP/err" || fail "no summary line for /$name: $(cat "$TMP/err")"
grep -qE "^  cgroup +[0-9]+ records in /$name/child\$" "$TMP/err" || fail "no summary line for /$name/child: $(cat "$TMP/err")"
echo "cgroup $name: spinner $spin samples, alloc_service (child) $alloc; $(grep -c . "$TMP/in.offcpu.folded") blocked stacks, $mallocs allocation samples"

# What follows is ember's own handling of paths and JVMs, the same on
# every kernel, and minutes of work under emulation: on the host only.
[[ ${EMBER_EMULATED:-} ]] && { echo "the cgroup by its directory and the JVM part run on the host only"; exit 0; }

# The child alone, by its directory.
"$EMBER" record --cgroup "$cg/child" -d 2 -o "$TMP/child.folded" 2>"$TMP/err" || fail "child: ember exited $?: $(cat "$TMP/err")"
assert_absent "$TMP/child.folded" '^(spinner|outside_)' "--cgroup DIR/child: a process outside it recorded"
assert_contains "$TMP/child.folded" '^alloc_service;' "--cgroup DIR/child: alloc_service missing"
stop_background

# A JVM in the cgroup gets the agent, one outside does not.
java_classes "$TMP/classes"
in_cgroup "$cg" java -cp "$TMP/classes" Workload 900
jvm_in=${BACKGROUND[-1]}
background java -cp "$TMP/classes" Workload 900
jvm_out=${BACKGROUND[-1]}
for jvm in "$jvm_in" "$jvm_out"; do
	for _ in $(seq 300); do
		[ -e "/tmp/hsperfdata_root/$jvm" ] && grep -q Workload "/proc/$jvm/cmdline" 2>/dev/null && break
		sleep 0.1
	done
	[ -e "/tmp/hsperfdata_root/$jvm" ] || fail "JVM $jvm did not start in 30 s"
done
"$EMBER" record --cgroup "$name" -d 1 -o "$TMP/java.folded" 2>"$TMP/err" || fail "java: ember exited $?: $(cat "$TMP/err")"
has_agent() { grep -qF "$ROOT/build/libember-agent.so" "/proc/$1/maps"; }
has_agent "$jvm_in" || fail "the JVM in the cgroup ($jvm_in) got no agent: $(cat "$TMP/err")"
has_agent "$jvm_out" && fail "the JVM outside the cgroup ($jvm_out) got the agent"
echo "JVM $jvm_in (inside) attached, JVM $jvm_out (outside) untouched"
