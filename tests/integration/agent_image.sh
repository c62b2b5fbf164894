#!/usr/bin/env bash
# The fleet agent's image (make image) run as the DaemonSet of
# deploy/kubernetes runs it: the DaemonSet names this version's image; the
# archive unpacks as a runtime unpacks it (umoci); its entry point with the
# DaemonSet's arguments runs in its root file system, read-only but for
# the volumes (/etc/ember from a ConfigMap, /var/lib/ember, /tmp), with the
# host's pids, /proc, /sys and /dev and only the DaemonSet's capabilities;
# the test's Pyroscope receiver gets a CPU period of a spinner on this
# host, labelled with the node's name; SIGTERM ends the agent with exit 0.
. "$(dirname "$0")/../lib.sh"
need_bpf
version=$(cat "$ROOT/VERSION")
image=$(ls "$ROOT"/build/ember-agent_"$version"_*.oci.tar 2>/dev/null | head -1)
[ -n "$image" ] || fail "no build/ember-agent_${version}_*.oci.tar: make test-build (or make image) makes it"
command -v umoci >/dev/null || fail "no umoci: scripts/deps.sh test installs it"
yaml=$ROOT/deploy/kubernetes/ember-agent.yaml
grep -qE "^ +image: ember-agent:$version\$" "$yaml" || fail "the DaemonSet does not name ember-agent:$version: $(grep image: "$yaml")"

mkdir "$TMP/oci"
tar -C "$TMP/oci" -xf "$image"
umoci unpack --image "$TMP/oci:$version" "$TMP/bundle" >/dev/null 2>"$TMP/err" || fail "umoci unpack: $(cat "$TMP/err")"
R=$TMP/bundle/rootfs
# The entry point, from the image's runtime configuration; the arguments,
# the DaemonSet's (which replace the image's command).
entry=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["process"]["args"][0])' "$TMP/bundle/config.json")
[ "$entry" = /usr/bin/ember ] || fail "the image's entry point is $entry"
args=$(sed -nE 's/^ +args: \[(.*)\]$/\1/p' "$yaml" | tr -d '",' | sed 's/\$(NODE_NAME)/test-node/')
[[ $args == "agent --config /etc/ember/agent.toml --host test-node" ]] || fail "the DaemonSet's args: $args"
caps=$(sed -nE 's/^ +add: \[(.*)\]$/\1/p' "$yaml" | tr -d ' ' | tr 'A-Z' 'a-z' | sed 's/\([a-z_]*\)/+\1/g')
[[ $caps == *+bpf*+perfmon* ]] || fail "no capabilities read from the DaemonSet: $caps"

RECV_PORT=$(free_port)
background python3 "$ROOT/tests/tools/pyroscope_receiver.py" --port "$RECV_PORT" --out "$TMP/received" >"$TMP/receiver.log" 2>&1
mkdir -p "$TMP/config" "$TMP/state"
cat >"$TMP/config/agent.toml" <<CONF
period = "2s"
frequency = 99
events = ["cpu"]

[server]
url = "http://127.0.0.1:$RECV_PORT"

[spool]
dir = "/var/lib/ember/spool"

[java]
attach = false

[[relabel]]
action = "keep"
label = "service_name"
regex = "spinner"
CONF
background "$WORKLOADS/spinner" 600
# The container: a mount namespace whose root is the image's, read-only,
# with the volumes; chroot, then only the DaemonSet's capabilities (no
# CAP_SYS_ADMIN, no CAP_SYS_CHROOT) for the entry point.
unshare --mount --propagation private -- sh -c '
	r=$1 config=$2 state=$3 caps=$4
	shift 4
	mkdir -p "$r/var/lib/ember"
	mount --bind "$r" "$r"
	for m in proc sys dev; do mount --rbind "/$m" "$r/$m"; done
	mount --bind "$config" "$r/etc/ember"
	mount --bind "$state" "$r/var/lib/ember"
	mount -t tmpfs tmpfs "$r/tmp"
	mount -o remount,bind,ro "$r"
	exec chroot "$r" /usr/bin/setpriv --bounding-set=-all,"$caps" --inh-caps=-all -- "$@"' \
	sh "$R" "$TMP/config" "$TMP/state" "$caps" "$entry" $args 2>"$TMP/agent.log" &
AGENT=$!
BACKGROUND+=($AGENT)
cpu_periods() { grep -F '"service_name": "spinner"' "$TMP/received/log.jsonl" 2>/dev/null | grep -cF '"__name__": "process_cpu"'; }
for _ in $(seq 1200); do
	(($(cpu_periods) >= 1)) && break
	kill -0 $AGENT 2>/dev/null || fail "the agent exited: $(cat "$TMP/agent.log")"
	sleep 0.1
done
(($(cpu_periods) >= 1)) || fail "no CPU period of the spinner in 120 s: $(cat "$TMP/agent.log")"
kill -TERM $AGENT
wait $AGENT
rc=$?
[ $rc = 0 ] || fail "the agent exited $rc after SIGTERM: $(tail -5 "$TMP/agent.log")"
grep -F '"service_name": "spinner"' "$TMP/received/log.jsonl" | grep -qF '"host": "test-node"' ||
	fail "the period is not labelled with the node's name: $(head -3 "$TMP/received/log.jsonl")"
grep -q '"error"' "$TMP/received/log.jsonl" && fail "the receiver refused a request: $(grep '"error"' "$TMP/received/log.jsonl")"
echo "image $(basename "$image") ($(du -m "$image" | cut -f1) MiB): $(cpu_periods) CPU periods of the spinner pushed from its root file system with the DaemonSet's capabilities"
