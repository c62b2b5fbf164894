#!/usr/bin/env bash
# The Debian package (make deb) as a user installs it: lintian finds no
# error, warning or pedantic tag (its info tags are explained in
# docs/install.md); into a fresh Debian 12 root made from Debian's
# packages (mmdebstrap), `apt-get install ./ember_*.deb` pulls the
# dependencies; in that root (a chroot with the host's /proc, /sys, /dev)
# `ember record -d 1 -o x.html` writes a flamegraph, `ember --version` says
# the package's version, `man ember` shows the page; `apt-get remove`
# leaves only the conffile, and `apt-get purge` nothing of ember at all.
. "$(dirname "$0")/../lib.sh"
need_bpf
version=$(cat "$ROOT/VERSION")
deb=$(ls "$ROOT"/build/ember_"$version"_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "no build/ember_${version}_*.deb: make test-build (or make deb) makes it"
command -v mmdebstrap >/dev/null || fail "no mmdebstrap: scripts/deps.sh test installs it"
command -v lintian >/dev/null || fail "no lintian: scripts/deps.sh test installs it"

lintian --pedantic "$deb" >"$TMP/lintian" 2>&1
grep -E '^[EWP]: ' "$TMP/lintian" && fail "lintian: $(grep -E '^[EWP]: ' "$TMP/lintian")"
echo "lintian: no error, warning or pedantic tag"

# A Debian 12 root with apt and man, made once and kept as a tarball
# (a minute's download on a fresh machine).
base=/var/cache/ember/deb-test-root.tar
packages="man-db,ca-certificates"
if [ ! -s "$base" ] || [ "$(cat "$base.packages" 2>/dev/null)" != "$packages" ]; then
	mkdir -p "$(dirname "$base")"
	mmdebstrap --quiet --variant=apt --include="$packages" bookworm "$base.tmp.tar" \
		"deb http://deb.debian.org/debian bookworm main" \
		"deb http://deb.debian.org/debian bookworm-updates main" \
		"deb http://deb.debian.org/debian-security bookworm-security main" >"$TMP/mmdebstrap.log" 2>&1 ||
		fail "mmdebstrap: $(tail -5 "$TMP/mmdebstrap.log")"
	mv "$base.tmp.tar" "$base"
	echo "$packages" >"$base.packages"
fi
R=$TMP/root
mkdir "$R"
tar -C "$R" -xf "$base"
cp /etc/resolv.conf "$R/etc/resolv.conf"
# in_root CMD...: CMD in the root, with the host's /proc, /sys and /dev
# mounted in a mount namespace of its own: gone with it, never left under
# $TMP for its removal to walk into.
in_root() {
	unshare --mount --propagation private -- sh -c '
		r=$1
		shift
		for m in proc sys dev; do mount --rbind "/$m" "$r/$m"; done
		exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"' sh "$R" "$@"
}

cp "$deb" "$R/tmp/"
in_root apt-get update -qq >"$TMP/apt.log" 2>&1 || fail "apt-get update: $(tail -5 "$TMP/apt.log")"
in_root apt-get install -y -qq --no-install-recommends man-db >/dev/null 2>&1
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" \
	>"$TMP/install.log" 2>&1 || fail "apt-get install ./$(basename "$deb"): $(tail -10 "$TMP/install.log")"
in_root dpkg-query -W -f='${Status} ${Version}\n' ember | grep -qx "install ok installed $version" ||
	fail "ember is not installed: $(in_root dpkg-query -W ember 2>&1)"
# The dependencies came from Debian, not from this host.
for lib in libbpf1 libdw1 libcpp-httplib0.11; do
	in_root dpkg-query -W -f='${Status}\n' $lib | grep -q 'ok installed' || fail "$lib was not installed with ember"
done

in_root ember --version | grep -qx "ember $version" || fail "ember --version: $(in_root ember --version 2>&1)"
in_root ember record -d 1 -o /tmp/x.html >"$TMP/record.out" 2>&1 || fail "ember record in the root: $(cat "$TMP/record.out")"
grep -q '</html>' "$R/tmp/x.html" || fail "no flamegraph written"
assert_contains "$TMP/record.out" '^  samples +[1-9]' "no samples: $(cat "$TMP/record.out")"
echo "ember record -d 1 in the installed root: $(grep -E '^  samples' "$TMP/record.out")"
in_root man -P cat ember >"$TMP/man" 2>&1 || fail "man ember: $(head -3 "$TMP/man")"
assert_contains "$TMP/man" 'system-wide' "man ember does not show ember(1): $(head -5 "$TMP/man")"
in_root man -P cat ember-record | grep -q -- '--freq' || fail "man ember-record does not show its options"
[ "$(readlink -f "$R/usr/bin/ember")" = "$R/usr/lib/ember/ember" ] && [ -f "$R/usr/lib/ember/libember-agent.so" ] ||
	fail "the binary and its Java agent are not side by side in /usr/lib/ember"
[ -f "$R/lib/systemd/system/ember-agent.service" ] || fail "no systemd unit"
grep -q '^ExecStart=/usr/bin/ember agent --config /etc/ember/agent.toml$' "$R/lib/systemd/system/ember-agent.service" ||
	fail "the unit does not run the installed binary"

# Removed: of what the package installed (dpkg -L, less the directories
# others share) only the conffile stays; purged, nothing, nor anything
# else named ember.
ours=$(in_root dpkg -L ember | while read -r f; do [ -d "$R$f" ] || echo "$f"; done)
[[ $ours == */usr/lib/ember/ember* ]] || fail "dpkg -L ember: $ours"
present() { local f; for f in $ours; do [ -e "$R$f" ] || [ -L "$R$f" ] && echo "$f"; done; find "$R" -xdev -name '*ember*' \
	! -path "$R/tmp/*" ! -path "$R/var/lib/dpkg/*" ! -path "$R/var/cache/*" ! -path "$R/var/lib/apt/*" ! -path "$R/var/log/*" | sed "s|^$R||"; }
in_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq ember >"$TMP/remove.log" 2>&1 || fail "apt-get remove: $(tail -5 "$TMP/remove.log")"
left=$(present | sort -u)
[ "$left" = "$(printf '/etc/ember\n/etc/ember/agent.toml')" ] || fail "apt-get remove left more (or less) than the conffile: $left"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq ember >"$TMP/purge.log" 2>&1 || fail "apt-get purge: $(tail -5 "$TMP/purge.log")"
left=$(present | sort -u)
[ -z "$left" ] || fail "apt-get purge left: $left"
echo "installed, ran, removed (the conffile kept), purged (nothing left)"
