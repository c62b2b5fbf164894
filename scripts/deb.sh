#!/usr/bin/env bash
# The Debian package of ember, from what make built (make deb):
#   scripts/deb.sh BUILD DEBARCH VERSION [SYSROOT]
# writes BUILD/ember_VERSION_DEBARCH.deb:
#   /usr/lib/ember/ember, libember-agent.so  the binary and its Java agent,
#                                           side by side as ember looks for it
#   /usr/bin/ember                          a link to the binary
#   /usr/share/man/man1/ember*.1.gz         the man pages (man/)
#   /usr/share/doc/ember/                   README.md and docs/, copyright, changelog
#   /lib/systemd/system/ember-agent.service the agent's unit, not enabled: it
#                                           needs its server's URL first
#   /etc/ember/agent.toml                   the agent's configuration, a conffile
# Its Depends are the library packages the binaries link, by name and
# version, as dpkg-shlibdeps finds them (for a cross build, in SYSROOT's
# package database). Built as root-owned files by dpkg-deb, no debhelper.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 arch=$2 version=$3 sysroot=${4:-}
out=$build/ember_${version}_$arch.deb
work=$(realpath -m "$build/deb")
stage=$work/root
rm -rf "$work"
mkdir -p "$stage/DEBIAN"

strip=strip
[[ $arch == arm64 && $(uname -m) != aarch64 ]] && strip=aarch64-linux-gnu-strip
install -d "$stage/usr/lib/ember" "$stage/usr/bin" "$stage/usr/share/man/man1" "$stage/usr/share/doc/ember/docs" \
	"$stage/lib/systemd/system" "$stage/etc/ember"
install -m 0755 "$build/ember" "$stage/usr/lib/ember/ember"
install -m 0644 "$build/libember-agent.so" "$stage/usr/lib/ember/libember-agent.so"
"$strip" --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/lib/ember/ember" \
	"$stage/usr/lib/ember/libember-agent.so"
ln -s ../lib/ember/ember "$stage/usr/bin/ember"
# The version in each page's .TH line is the one built.
for page in man/*.1; do
	sed -E "/^\.TH /s/\"ember [^\"]*\"/\"ember $version\"/" "$page" | gzip -9n >"$stage/usr/share/man/man1/$(basename "$page").gz"
done
install -m 0644 README.md "$stage/usr/share/doc/ember/"
install -m 0644 docs/*.md "$stage/usr/share/doc/ember/docs/"
install -m 0644 deploy/systemd/ember-agent.service "$stage/lib/systemd/system/"
install -m 0644 deploy/agent.toml "$stage/etc/ember/agent.toml"

maintainer="ember developers <dev@ember-profiler.org>"
# The date of the commit built, so that a build is reproducible.
date=$(git log -1 --format=%cD 2>/dev/null || date -R)
{
	echo "ember ($version) bookworm; urgency=medium"
	echo
	echo "  * Built from ember's sources ($(git rev-parse --short HEAD 2>/dev/null || echo "not a git clone"))."
	echo
	echo " -- $maintainer  $date"
} | gzip -9n >"$stage/usr/share/doc/ember/changelog.gz"
cat >"$stage/usr/share/doc/ember/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: ember
Source: https://github.com/ember-profiler/ember

Files: *
Copyright: 2026 the ember developers
License: GPL-2.0 or BSD-2-Clause
 ember is available under either of these licenses, at your choice, as
 its BPF programs say (SPDX: GPL-2.0 OR BSD-2-Clause).
 .
 On Debian systems, the complete text of the GNU General Public License
 version 2 can be found in /usr/share/common-licenses/GPL-2.
 .
 Redistribution and use in source and binary forms, with or without
 modification, are permitted provided that the following conditions are
 met:
 .
 1. Redistributions of source code must retain the above copyright
    notice, this list of conditions and the following disclaimer.
 .
 2. Redistributions in binary form must reproduce the above copyright
    notice, this list of conditions and the following disclaimer in the
    documentation and/or other materials provided with the distribution.
 .
 THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS
 "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT
 LIMITED TO, THE IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A
 PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT
 HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
 SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED
 TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
 PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF
 LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING
 NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS
 SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
EOF

# Depends: the packages of the libraries the binaries link (dpkg-shlibdeps
# wants a source package's debian/control around it).
shlibs=$work/shlibs
mkdir -p "$shlibs/debian"
printf 'Source: ember\n\nPackage: ember\nArchitecture: any\n' >"$shlibs/debian/control"
admin=() libs=()
if [[ -n $sysroot ]]; then
	admin=(--admindir="$sysroot/var/lib/dpkg")
	libs=(-l"$sysroot/usr/lib/aarch64-linux-gnu" -l"$sysroot/lib/aarch64-linux-gnu")
fi
depends=$(cd "$shlibs" && DEB_HOST_ARCH=$arch dpkg-shlibdeps -O "${admin[@]}" "${libs[@]}" \
	-e"$stage/usr/lib/ember/ember" -e"$stage/usr/lib/ember/libember-agent.so" 2>"$work/shlibdeps.err" |
	sed -n 's/^shlibs:Depends=//p') || { cat "$work/shlibdeps.err" >&2; exit 1; }
[[ -n $depends ]] || { echo "deb: dpkg-shlibdeps found no dependencies: $(cat "$work/shlibdeps.err")" >&2; exit 1; }

cat >"$stage/DEBIAN/control" <<EOF
Package: ember
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Section: devel
Priority: optional
Homepage: https://github.com/ember-profiler/ember
Description: system-wide profiler for Linux: eBPF, Java, Python and Node.js
 ember samples the kernel and user stacks of every process of the host
 with eBPF, without frame pointers, and names every frame: kernel, native,
 Java (through its own JVMTI agent, with default JVM flags), Python and
 Node.js. It writes interactive HTML flamegraphs, folded stacks, pprof and
 OpenTelemetry profiles, records CPU, off-CPU, wall-clock, lock and
 allocation profiles, analyses Java heaps, serves a web UI, and runs as an
 agent that ships profiles to Grafana Pyroscope or an OpenTelemetry
 collector.
EOF
echo /etc/ember/agent.toml >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# ember-agent.service is installed, not enabled: it needs its server's URL
# (/etc/ember/agent.toml) first.
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
EOF
cat >"$stage/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# Purged: the agent's spool and state go too (StateDirectory=ember).
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
	rm -rf /var/lib/ember
fi
EOF
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/postrm"
(cd "$stage" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | LC_ALL=C sort -z |
	xargs -0 md5sum) >"$work/md5sums"
mv "$work/md5sums" "$stage/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "  wrote $out"
