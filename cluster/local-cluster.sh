#!/usr/bin/env bash
# A local 3-node Ray cluster (a head and two workers) for tests and benchmarks, inside a private
# network namespace: every node binds 127.0.0.1 of that namespace, so nothing listens on, or
# sends to, any other interface.
#
#   cluster/local-cluster.sh start DIR   start it; DIR keeps its state (pids, Ray's temp files)
#   cluster/local-cluster.sh run DIR CMD...   run CMD inside the namespace (e.g. cluster/rag-ray)
#   cluster/local-cluster.sh stop DIR    stop every process it started, by pid
#
# Node i (0 = head) listens on 127.0.0.(i+1) and has the custom resource node<i> (to pin work to it) and --num-cpus
# ($RAG_RAY_CPUS, 1). DIR/ns.pid is the namespace's holder process; DIR/node<i>.raylet.pid each
# node's raylet (kill one to fail that node). Needs root (or CAP_SYS_ADMIN) for unshare -n.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|run|stop DIR [CMD...]" >&2; exit 2; }
export RAY_USAGE_STATS_ENABLED=0
port=6379

in_ns() { nsenter -t "$(cat "$dir/ns.pid")" -n -- "$@"; }

# Every process in the namespace (all of them ours: the namespace is private to this cluster).
ns_pids() {
  local ns
  ns="$(readlink "/proc/$(cat "$dir/ns.pid")/ns/net")"
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
  done
  return 0
}

raylets() { for p in $(ns_pids); do [ "$(cat "/proc/$p/comm" 2>/dev/null)" = raylet ] && echo "$p"; done; return 0; }

start() {
  venv="$("$here/setup.sh")"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  [ ! -f "$dir/ns.pid" ] || { echo "$dir already holds a cluster; stop it first" >&2; exit 1; }
  unshare -n sleep infinity </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/ns.pid"
  sleep 0.2
  in_ns ip link set lo up
  # Ray's sockets live under its temp dir: keep the path short (unix sockets allow 107 bytes).
  tmp="$(mktemp -d /tmp/rag-ray.XXXXXX)"
  echo "$tmp" > "$dir/temp-dir"
  local common=(--disable-usage-stats --num-cpus="${RAG_RAY_CPUS:-1}")
  for node in 0 1 2; do
    before="$(raylets)"
    # Node i at 127.0.0.(i+1), all on the namespace's loopback: a driver (at 127.0.0.1) then
    # attaches to the head's raylet, not to a worker's that a test kills.
    ip="--node-ip-address=127.0.0.$((node + 1))"
    if [ "$node" = 0 ]; then
      in_ns "$venv/bin/ray" start --head --port=$port --include-dashboard=false \
        --temp-dir="$tmp" --resources="{\"node$node\": 1}" "$ip" "${common[@]}" >"$dir/node$node.log" 2>&1
    else
      in_ns "$venv/bin/ray" start --address=127.0.0.1:$port \
        --resources="{\"node$node\": 1}" "$ip" "${common[@]}" >"$dir/node$node.log" 2>&1
    fi
    for p in $(raylets); do
      grep -qx "$p" <<<"$before" || echo "$p" > "$dir/node$node.raylet.pid"
    done
  done
  # Each worker registers with the head a moment after `ray start` returns.
  for _ in $(seq 60); do
    [ "$(in_ns "$venv/bin/ray" status --address=127.0.0.1:$port 2>/dev/null | grep -c ' node_')" -ge 3 ] && break
    sleep 0.5
  done
  echo "a 3-node Ray cluster at 127.0.0.1:$port in the network namespace of pid $(cat "$dir/ns.pid") ($dir)"
}

# Waits up to 2 s for the given pids to exit; prints those still alive.
wait_gone() {
  local alive
  for _ in $(seq 20); do
    alive=""
    for p in "$@"; do [ -d "/proc/$p" ] && alive="$alive $p"; done
    [ -z "$alive" ] && return 0
    sleep 0.1
  done
  echo "$alive"
}

stop() {
  [ -f "$dir/ns.pid" ] || { echo "no cluster in $dir"; return 0; }
  # Rounds, in case a dying process started another: SIGTERM (which does not stop gcs_server and
  # the raylets promptly), 2 s, then SIGKILL for what is left.
  for _ in 1 2 3; do
    pids="$(ns_pids | grep -vx "$(cat "$dir/ns.pid")" || true)"
    [ -n "$pids" ] || break
    kill -TERM $pids 2>/dev/null || true
    alive="$(wait_gone $pids)"
    [ -z "$alive" ] || { kill -KILL $alive 2>/dev/null || true; wait_gone $alive >/dev/null; }
  done
  kill -KILL "$(cat "$dir/ns.pid")" 2>/dev/null || true
  [ ! -f "$dir/temp-dir" ] || rm -rf "$(cat "$dir/temp-dir")"
  rm -f "$dir/ns.pid" "$dir/temp-dir" "$dir"/node*.raylet.pid
  echo "stopped the cluster in $dir"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  run) shift 2; RAG_RAY_DRIVER_IP=127.0.0.1 in_ns "$@" ;;
  *) echo "usage: $0 start|run|stop DIR [CMD...]" >&2; exit 2 ;;
esac
