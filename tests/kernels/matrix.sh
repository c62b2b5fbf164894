#!/usr/bin/env bash
# The kernel matrix: boots each kernel under qemu with the host's root
# shared read-only, runs the integration tests of kind structural inside
# (tests/kernels/guest.sh), and prints a line per kernel:
#   kernel NAME: P passed, F failed, S skipped
#   kernel NAME: skipped: REASON        (its image or emulator cannot be had here)
# then, for a kernel with failures or no result, the guest's log.
# Usage: tests/kernels/matrix.sh [NAME...]   (default: DEFAULT below)
#   MATRIX_FILTER=WORD[,WORD...]: only the structural scripts whose name
#   holds one of the words (without it, the 5.15 guest runs KERNEL_TESTS,
#   the 6.1 guest DEBIAN61_TESTS, the 6.1-rt guest RT_TESTS, the arm64 guest
#   ARM64_TESTS)
#   EMBER_ARM64_GUEST=DIR: the arm64 guest's root file system (made there
#   if missing; default /var/cache/ember/arm64-guest)
# Kernels: debian-6.1 and debian-6.1-rt (Debian 12's packages, fetched with
# apt-get download and extracted under build/kernels, never installed),
# 5.15 and 5.10 (../shared/kernels), and debian-6.1-arm64: Debian 12's arm64
# kernel under qemu-system-aarch64, on a Debian 12 arm64 root file system
# (scripts/arm64_guest.sh, made once into /var/cache/ember/arm64-guest)
# with ember's arm64 build (make ARCH=arm64 guest-build) as the checkout's
# build/. The host's own kernel is the host suite.
# TCG (these machines' KVM cannot boot a stock kernel): timings are not a
# real machine's, so only structural tests run here.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
WORK=$ROOT/build/kernels
SHARED=$ROOT/../shared/kernels
ALL=(debian-6.1 debian-6.1-rt 5.15 5.10 debian-6.1-arm64)
# What `make test` boots: all of them, the longest guests first, so that
# the two at a time end together (here the arm64 guest, with its root file
# system made first on a new machine, takes the longest, then 5.10; 6.1-rt
# and 5.15, with fewer tests, the least). In CI's rehearsal on a slow host
# (an emulated CPU there ran at half the speed of others), while the host's
# tests ran beside them: arm64 36 minutes, 5.10 23, 6.1 12, 5.15 6 and
# 6.1-rt 5 with the lists below.
DEFAULT=(debian-6.1-arm64 5.10 debian-6.1 5.15 debian-6.1-rt)
# A lane's list names scripts by a word of their name: "record_malloc.sh"
# is that script alone, "record_malloc" would be record_malloc_age and
# record_malloc_python too.
# 5.10 runs every structural test. 5.15 lies between
# them: the helpers 5.10 lacks (bpf_get_current_task_btf, task_pt_regs)
# it has, as 6.1 does, and before 6.1 it needs the unwinder's table
# preallocated, as 5.10 does; so its guest runs what its verifier, BTF
# and tracepoints decide (every program loaded, blocks, locks, malloc's
# uprobes, cgroups, windows, unwinding through libc), not again the
# runtimes over the same programs (Java, Python, JavaScript, the agent's
# push): 9 minutes less of guest time.
KERNEL_TESTS=bpf_programs,record_lock,record_malloc.sh,record_offcpu_waker.sh,record_window_events,record_cgroup,unwind_offcpu_libc,unwind_system_binary
# Debian 12's 6.1 (x86_64): what its verifier, helpers and BTF decide, as
# 5.15, and Java on it (the JVM walkers' reads and the agent's attach on the
# kernel most hosts run). Not again Python, JavaScript and the agent's
# push: their programs are loaded here by bpf_programs, and they run over
# the same 6.1 in the arm64 guest and over x86_64 in 5.10's: 4 minutes
# less of guest time, off the end of CI's run (the host's tests done, the
# guests then take both CPUs).
DEBIAN61_TESTS=$KERNEL_TESTS,java_default_jvm
# 6.1-rt has 6.1's verifier, helpers and BTF: its programs are 6.1's. What
# PREEMPT_RT changes is how they run (sleeping spinlocks, preemptible
# tracepoints and uprobes, threaded interrupts), so its guest runs the tests
# of that, and not again what is user space over the same programs (Java,
# Python and JavaScript frames, --cgroup, the agent).
RT_TESTS=bpf_programs,record_lock,record_malloc.sh,record_offcpu_waker.sh,record_window_events,unwind_offcpu_libc,unwind_system_binary
# The arm64 guest runs what differs on arm64: the programs' registers and
# verifier, its system call entry and interrupts in kernel stacks, user
# stacks through Debian's arm64 binaries and libc, the thread pointer
# Python's frames are found by, a JVM's and node's code and the registers
# V8's frames are read from (--lines), the agent. Not what is the same code
# over the same kernel interfaces as on 6.1 (--cgroup, --window).
ARM64_TESTS=bpf_programs,unwind_system_binary,unwind_offcpu_libc,record_malloc.sh,record_offcpu_waker.sh,record_lock,java_default_jvm,java_jit_windows,java_jit_stubs,java_frame_geometry,record_python,record_node.sh,record_node_lines,agent_push
# The arm64 guest's root file system (scripts/arm64_guest.sh), outside the
# checkout as the cross build's sysroot is.
ARM64_ROOT=${EMBER_ARM64_GUEST:-/var/cache/ember/arm64-guest}
# Seconds a guest may take (MATRIX_LIMIT): 200 to 1,000 s each, two at a
# time, beside the host's tests (tests/run.sh), which slow them twofold;
# then it dumps its tasks and powers off.
LIMIT=${MATRIX_LIMIT:-3600}
names=("$@")
(($#)) || names=("${DEFAULT[@]}")
mkdir -p "$WORK"

# image NAME: sets kernel (the bzImage) and mods (its lib/modules/VERSION,
# or empty), or sets why (why not) and fails.
image() {
	local name=$1 meta pkg deb dir
	mods="" kernel="" why=""
	case $name in
	5.10 | 5.15)
		kernel=$(ls "$SHARED"/vmlinuz-"$name".* 2>/dev/null | head -1)
		[ -n "$kernel" ] || { why="no $SHARED/vmlinuz-$name.*"; return 1; }
		return 0 ;;
	debian-6.1) meta=linux-image-amd64 ;;
	debian-6.1-rt) meta=linux-image-rt-amd64 ;;
	debian-6.1-arm64)
		arm64_image
		return ;;
	*) why="unknown kernel (known: ${ALL[*]})"; return 1 ;;
	esac
	# The package the metapackage points at now, e.g. linux-image-6.1.0-56-amd64.
	pkg=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$pkg" ] || { why="apt-cache knows no $meta (apt-get update?)"; return 1; }
	dir=$WORK/$pkg
	if [ ! -e "$dir/.extracted" ]; then
		rm -rf "$dir" && mkdir -p "$dir"
		(cd "$dir" && apt-get download -q "$pkg" >/dev/null 2>&1) || { why="apt-get download $pkg failed"; return 1; }
		deb=$(ls "$dir"/*.deb)
		dpkg-deb -x "$deb" "$dir/root" && rm -f "$deb" || { why="cannot extract $deb"; return 1; }
		touch "$dir/.extracted"
	fi
	kernel=$(ls "$dir"/root/boot/vmlinuz-* | head -1)
	mods=$(ls -d "$dir"/root/lib/modules/* | head -1)
}

# arm64_image: image's part for the arm64 guest: its root file system,
# made here the first time and when scripts/arm64_guest.sh lists other
# packages (a few minutes, beside the host's tests), the
# kernel and modules in it, and ember's arm64 build.
arm64_image() {
	local log=$WORK/arm64-guest.log
	[ -x "$ROOT/build/arm64/ember" ] || { why="no build/arm64/ember (make ARCH=arm64 guest-build)"; return 1; }
	if ! "$ROOT/scripts/arm64_guest.sh" "$ARM64_ROOT" >"$log" 2>&1; then
		why="cannot make its root file system: $(tail -n 1 "$log") (all of it in $log)"
		return 1
	fi
	kernel=$(ls "$ARM64_ROOT"/boot/vmlinuz-* 2>/dev/null | head -1)
	mods=$(ls -d "$ARM64_ROOT"/usr/lib/modules/* 2>/dev/null | head -1)
	[ -n "$kernel" ] && [ -n "$mods" ] || { why="no kernel in $ARM64_ROOT/boot (remove it to make it again)"; return 1; }
}

# initramfs NAME OUT: busybox and, for a kernel with modules, those that
# reach the host's root (virtio-pci, 9p, overlay) with their modules.dep.
# The arm64 guest's busybox is its root file system's (busybox-static).
initramfs() {
	local name=$1 out=$2 tree busybox=/bin/busybox
	[[ $name == *-arm64 ]] && busybox=$ARM64_ROOT/bin/busybox
	tree=$(mktemp -d)
	mkdir -p "$tree"/{bin,proc,sys,dev}
	cp "$busybox" "$tree/bin/busybox"
	for tool in sh mount umount mkdir sed modprobe switch_root; do ln -s busybox "$tree/bin/$tool"; done
	cp "$ROOT/tests/kernels/initramfs_init" "$tree/init"
	if [ -n "$mods" ]; then
		local version=${mods##*/} m
		mkdir -p "$tree/lib/modules/$version"
		for m in drivers/virtio fs/9p fs/netfs fs/fscache fs/overlayfs net/9p; do
			[ -d "$mods/kernel/$m" ] || continue
			mkdir -p "$tree/lib/modules/$version/kernel/$m"
			cp -r "$mods/kernel/$m/." "$tree/lib/modules/$version/kernel/$m/"
		done
		cp "$mods"/modules.builtin* "$mods"/modules.order "$tree/lib/modules/$version/" 2>/dev/null
		depmod -b "$tree" "$version"
	fi
	(cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
	rm -rf "$tree"
}

