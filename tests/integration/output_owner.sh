#!/usr/bin/env bash
# Outputs under sudo belong to the user who ran it: record, convert and
# diff, run as root with SUDO_UID and SUDO_GID set as sudo sets them, leave
# their files to that user (nobody here), 0644 at most, with nothing beside
# them, and that user can then change them. sudo itself is not run: it
# would need a non-root account allowed to use it, which a test machine
# should not be given; its part is only to set those two variables.
. "$(dirname "$0")/../lib.sh"
need_bpf
command -v setpriv >/dev/null || skip "no setpriv (scripts/deps.sh test installs util-linux)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
uid=$(id -u nobody) gid=$(id -g nobody)
umask 022

# The user's own directory, which they can reach.
chmod 711 "$TMP"
OUT=$TMP/home
mkdir "$OUT"
chown "$uid:$gid" "$OUT"
as_sudo() { SUDO_UID=$uid SUDO_GID=$gid SUDO_USER=nobody "$EMBER" "$@"; }
# owned_by_user FILE...: nobody's, mode 644, and nobody can change it.
owned_by_user() {
	local f
	for f in "$@"; do
		[ "$(stat -c '%u:%g %a' "$f")" = "$uid:$gid 644" ] || fail "$f: $(stat -c '%U:%G %a' "$f"), not nobody's with mode 644"
		setpriv --reuid="$uid" --regid="$gid" --clear-groups -- sh -c 'echo >>"$1"' sh "$f" 2>"$TMP/err" ||
			fail "nobody cannot change its $f: $(cat "$TMP/err")"
	done
}

"$EMBER" record -F 299 -o "$TMP/in.folded" -- "$WORKLOADS/cpu_split" 1 2>"$TMP/err" || fail "record: $(cat "$TMP/err")"
[ "$(stat -c %u "$TMP/in.folded")" = 0 ] || fail "without SUDO_UID the output is not root's: $(stat -c %U "$TMP/in.folded")"

# An output left by root before is replaced by one of the user's.
cp "$TMP/in.folded" "$OUT/out.html"
as_sudo record -d 1 -o "$OUT/out.html" -- true 2>"$TMP/err" || fail "record: $(cat "$TMP/err")"
as_sudo convert "$TMP/in.folded" -o "$OUT/out.pb.gz" 2>"$TMP/err" || fail "convert to pprof: $(cat "$TMP/err")"
as_sudo convert "$TMP/in.folded" -o "$OUT/out.folded" 2>"$TMP/err" || fail "convert to folded: $(cat "$TMP/err")"
as_sudo diff "$TMP/in.folded" "$TMP/in.folded" -o "$OUT/diff.html" 2>"$TMP/err" || fail "diff: $(cat "$TMP/err")"
# A umask of 0 does not make an output writable by others.
(umask 0 && as_sudo convert "$TMP/in.folded" -o "$OUT/wide.html") 2>"$TMP/err" || fail "convert with umask 0: $(cat "$TMP/err")"
owned_by_user "$OUT/out.html" "$OUT/out.pb.gz" "$OUT/out.folded" "$OUT/diff.html" "$OUT/wide.html"
left=$(cd "$OUT" && ls -A | sort | xargs)
[ "$left" = "diff.html out.folded out.html out.pb.gz wide.html" ] || fail "files beside the outputs: $left"
echo "ok: outputs under sudo"
