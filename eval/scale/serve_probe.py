#!/usr/bin/env python3
"""One `rag serve` of an existing index, measured: time to ready, resident memory (VmRSS, and
its anonymous and file-backed parts) once ready and after the searches, and warm /search
p50 / p99 per request body (issue 53 follow-ups: serve memory with a graph, exact and HNSW
search from one index, efSearch, the second hop's BM25 query).

    eval/scale/serve_probe.py --rag ./rag --index /work/scale-data/n1000000-L3-d64/index-annhnsw32 \\
        --out eval/scale/results/serve/after.json --mode hnsw='{"mode":"dense","ef_search":64}' \\
        [--serve-flag=--hop-query=sentence] [--questions 200]

Questions: the first --questions of the distractor sample. Results are one JSON file per run;
the CPU flags and the load average are recorded beside them (the machine is shared). Run it
niced (the scripts here do); synthetic.py measures its servers with `measure` too.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "eval", "serving"))
from common import Client, percentile, stop, wait_ready  # noqa: E402


def memory(pid):
    """VmRSS, RssAnon, RssFile and VmHWM in MiB."""
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return {key: round(int(status[key].split()[0]) / 1024, 1) for key in ("VmRSS", "RssAnon", "RssFile", "VmHWM")}


def cpu_flags():
    flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0].split()
    return [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "amx_tile") if f in flags]


def start(rag, index, extra=()):
    """`rag serve --no-llm` of `index` on a free loopback port: (process, address)."""
    proc = subprocess.Popen(
        [rag, "serve", "--index", index, "--addr", "127.0.0.1:0", "--no-llm", *extra],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    for line in proc.stderr:
        m = re.search(r"listening on http://(\S+)", line)
        if m:
            return proc, m.group(1)
    stop(proc)
    sys.exit("rag serve did not start")


def measure(rag, index, questions, modes, extra):
    """`rag serve` of `index` (flags `extra`): seconds to ready, warm /search p50 / p99 for each
    body of `modes` ({name: body}), resident memory once ready, after each mode and at the end."""
    started = time.time()
    proc, addr = start(rag, index, extra)
    try:
        wait_ready(addr, timeout=3600)
        ready = memory(proc.pid)
        out = {"ready_s": round(time.time() - started, 2), "rss_ready_mib": ready["VmRSS"],
               "memory_ready_mib": ready, "modes": {}}
        client = Client(addr, timeout=600)
        for name, body in modes.items():
            client.request("POST", "/search", {"query": questions[0], **body})  # warm-up
            times, searches = [], []
            for q in questions:
                t = time.perf_counter()
                status, _, data = client.request("POST", "/search", {"query": q, "k": 5, **body})
                times.append((time.perf_counter() - t) * 1000)
                if status != 200:
                    sys.exit(f"/search {body}: {status} {data[:300]}")
                # The server's own time in the index (no encoding, no queueing): what efSearch
                # and the BM25 query change, less blurred by a loaded machine than the wall time.
                searches.append(json.loads(data)["timings"]["search_ms"])
            out["modes"][name] = {"n": len(times), "p50_ms": round(percentile(times, 50), 2),
                                  "p99_ms": round(percentile(times, 99), 2),
                                  "search_p50_ms": round(percentile(searches, 50), 2),
                                  "search_p99_ms": round(percentile(searches, 99), 2), "request": body,
                                  "memory_after_mib": memory(proc.pid)}
            print(f"serve {name}: p50 {out['modes'][name]['p50_ms']} ms", file=sys.stderr)
        end = memory(proc.pid)
        out["memory_end_mib"] = end
        out["rss_steady_mib"], out["rss_peak_mib"] = end["VmRSS"], end["VmHWM"]
        return out
    finally:
        stop(proc, timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rag", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mode", action="append", default=[], help="NAME=JSON: a /search body to time")
    ap.add_argument("--serve-flag", action="append", default=[], help="extra `rag serve` flag")
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--data", default=os.environ.get("RAG_DATA", os.path.join(ROOT, "..", "shared", "data")))
    args = ap.parse_args()

    sample = os.path.join(args.data, "hotpotqa", "hotpot_dev_distractor_sample.json")
    questions = [r["question"] for r in json.load(open(sample))][: args.questions]
    result = {"rag": args.rag, "index": args.index, "serve_flags": args.serve_flag, "cpu_flags": cpu_flags(),
              "cpus": os.cpu_count(), "load_average_before": list(os.getloadavg())}
    modes = {name: json.loads(body) for name, body in (spec.split("=", 1) for spec in args.mode)}
    result.update(measure(args.rag, args.index, questions, modes, args.serve_flag))
    result["load_average_after"] = list(os.getloadavg())
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    json.dump(result, open(args.out, "w"), indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
