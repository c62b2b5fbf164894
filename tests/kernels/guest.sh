#!/bin/bash
# PID 1 of a matrix guest, on the host's root (read-only over 9p): makes a
# system the tests can run in (the kernel's file systems, writable /tmp,
# /var, /root and checkout, the kernel's own modules, loopback), runs the
# integration tests of kind structural (tests/run.sh --kind structural),
# or those its filter names, writes their output to the results share, and
# powers off.
# The kernel command line says where and what: embersrc=CHECKOUT
# embermods=DIR (the extracted package's lib/modules/VERSION, or none),
# emberlimit=SECONDS (then it dumps its tasks), emberfilter=WORD,... (the
# scripts whose name holds one of the words, of any kind; empty: all
# structural ones), emberbuild=DIR
# (the checkout's DIR seen as its build/: build/arm64 in the arm64 guest,
# whose root is a system of its own, see initramfs_init).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb
off() { sync; echo o >/proc/sysrq-trigger; sleep 10; }
trap off EXIT
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
ln -sf /proc/self/fd /dev/fd; ln -sf fd/0 /dev/stdin; ln -sf fd/1 /dev/stdout; ln -sf fd/2 /dev/stderr
for d in /run /tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup
arg() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" /proc/cmdline; }
src=$(arg embersrc) mods=$(arg embermods) build=$(arg emberbuild) root=$(arg emberroot)
mkdir -p /run/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /run/out || { echo "ember-matrix: no results share"; exit 1; }
exec >/run/out/guest.log 2>&1
# The kernel's text symbols, for the host to name where a stuck guest's
# CPUs are (matrix.sh's stuck_cpus).
awk '$2 ~ /^[tT]$/' /proc/kallsyms >/run/out/kallsyms
# A guest that hangs (a test the per-script timeout cannot end, a kernel
# deadlock, a stuck share) shows where before the host's timeout
# (matrix.sh) kills qemu: first on the console (console.log, not over 9p)
# the blocked tasks and every CPU's backtrace, then here each user task's
# state and kernel stack; then it powers off.
(
	sleep "$(arg emberlimit)"
	echo 1 >/proc/sys/kernel/sysrq
	echo w >/proc/sysrq-trigger
	echo l >/proc/sysrq-trigger
	echo "ember-matrix: no result after $(arg emberlimit) s; the user tasks:"
	for task in /proc/[0-9]*/task/[0-9]*; do
		cmd=$({ tr '\0' ' ' <"$task/cmdline"; } 2>/dev/null | head -c 120)
		[ -n "$cmd" ] || continue  # a kernel thread
		echo "${task#/proc/} $cmd[$(awk '{ print $3 }' "$task/stat")]"
		sed 's/^/    /' "$task/stack" 2>/dev/null
	done
	echo o >/proc/sysrq-trigger
) &
# Writable where the tests write: a tmpfs upper over each.
overlay() {
	local dir=$1 n=$2
	mkdir -p "/run/ov/$n/upper" "/run/ov/$n/work"
	mount -t overlay overlay -o "lowerdir=$dir,upperdir=/run/ov/$n/upper,workdir=/run/ov/$n/work" "$dir"
}
overlay /var var
overlay /root root
overlay /etc etc
# On a root of its own (emberroot=, see initramfs_init) the checkout is at
# /ember-checkout: at its path on the host from here, once the file systems
# above are in place (it may lie under /tmp, /var or /root).
if [ -n "$root" ]; then
	mkdir -p "$src" && mount --bind /ember-checkout "$src" || { echo "ember-matrix: cannot put the checkout at $src"; exit 1; }
fi
overlay "$src" src
# tests/lib.sh runs $ROOT/build/ember: there, this architecture's build.
if [ -n "$build" ]; then
	mount --bind "$src/$build" "$src/build" || { echo "ember-matrix: no $src/$build"; exit 1; }
fi
version=$(uname -r)
# The kernel's modules where modprobe looks (the host may have no
# /usr/lib/modules at all).
if [ -d "$mods" ]; then
	if [ -d /usr/lib/modules ]; then overlay /usr/lib/modules modules; else overlay /usr/lib usrlib; fi
	mkdir -p "/usr/lib/modules/$version"
	mount --bind "$mods" "/usr/lib/modules/$version"
fi
hostname ember-guest
ip link set lo up
echo "kernel $version"
cd "$src" || exit 1
# Scripts whose fixed work takes minutes under emulation do less of it.
export EMBER_EMULATED=1
# A lane's list (emberfilter) names its tests, whatever their kind.
if [[ $(arg emberfilter) ]]; then
	tests/run.sh --integration --verbose "$(arg emberfilter)"
else
	tests/run.sh --kind structural --verbose
fi
echo "exit $?"
