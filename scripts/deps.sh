#!/usr/bin/env bash
# Installs, with apt-get, only the packages ember is missing.
#   scripts/deps.sh build   compile ember
#   scripts/deps.sh test    build + cross + run the tests (Catch2, Chromium, Node, playwright-core, perf, sqlite3, strace, qemu)
#   scripts/deps.sh bench   test + bpftrace and GNU time (perf, the other peer the benchmarks compare against, is a test package)
#   scripts/deps.sh fuzz    test + AFL++ (make fuzz)
#   scripts/deps.sh cross   build + the arm64 cross compilers and mmdebstrap (make ARCH=arm64)
#   scripts/deps.sh deb     build + what makes and checks the Debian package and the agent's image (make deb, make image)
set -euo pipefail
cd "$(dirname "$0")/.."

build=(make g++ clang llvm pkg-config binutils libbpf-dev bpftool libelf-dev libdw-dev libdebuginfod-dev liblzma-dev zlib1g-dev libcli11-dev libcpp-httplib-dev libssl-dev nlohmann-json3-dev libtomlplusplus-dev openjdk-17-jdk-headless)
# elfutils, libbpfcc-dev: oracles for the symbolizer; libc6-dbg, libstdc++6-12-dbg: real
# distribution debug files (by build-id) to read. curl, jq, openssl, procps: the ember serve
# tests' HTTP client, JSON reader, self-signed certificate and pgrep. linux-perf: the unwinding
# tests' reference (perf --call-graph dwarf); sqlite3: a distribution binary without frame pointers;
# strace: holds ember inside a syscall (fsync) for the fault tests to kill it there.
# qemu-system-x86, busybox-static, cpio, kmod: the kernel matrix's guests and their initramfs.
# python3: the tests' helpers (a Pyroscope receiver, free ports) and Debian's CPython, whose
# frames ember reads. qemu-system-arm and the cross list: the matrix's arm64 guest, ember built
# for it (make ARCH=arm64); qemu-user-static, binfmt-support: its root file system's package
# scripts run by mmdebstrap (scripts/arm64_guest.sh).
test=(python3 catch2 chromium prometheus util-linux bsdutils golang-go golang-github-google-pprof-dev protobuf-compiler python3-protobuf elfutils libbpfcc-dev libc6-dbg libstdc++6-12-dbg curl jq openssl procps linux-perf sqlite3 strace qemu-system-x86 busybox-static cpio kmod
	qemu-system-arm qemu-user-static binfmt-support)
bench=(bpftrace time)
fuzz=(afl++)
# mmdebstrap makes the sysroot of Debian's arm64 libraries (scripts/sysroot.sh); arch-test, its check of the architecture.
cross=(g++-aarch64-linux-gnu mmdebstrap arch-test)
# dpkg-dev: dpkg-shlibdeps, the package's Depends; lintian, its check (tests/integration/deb_package.sh);
# mmdebstrap and umoci: the agent's image, a Debian root turned into an OCI image.
deb=(dpkg-dev lintian mmdebstrap umoci)

mode=${1:-build}
case $mode in
build) want=("${build[@]}") ;;
test) want=("${build[@]}" "${test[@]}" "${cross[@]}" "${deb[@]}") ;;
bench) want=("${build[@]}" "${test[@]}" "${cross[@]}" "${deb[@]}" "${bench[@]}") ;;
fuzz) want=("${build[@]}" "${test[@]}" "${cross[@]}" "${deb[@]}" "${fuzz[@]}") ;;
cross) want=("${build[@]}" "${cross[@]}") ;;
deb) want=("${build[@]}" "${deb[@]}") ;;
*) echo "usage: $0 build|test|bench|fuzz|cross|deb" >&2; exit 2 ;;
esac
# Node 20+ (playwright-core's minimum) may come from another repository;
# only ask Debian for it when there is no node at all.
if [[ $mode != build && $mode != cross ]] && ! command -v node >/dev/null; then want+=(nodejs npm); fi

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
	if [ "$(id -u)" != 0 ]; then
		echo "ember: missing packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
		exit 1
	fi
	echo "ember: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ $mode != build && $mode != cross && ! -d tests/browser/node_modules/playwright-core ]]; then
	echo "ember: installing playwright-core for the browser tests"
	(cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
