"""rag-ray: builds and evaluates a sharded rag index on a Ray cluster.

Scheduling only: every shard is one Ray task that runs the `rag` binary on some node
(`rag index --shard i/n`, `rag eval --shard i/n`), on storage all nodes share; the driver then
runs `rag index --merge` / `rag eval --from-hits` itself. Ranking, merging and checking are
rag's, never repeated here. A task whose node dies is run again on another node (Ray's
max_retries); rag's builds resume from their last checkpoint and write atomically, so a retry
redoes at most one chunk. A task whose rag exits with an error is not retried: rag's errors
(bad flags, damaged input) would only repeat; its one-line error is reported.

    rag-ray index --index DIR --shards N [options] [-- rag index flags]
    rag-ray eval  --index DIR [options] [-- rag eval flags]
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import ray

PR_SET_PDEATHSIG = 1


def die_with_parent():
    """Runs in the child before exec: rag gets SIGKILL when its Ray worker dies (a node lost),
    so that no orphan keeps writing beside the retry."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@ray.remote(num_cpus=1)
def run_shard(command, cwd, log_dir, name):
    """Runs one shard's rag command; returns what the driver reports."""
    attempt = uuid.uuid4().hex[:8]
    log_path = os.path.join(log_dir, f"{name}.{attempt}.log")
    started = time.time()
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
        )
        _, status, usage = os.wait4(child.pid, 0)
    with open(log_path, errors="replace") as log:
        lines = [line.strip() for line in log if line.strip() and "\r" not in line]
    context = ray.get_runtime_context()
    return {
        "shard": name,
        "exit": os.waitstatus_to_exitcode(status),
        "seconds": time.time() - started,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "node_id": context.get_node_id(),
        "attempt": attempt,
        "last_line": lines[-1] if lines else "",
    }


def node_names():
    """Node id -> a readable name: its node<i> custom resource, else its address."""
    names = {}
    for node in ray.nodes():
        pinned = sorted(r for r in node.get("Resources", {}) if r.startswith("node") and r[4:].isdigit())
        names[node["NodeID"]] = pinned[0] if pinned else node.get("NodeManagerAddress", "?")
    return names


def find_rag(given):
    for candidate in [given, os.environ.get("RAG_BIN"), os.path.join(os.path.dirname(__file__), "..", "rag")]:
        if candidate and os.path.exists(candidate):
            return os.path.abspath(candidate)
    found = shutil.which("rag")
    if not found:
        sys.exit("rag-ray: no rag binary (pass --rag PATH, set RAG_BIN, or run scripts/setup.sh)")
    return found


