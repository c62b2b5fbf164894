#!/usr/bin/env bash
# Installs, with apt-get, only the packages ember is missing.
#   scripts/deps.sh build   compile ember
#   scripts/deps.sh test    build + cross + run the tests (Catch2, Chromium, Node, playwright-core, perf, sqlite3, strace, qemu)
#   scripts/deps.sh bench   test + bpftrace, GNU time and xz (perf, the other peer the benchmarks compare against, is a test package)
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
# busybox-static, cpio, kmod: the initramfs of the kernel matrix's guests (their emulators below).
# python3: the tests' helpers (a Pyroscope receiver, free ports) and Debian's CPython, whose
# frames ember reads. The cross list: ember built for the matrix's arm64 guest (make ARCH=arm64).
test=(python3 catch2 chromium prometheus util-linux bsdutils golang-go golang-github-google-pprof-dev protobuf-compiler python3-protobuf elfutils libbpfcc-dev libc6-dbg libstdc++6-12-dbg curl jq openssl procps linux-perf sqlite3 strace busybox-static cpio kmod)
# The kernel matrix's emulators, QEMU 8 or later. Debian 12's QEMU 7.2 mis-executes x86 code:
# when the store of a setcc faults (a page's first write), the flags the next jcc reads are
# computed from a value it had discarded; in the 5.15 guest `test eax,eax; setg [mem]; jg`
# stored 1 (eax was 1) and then did not jump (gdb: EFLAGS SF set), one ember run in two. On
# Debian 12 they come from bookworm-backports (QEMU 10). qemu-user-static, qemu-user-binfmt:
# the arm64 guest's package scripts, run by mmdebstrap (scripts/arm64_guest.sh).
emulators=(qemu-system-x86 qemu-system-arm qemu-user-static qemu-user-binfmt)
emulators_min=1:8
bench=(bpftrace time xz-utils)
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

# Emulators older than emulators_min (any release's), replaced from its backports.
old_emulators() {
	local p v
	for p in "${emulators[@]}"; do
		# (dpkg-query fails for a package never installed: not an error here)
		v=$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null | sed -n 's/^install ok installed //p' || true)
		[ -n "$v" ] && dpkg --compare-versions "$v" ge "$emulators_min" || echo "$p${v:+ $v}"
	done
}
if [[ $mode != build && $mode != cross && $mode != deb ]]; then
	mapfile -t old < <(old_emulators)
	if (( ${#old[@]} )); then
		why="the kernel matrix needs QEMU ${emulators_min#*:} or later (Debian 12's 7.2 mis-executes its x86 guests' code)"
		if [ "$(id -u)" != 0 ]; then
			echo "ember: $why; missing or older: ${old[*]}; run as root: sudo scripts/deps.sh $mode (on Debian 12 it installs them from bookworm-backports)" >&2
			exit 1
		fi
		. /etc/os-release
		suite=() from=""
		if [ "${VERSION_CODENAME:-}" = bookworm ]; then
			suite=(-t bookworm-backports) from=" from bookworm-backports"
			list=/etc/apt/sources.list.d/ember-bookworm-backports.sources
			if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d; then
				printf '%s\n' "Types: deb" "URIs: http://deb.debian.org/debian" "Suites: bookworm-backports" \
					"Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >"$list"
			fi
		fi
		echo "ember: installing ${emulators[*]}$from: $why"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${suite[@]}" "${emulators[@]}" >/dev/null
		mapfile -t old < <(old_emulators)
		if (( ${#old[@]} )); then
			echo "ember: $why; apt installed only: ${old[*]}; install QEMU ${emulators_min#*:} or later from another source" >&2
			exit 1
		fi
	fi
fi

if [[ $mode != build && $mode != cross && ! -d tests/browser/node_modules/playwright-core ]]; then
	echo "ember: installing playwright-core for the browser tests"
	(cd tests/browser && npm ci --no-audit --no-fund --silent)
fi
