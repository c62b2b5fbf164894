#!/usr/bin/env bash
# scripts/arm64_guest.sh DIR: the root file system of the kernel matrix's
# arm64 guest (tests/kernels/matrix.sh debian-6.1-arm64) in DIR: Debian 12
# for arm64 with what the tests run inside (bash, python3, a JDK, node,
# perf, sqlite3, ember's libraries), and the kernel linux-image-arm64
# points at, extracted beside it (DIR/boot/vmlinuz-VERSION and its modules
# in DIR/usr/lib/modules, never installed: its hooks would make an
# initramfs under emulation). Made once: DIR/.ember-guest, written last,
# lists its packages; with another list (this script changed) it is made
# again, else the script returns at once.
# Needs root: mmdebstrap runs the packages' scripts in a chroot, through
# QEMU's static qemu-aarch64 registered with binfmt_misc (registered here if
# not, as systemd-binfmt would).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
dir=$1
# What the structural tests call inside (tests/integration/*.sh, lib.sh,
# guest.sh), ember's libraries, and busybox-static, the initramfs's shell.
# As on the hosts the tests run on: mawk as awk (with gawk, awk is gawk,
# which reads the tests' regular expressions otherwise), and libc6-dbg,
# whose symbols name libc's static functions (__libc_start_call_main).
# mount: Priority required but not Essential, so not in --variant=apt.
packages=(bash mount util-linux procps kmod iproute2 mawk curl jq openssl strace busybox-static
	python3 openjdk-17-jdk-headless nodejs linux-perf sqlite3 bpftool libc6-dbg
	libbpf1 libdw1 libelf1 libdebuginfod1 libcpp-httplib0.11 libssl3 liblzma5 zlib1g libstdc++6 binutils)
[ "$(cat "$dir/.ember-guest" 2>/dev/null)" = "${packages[*]}" ] && exit 0
[ "$(id -u)" = 0 ] || { echo "$0: needs root (mmdebstrap runs the arm64 packages' scripts in a chroot)" >&2; exit 1; }
binfmt=/usr/lib/binfmt.d/qemu-aarch64.conf
for tool in mmdebstrap arch-test qemu-aarch64-static $binfmt dpkg-deb depmod; do
	command -v "$tool" >/dev/null || [ -e "$tool" ] || { echo "$0: no $tool (scripts/deps.sh test installs it)" >&2; exit 1; }
done
# binfmt_misc is not mounted on these machines at boot, so installing
# qemu-user-binfmt may have registered nothing.
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
	[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
	grep -v '^#' "$binfmt" >/proc/sys/fs/binfmt_misc/register
fi
rm -rf "$dir.tmp" "$dir.debs"
mkdir -p "$dir.debs"
# The kernel's package, fetched by the chroot's apt (the host may have no
# arm64 package lists) into DIR.debs.
kernel_hook='set -e; export APT_CONFIG="$MMDEBSTRAP_APT_CONFIG"
pkg=$(apt-cache depends linux-image-arm64 | sed -n "s/.*Depends: \(linux-image-[0-9][^ ]*\).*/\1/p" | head -1)
[ -n "$pkg" ] || { echo "apt knows no linux-image-arm64" >&2; exit 1; }
cd "$EMBER_KERNEL_DEBS" && apt-get download -q -o APT::Sandbox::User=root "$pkg"'
# Documentation and translations left out (not the manuals: the JDK's
# scripts link to them with update-alternatives, which fails without).
EMBER_KERNEL_DEBS=$(realpath "$dir.debs") mmdebstrap --quiet --arch=arm64 --variant=apt \
	--include="$(IFS=,; echo "${packages[*]}")" \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook="$kernel_hook" \
	bookworm "$dir.tmp" \
	"deb http://deb.debian.org/debian bookworm main" \
	"deb http://deb.debian.org/debian bookworm-updates main" \
	"deb http://deb.debian.org/debian-security bookworm-security main"
# The kernel and its modules where a system keeps them (lib is usr/lib in
# bookworm's merged /usr: dpkg-deb -x into the root would replace the link).
deb=$(ls "$dir.debs"/linux-image-*.deb)
dpkg-deb -x "$deb" "$dir.debs/root"
version=$(ls "$dir.debs/root/lib/modules")
mkdir -p "$dir.tmp/boot" "$dir.tmp/usr/lib/modules"
cp "$dir.debs/root/boot/"* "$dir.tmp/boot/"
mv "$dir.debs/root/lib/modules/$version" "$dir.tmp/usr/lib/modules/$version"
depmod -b "$dir.tmp" "$version"
rm -rf "$dir.debs" "$dir"
mv "$dir.tmp" "$dir"
echo "${packages[*]}" >"$dir/.ember-guest"
