# The runtimes' builds to test or measure (tests/lib.sh, bench/runtimes.sh):
# functions only. Needs ROOT, the repository.

# The CPython interpreters to test, a path a line: Debian's python3, then
# pyenv's 3.x builds where pyenv is installed (the development machines,
# not a bare one).
cpythons() {
	local root p
	echo /usr/bin/python3
	root=$(pyenv root 2>/dev/null) || return 0
	for p in "$root"/versions/3.*/bin/python3.*; do
		[[ $p =~ python3\.[0-9]+$ ]] && echo "$p"
	done
	return 0
}

# The node binaries to test, a command a line: the node in PATH (Debian's
# nodejs 18 on a bare machine; these machines have Node 20 there), then,
# where that is not Debian's, Debian 12's own nodejs, fetched with
# apt-get download into build/debian-nodejs (never installed). It finds its
# builtins under /usr/share/nodejs, so its launcher overlays the packages'
# /usr/share on the host's, in a mount namespace of its own. Not under the
# emulator: a guest tests the kernel, once.
nodes() {
	local dir=$ROOT/build/debian-nodejs deb v
	command -v node || return 0
	[[ ${EMBER_EMULATED:-} ]] && return 0
	[[ $(node --version) == v18.* ]] && return 0
	if [ ! -x "$dir/node" ]; then
		rm -rf "$dir" && mkdir -p "$dir" || return 0
		# Debian's version: its libnode108's (another node package may
		# stand as nodejs here).
		v=$(apt-cache policy libnode108 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
		[[ $v == 18.* ]] || { echo "note: apt knows no Debian libnode108 (18.x): Debian's nodejs is not tested" >&2; rm -rf "$dir"; return 0; }
		(cd "$dir" && apt-get download -q "nodejs=$v" "libnode108=$v" node-acorn node-cjs-module-lexer node-undici \
			>/dev/null 2>&1) || { echo "note: apt-get download of Debian's nodejs $v failed: it is not tested" >&2; rm -rf "$dir"; return 0; }
		for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$dir/root" && rm "$deb" || return 0; done
		cat >"$dir/node" <<-EOF
		#!/bin/sh
		exec unshare -m --propagation private sh -c 'mount -t overlay overlay -o lowerdir=$dir/root/usr/share:/usr/share /usr/share &&
		LD_LIBRARY_PATH=$dir/root/usr/lib/x86_64-linux-gnu exec $dir/root/usr/bin/node "\$@"' node "\$@"
		EOF
		chmod +x "$dir/node"
	fi
	echo "$dir/node"
}