# stuck_cpus OUT: where each vCPU of a guest that stopped answering is
# (qemu's monitor: RIP, and its symbol from the kernel's symbols the guest
# saved as it booted, with nokaslr). A guest whose kernel is stuck cannot
# dump itself.
stuck_cpus() {
	local out=$1
	python3 - "$out/monitor.sock" "$out/kallsyms" <<'PY'
import bisect, os, re, socket, sys, time
sock, path = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sock)
    s.sendall(b"info registers -a\n")
    time.sleep(2)
    text = s.recv(1 << 20).decode(errors="replace")
except OSError as e:
    print("    no answer from qemu's monitor: %s" % e)
    sys.exit()
syms = []
if os.path.exists(path):
    for line in open(path):
        a, t, n = line.split()[:3]
        if t in "tTwW": syms.append((int(a, 16), n))
    syms.sort()
for cpu, rip in enumerate(re.findall(r"\b(?:RIP|PC)=([0-9a-f]+)", text)):
    addr = int(rip, 16)
    i = bisect.bisect_right(syms, (addr, "~")) - 1
    where = "%s+0x%x" % (syms[i][1], addr - syms[i][0]) if i >= 0 and addr - syms[i][0] < 1 << 20 else "?"
    print("    vCPU %d at %s (%s)" % (cpu, rip, where))