def run_local(command):
    """Runs rag here (the merge steps); exits with its error on failure."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"rag-ray: {' '.join(command[1:3])} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    return done.stdout


def run_shards(args, count, command_for, what):
    """Submits one task per shard, reports each as it completes; returns the results and the
    attempts made (each attempt leaves its log: retries are attempts beyond one per shard)."""
    os.makedirs(args.log_dir, exist_ok=True)
    for stale in os.listdir(args.log_dir):
        if stale.startswith("shard-") and stale.endswith(".log"):
            os.remove(os.path.join(args.log_dir, stale))
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    task = run_shard.options(max_retries=args.retries, scheduling_strategy="SPREAD")
    pending = {
        task.remote(command_for(i), os.getcwd(), args.log_dir, f"shard-{i}-of-{count}"): i
        for i in range(count)
    }
    print(f"rag-ray: {what}: {count} shard tasks submitted to {nodes} node(s)", file=sys.stderr, flush=True)
    results, names = [], node_names()
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(ready[0])
        try:
            result = ray.get(ready[0])
        except ray.exceptions.RayError as error:
            sys.exit(f"rag-ray: shard {i}/{count} failed after {args.retries} retries: {str(error).splitlines()[0]}")
        if result["exit"] != 0:
            sys.exit(f"rag-ray: shard {i}/{count}: {result['last_line']} (log: {args.log_dir})")
        results.append(result)
        node = names.get(result["node_id"]) or node_names().get(result["node_id"], result["node_id"][:8])
        result["node"] = node
        print(
            f"[{len(results)}/{count}] shard {i}/{count} done on {node} in {result['seconds']:.1f} s, "
            f"peak {result['peak_rss_mb']:.0f} MB: {result['last_line']}",
            file=sys.stderr,
            flush=True,
        )
    attempts = sum(1 for f in os.listdir(args.log_dir) if f.endswith(".log") and f.startswith("shard-"))
    return results, attempts


def index(args, extra):
    count = args.shards
    rag = find_rag(args.rag)
    results, attempts = run_shards(
        args,
        count,
        lambda i: [rag, "index", "--shard", f"{i}/{count}", "--index", args.index, *extra],
        f"building {args.index}",
    )
    merged = json.loads(run_local([rag, "index", "--merge", "--index", args.index, "--json"]))
    return results, attempts, merged, (
        f"built {count} shards of {merged['documents']} documents into {args.index} "
        f"(generation {merged['generation']})"
    )


def evaluate(args, extra):
    with open(os.path.join(args.index, "shards.json")) as f:
        count = len(json.load(f)["shards"])
    rag = find_rag(args.rag)
    hits = args.hits_dir or os.path.join(args.log_dir, "hits")
    shutil.rmtree(hits, ignore_errors=True)
    results, attempts = run_shards(
        args,
        count,
        lambda i: [rag, "eval", "--index", args.index, "--shard", f"{i}/{count}", "--hits-dir", hits, *extra],
        f"evaluating {args.index}",
    )
    summary = json.loads(
        run_local([rag, "eval", "--index", args.index, "--from-hits", hits, "--json", *extra])
    )
    return results, attempts, summary, f"evaluated {count} shards of {args.index}, hits merged by rag eval --from-hits"


def main():
    parser = argparse.ArgumentParser(prog="rag-ray", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ["index", "eval"]:
        sub = commands.add_parser(name, help=f"rag {name}, one Ray task per shard")
        sub.add_argument("--index", required=True, help="the sharded index, on storage every node shares")
        if name == "index":
            sub.add_argument("--shards", type=int, required=True, help="how many shards")
        else:
            sub.add_argument("--hits-dir", help="where the shards' hits go (default: <log-dir>/hits)")
        sub.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "127.0.0.1:6379"), help="the Ray cluster (head's GCS)")
        sub.add_argument(
            "--driver-ip",
            default=os.environ.get("RAG_RAY_DRIVER_IP"),
            help="this machine's node address, where several nodes share one machine",
        )
        sub.add_argument("--rag", help="the rag binary, at the same path on every node (default: $RAG_BIN, the checkout's ./rag, PATH)")
        sub.add_argument("--retries", type=int, default=3, help="runs of a shard's task again after its node is lost (3)")
        sub.add_argument("--log-dir", help="each attempt's rag output (default: <index>.rag-ray/)")
        sub.add_argument("--json", action="store_true", help="print the summary as JSON")
    args, extra = parser.parse_known_args()
    if extra and extra[0] == "--":
        extra = extra[1:]
    if args.command == "index" and args.shards < 1:
        sys.exit("rag-ray: --shards must be at least 1")
    args.index = os.path.abspath(args.index)
    args.log_dir = os.path.abspath(args.log_dir or args.index.rstrip("/") + ".rag-ray")
    started = time.time()
    # Ray's own messages go to stderr with the progress lines: stdout is the summary alone.
    summary_out, sys.stdout = sys.stdout, sys.stderr
    ray.init(
        address=args.address,
        _node_ip_address=args.driver_ip,
        logging_level="ERROR",
        log_to_driver=False,
    )
    try:
        results, attempts, rag_summary, line = (index if args.command == "index" else evaluate)(args, extra)
    finally:
        ray.shutdown()
        sys.stdout = summary_out
    seconds = time.time() - started
    retries = attempts - len(results)
    summary = {
        "command": args.command,
        "index": args.index,
        "shards": sorted(results, key=lambda r: r["shard"]),
        "attempts": attempts,
        "retries": retries,
        "seconds": seconds,
        "rag": rag_summary,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"rag-ray: {line} in {seconds:.1f} s ({retries} task retries)")


if __name__ == "__main__":
    main()
