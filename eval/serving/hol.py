#!/usr/bin/env python3
"""Head-of-line blocking (issue 54, item 22): /search latency while bulk embedding work is
queued. Starts `rag serve` (the binary given, on 127.0.0.1, an OS-picked port), measures idle
/search latency, then runs `--clients` threads that send `--texts`-paragraph /v1/embeddings
requests back to back while one client sends searches one after another, for `--seconds`.
A search still waiting at the end counts with the time it has waited so far (a lower bound).
The server is stopped by its pid (SIGTERM, then SIGKILL) and the run is bounded by --seconds
plus a few seconds. Writes a JSON result with the load average and CPU flags. Standard library only.

    eval/serving/hol.py --rag ./rag --index index/default --label after --out eval/serving/hol/after.json
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import DEFAULT_QUESTIONS, Client, percentile, questions, stop, wait_ready  # noqa: E402


def paragraphs(path, count, max_chars):
    """HotpotQA context paragraphs (sentences joined), short enough for the encoder's limit."""
    with open(path) as f:
        records = json.load(f)
    out = []
    for r in records:
        for _, sentences in r["context"]:
            text = "".join(sentences).strip()
            if 200 <= len(text) <= max_chars:
                out.append(text)
                if len(out) == count:
                    return out
    return out


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    return sorted(f for f in flags if f.startswith("avx"))


def start_server(rag, index, extra):
    proc = subprocess.Popen(
        [rag, "serve", "--index", index, "--addr", "127.0.0.1:0", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.match(r"listening on http://(\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, m.group(1)
    stop(proc)
    raise SystemExit(f"rag serve did not start: {proc.returncode}")


def summary(ms):
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rag", required=True, help="the rag binary to measure")
    ap.add_argument("--index", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--idle-searches", type=int, default=20)
    ap.add_argument("--max-chars", type=int, default=900)
    ap.add_argument("--serve-flag", action="append", default=[], help="extra `rag serve` flag")
    args = ap.parse_args()

    texts = paragraphs(DEFAULT_QUESTIONS, args.texts, args.max_chars)
    qs = questions(DEFAULT_QUESTIONS, 500)
    load_before = os.getloadavg()
    proc, addr = start_server(args.rag, args.index, args.serve_flag)
    try:
        health = wait_ready(addr, timeout=300)
        search = Client(addr, timeout=args.seconds + 60)
        idle = []
        for q in qs[: args.idle_searches]:
            t = time.perf_counter()
            status, _, body = search.request("POST", "/search", {"query": q, "k": 5})
            assert status == 200, body
            idle.append((time.perf_counter() - t) * 1000)

        end = time.time() + args.seconds
        stopping = threading.Event()
        bulk = {"requests": 0, "texts": 0, "errors": [], "ms": []}
        lock = threading.Lock()

        def embed():
            client = Client(addr, timeout=args.seconds + 600)
            while not stopping.is_set() and time.time() < end:
                t = time.perf_counter()
                try:
                    status, _, body = client.request("POST", "/v1/embeddings", {"input": texts})
                except OSError as e:
                    with lock:
                        bulk["errors"].append(str(e))
                    return
                with lock:
                    if status == 200:
                        bulk["requests"] += 1
                        bulk["texts"] += len(texts)
                        bulk["ms"].append((time.perf_counter() - t) * 1000)
                    else:
                        bulk["errors"].append(f"{status}: {body[:200]!r}")

        threads = [threading.Thread(target=embed, daemon=True) for _ in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # the bulk requests are queued and encoding
        loaded, censored, errors = [], [], []
        pending = {}

        def searches():
            i = 0
            while time.time() < end:
                q = qs[i % len(qs)]
                i += 1
                t = time.perf_counter()
                pending["since"] = t
                try:
                    status, _, body = search.request("POST", "/search", {"query": q, "k": 5})
                except OSError as e:
                    errors.append(str(e))
                    return
                finally:
                    pending.pop("since", None)
                if status == 200:
                    loaded.append((time.perf_counter() - t) * 1000)
                else:
                    errors.append(f"{status}: {body[:200]!r}")

        searcher = threading.Thread(target=searches, daemon=True)
        searcher.start()
        searcher.join(timeout=max(0.0, end - time.time()) + 1.0)
        since = pending.get("since")
        if since is not None:
            censored.append((time.perf_counter() - since) * 1000)
        stopping.set()
        load_after = os.getloadavg()
        # Bulk progress the server reports (a 256-text request can outlast the run).
        status, _, metrics = Client(addr, timeout=30).request("GET", "/metrics")
        encoded_texts = next((float(l.split()[1]) for l in metrics.decode().splitlines()
                              if l.startswith("rag_embed_batched_texts_total ")), None)
        with lock:  # what was done by the end; requests cut short by the stop are not errors
            done = {k: list(v) if isinstance(v, list) else v for k, v in bulk.items()}
    finally:
        stop(proc)

    all_waits = loaded + censored
    result = {
        "label": args.label,
        "rag": args.rag,
        "index": args.index,
        "documents": health["index"]["documents"],
        "encoder": health["models"]["encoder"].get("name"),
        "precision": health["models"]["encoder"].get("precision"),
        "serve_flags": args.serve_flag,
        "clients": args.clients,
        "texts_per_request": len(texts),
        "seconds": args.seconds,
        "idle_search": summary(idle),
        "search_under_bulk": summary(all_waits),
        "searches_unfinished_at_end": len(censored),
        "search_errors": errors[:5],
        "bulk": {
            "requests_done": done["requests"],
            "texts_done": done["texts"],
            "texts_per_s": round(done["texts"] / args.seconds, 1),
            "request_ms": summary(done["ms"]),
            "errors": done["errors"][:5],
            "texts_encoded_by_server": encoded_texts,
            "texts_encoded_note": "rag_embed_batched_texts_total at the end, searches included; "
                                  "a server that encodes a request in one pass counts it when the pass starts",
        },
        "target_p99_ms": 250,
        "meets_target": bool(all_waits) and percentile(all_waits, 99) <= 250,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
        "cpu_flags": cpu_flags(),
        "note": "measured on a shared machine loaded by other jobs (see load averages)",
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({k: result[k] for k in ("label", "idle_search", "search_under_bulk", "bulk", "load_average_before")}, indent=1))


if __name__ == "__main__":
    main()