PY
}

# boot NAME: runs the guest; its log in $WORK/results/NAME/guest.log.
boot() {
	local name=$1 out=$WORK/results/$1 machine root append qemu waited=0 filter=${MATRIX_FILTER:-}
	[[ $name == 5.15 && -z $filter ]] && filter=$KERNEL_TESTS
	[[ $name == debian-6.1 && -z $filter ]] && filter=$DEBIAN61_TESTS
	[[ $name == *-rt && -z $filter ]] && filter=$RT_TESTS
	[[ $name == *-arm64 && -z $filter ]] && filter=$ARM64_TESTS
	rm -rf "$out" && mkdir -p "$out"
	initramfs "$name" "$WORK/$name.initrd"
	append="panic=-1 loglevel=4 nokaslr emberguest=$ROOT/tests/kernels/guest.sh emberlimit=$LIMIT emberfilter=$filter embersrc=$ROOT"
	if [[ $name == *-arm64 ]]; then
		# -cpu max signs return addresses with QARMA, which TCG emulates
		# three times slower than pauth-impdef's cipher (Debian's kernel
		# signs every one). No SVE: with it perf 6.1 cannot record
		# --call-graph dwarf ("PMU Hardware doesn't support
		# sampling/overflow-interrupts"), the unwinding tests' reference;
		# many arm64 servers have none. Root: the arm64 file system (tag
		# rootfs), the checkout (tag src) put at its path on the host and
		# its build/arm64 as build/ (initramfs_init, guest.sh); the
		# modules are the root's.
		machine=(qemu-system-aarch64 -M virt -accel tcg,thread=multi -cpu max,pauth-impdef=on,sve=off)
		append="console=ttyAMA0 $append embermods=none emberroot=rootfs emberbuild=build/arm64"
		root=(-virtfs "local,id=rootfs,path=$ARM64_ROOT,mount_tag=rootfs,security_model=none,readonly=on,multidevs=remap"
			-virtfs "local,id=src,path=$ROOT,mount_tag=src,security_model=none,readonly=on,multidevs=remap")
	else
		# no_timer_check: an emulated CPU on a busy host is too slow for the
		# kernel's check of the IO-APIC timer at boot, which then panics.
		# Real KVM boots stock kernels (not this PVM one, see ../shared/notes/kernels.md).
		machine=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max)
		if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then machine=(qemu-system-x86_64 -enable-kvm -cpu host); fi
		append="console=ttyS0 $append no_timer_check embermods=${mods:-none}"
		root=(-virtfs local,id=hostroot,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap)
	fi
	"${machine[@]}" -smp 1 -m 3G -nographic -no-reboot -nic none \
		-kernel "$kernel" -initrd "$WORK/$name.initrd" \
		-monitor "unix:$out/monitor.sock,server,nowait" -serial "file:$out/console.log" \
		-append "$append" "${root[@]}" \
		-virtfs local,id=out,path="$out",mount_tag=out,security_model=none,multidevs=remap \
		</dev/null >"$out/qemu.log" 2>&1 &
	qemu=$!
	# The guest's own watchdog ends it after LIMIT; one that has not is stuck.
	while kill -0 $qemu 2>/dev/null && ((waited < LIMIT + 60)); do
		sleep 1
		waited=$((waited + 1))
	done
	if kill -0 $qemu 2>/dev/null; then
		echo "    the guest did not stop in $((LIMIT + 60)) s: its kernel is stuck" >"$out/stuck.txt"
		stuck_cpus "$out" >>"$out/stuck.txt"
		kill -KILL $qemu
	fi
	wait $qemu 2>/dev/null
}

