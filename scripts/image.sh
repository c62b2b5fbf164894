#!/usr/bin/env bash
# The fleet agent's OCI image (make image), from Debian's packages and
# ember's own, with no container registry:
#   scripts/image.sh BUILD DEBARCH VERSION DEB
# writes BUILD/ember-agent_VERSION_DEBARCH.oci.tar, an OCI image archive
# (skopeo's oci-archive:, podman load, ctr images import) tagged VERSION:
# a minimal Debian 12 root made by mmdebstrap from Debian's archive with
# the package DEB installed (man pages and documentation left out, but the
# copyright files), turned into an image by umoci; its entry point
# /usr/bin/ember, its command `agent --config /etc/ember/agent.toml`.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 arch=$2 version=$3 deb=$4
out=$build/ember-agent_${version}_$arch.oci.tar
work=$(realpath -m "$build/image")
rm -rf "$work"
mkdir -p "$work"
# The package goes in by apt inside the root (copied there: mmdebstrap's
# --include of a local .deb fails when dpkg runs chrooted), which fetches
# its dependencies from Debian's archive.
mmdebstrap --quiet --arch="$arch" --variant=minbase \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook="copy-in $(realpath "$deb") /tmp" \
	--customize-hook="chroot \"\$1\" apt-get install -y -qq --no-install-recommends /tmp/$(basename "$deb") >/dev/null" \
	--customize-hook='rm -rf "$1"/tmp/*.deb "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
	bookworm "$work/rootfs.tar" \
	"deb http://deb.debian.org/debian bookworm main" \
	"deb http://deb.debian.org/debian bookworm-updates main" \
	"deb http://deb.debian.org/debian-security bookworm-security main"

image=$work/oci:$version
umoci init --layout "$work/oci"
umoci new --image "$image"
umoci unpack --image "$image" "$work/bundle" >/dev/null
tar -C "$work/bundle/rootfs" -xf "$work/rootfs.tar"
umoci repack --image "$image" "$work/bundle"
umoci config --image "$image" --os=linux --architecture="$arch" --config.user=0:0 --config.workingdir=/ \
	--config.entrypoint=/usr/bin/ember --config.cmd=agent --config.cmd=--config --config.cmd=/etc/ember/agent.toml \
	--config.label=org.opencontainers.image.title=ember-agent \
	--config.label=org.opencontainers.image.version="$version" \
	--config.label=org.opencontainers.image.source=https://github.com/ember-profiler/ember
umoci gc --layout "$work/oci"
tar -C "$work/oci" --sort=name --owner=0 --group=0 --numeric-owner -cf "$out" .
rm -rf "$work/bundle" "$work/rootfs.tar"
echo "  wrote $out ($(du -m "$out" | cut -f1) MiB)"
