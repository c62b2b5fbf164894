#!/usr/bin/env bash
# scripts/sysroot.sh ARCH DIR: the headers and libraries of Debian 12 that
# ember links, for ARCH (arm64), extracted into DIR for a cross build
# (make ARCH=arm64). mmdebstrap --variant=extract unpacks the packages and
# their dependencies and runs none of their scripts: nothing of the host's
# own packages changes (multiarch :arm64 packages would move the host's to
# their versions).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# = 2 ] || { echo "usage: $0 ARCH DIR" >&2; exit 2; }
arch=$1 dir=$2
scripts/deps.sh cross
packages=(libc6-dev libstdc++-12-dev libbpf-dev libelf-dev libdw-dev libdebuginfod-dev liblzma-dev zlib1g-dev
	libssl-dev libcpp-httplib-dev libbrotli-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev)
rm -rf "$dir.tmp"
mkdir -p "$(dirname "$dir")"
mmdebstrap --quiet --arch="$arch" --variant=extract --include="$(IFS=,; echo "${packages[*]}")" bookworm "$dir.tmp" \
	"deb http://deb.debian.org/debian bookworm main" \
	"deb http://deb.debian.org/debian bookworm-updates main" \
	"deb http://deb.debian.org/debian-security bookworm-security main"
rm -rf "$dir"
mv "$dir.tmp" "$dir"
touch "$dir/.ember-sysroot"