# showed NAME: what a guest without a result showed: its console, where
# its vCPUs were stuck, the end of its log.
showed() {
	local out=$WORK/results/$1
	{ tail -n 80 "$out/console.log"; cat "$out/stuck.txt"; tail -n 150 "$out/guest.log"; } 2>/dev/null | sed 's/^/    /'
}

# run_kernel NAME: boots NAME's guest (once more if it gave no result) and
# prints its line, and its log where it failed.
run_kernel() {
	local name=$1 start log line need needs=(qemu-system-x86_64 busybox cpio depmod)
	[[ $name == *-arm64 ]] && needs=(qemu-system-aarch64 cpio depmod)
	why=""
	for need in "${needs[@]}"; do
		command -v "$need" >/dev/null || { why="no $need (scripts/deps.sh test installs it)"; break; }
	done
	[[ $why ]] || image "$name"
	if [[ $why ]]; then echo "kernel $name: skipped: $why"; return; fi
	start=$SECONDS
	log=$WORK/results/$name/guest.log
	boot "$name"
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" 2>/dev/null | tail -1)
	if [ -z "$line" ]; then
		# A guest that hung, said with what it showed, and booted once more:
		# its emulator or kernel may be at fault as much as the test.
		echo "kernel $name: no result in $((SECONDS - start)) s; booted again. What it showed:"
		showed "$name"
		start=$SECONDS
		boot "$name"
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" 2>/dev/null | tail -1)
	fi
	if [ -z "$line" ]; then
		echo "kernel $name: 0 passed, 1 failed, 0 skipped (no result in $((SECONDS - start)) s, twice)"
		showed "$name"
		return
	fi
	echo "kernel $name ($(sed -n 's/^kernel //p' "$log" | head -1), $((SECONDS - start)) s): $line"
	[[ $line == *" 0 failed"* ]] || grep -vE '^ok ' "$log" | sed 's/^/    /'
}

# Guests of one vCPU, as many at once as the host has CPUs. With two vCPUs
# a guest's kernel now and then stopped for good (three times in about
# fifteen runs, 6.1 and 6.1-rt, in different tests): one vCPU waiting in
# smp_call_function_many_cond for the other to take an IPI, as it patched
# kernel text for a tracepoint (text_poke_bp), the other going round
# through the int3 planted there and never taking it. An emulator's fault,
# as far as can be told (ember's attach does what every tracer's does); a
# guest of one vCPU sends no IPI.
JOBS=$(nproc)
for name in "${names[@]}"; do
	while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
	run_kernel "$name" >"$WORK/$name.report" 2>&1 &
done
wait
for name in "${names[@]}"; do cat "$WORK/$name.report"; done
