#!/usr/bin/env python3
"""Load test for `rag serve`: throughput and p50/p90/p99 latency per route at several client
counts, bounded in time and requests; or a soak of mixed requests that samples the server's
memory. Standard library only; clients are threads with one keep-alive connection each.

    eval/serving/load.py --addr 127.0.0.1:8080 --routes embeddings,search --concurrency 1,8,32 --duration 20
    eval/serving/load.py --addr 127.0.0.1:8080 --soak 600 --pid $(pgrep -n rag) --concurrency 8

Writes eval/serving/default/load.json (or soak.json) unless --out says otherwise. The client shares the
machine's cores with the server, so its own overhead is part of what is measured.
"""

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import DEFAULT_QUESTIONS, DEFAULT_SENTENCES, Client, questions, sentences, server_errors, wait_ready  # noqa: E402


def payload(route, question, mode):
    if route == "embeddings":
        return "/v1/embeddings", {"input": question}
    if route == "search":
        return "/search", {"query": question, "k": 5, "mode": mode}
    if route == "ask":
        return "/ask", {"question": question, "top_k": 3}
    raise SystemExit(f"unknown route {route}")


def run(addr, routes, concurrency, duration, max_requests, texts, mode, seed):
    """`concurrency` clients send requests (route chosen at random from `routes`) until
    `duration` seconds or `max_requests` in all; returns per-request (route, status, seconds)."""
    results, lock = [], threading.Lock()
    sent = [0]
    stop_at = time.time() + duration

    def client(i):
        rng = random.Random(seed * 1000 + i)
        conn = Client(addr)
        while time.time() < stop_at:
            with lock:
                if sent[0] >= max_requests:
                    break
                sent[0] += 1
            route = rng.choice(routes)
            path, body = payload(route, rng.choice(texts[route]), mode)
            started = time.perf_counter()
            try:
                status, _, _ = conn.request("POST", path, body)
            except OSError as e:
                status = f"connection error: {e.__class__.__name__}"
                conn.close()
            with lock:
                results.append((route, status, time.perf_counter() - started))
        conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(concurrency)]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.time() - started


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarise(results, wall, concurrency):
    rows = []
    for route in sorted({r for r, _, _ in results}):
        mine = [(s, t) for r, s, t in results if r == route]
        ok = sorted(t for s, t in mine if s == 200)
        statuses = {}
        for s, _ in mine:
            statuses[str(s)] = statuses.get(str(s), 0) + 1
        rows.append({
            "route": route, "concurrency": concurrency, "requests": len(mine), "ok": len(ok),
            "statuses": statuses, "seconds": round(wall, 3),
            "throughput_rps": round(len(ok) / wall, 2) if wall > 0 else 0.0,
            "p50_ms": round(percentile(ok, 0.50) * 1000, 2),
            "p90_ms": round(percentile(ok, 0.90) * 1000, 2),
            "p99_ms": round(percentile(ok, 0.99) * 1000, 2),
        })
    return rows


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def soak(args, texts):
    """Mixed requests for --soak seconds at the first concurrency, sampling the server's RSS."""
    samples, done = [], threading.Event()
    began = time.time()

    def sample():
        while not done.is_set():
            samples.append((round(time.time() - began, 1), rss_kib(args.pid)))
            done.wait(args.sample_every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    results, wall = run(args.addr, args.routes, args.concurrency[0], args.soak, args.max_requests,
                        texts, args.mode, args.seed)
    done.set()
    sampler.join()
    samples.append((round(time.time() - began, 1), rss_kib(args.pid)))
    # Memory after warm-up (the first tenth: caches fill, allocator settles) against the end.
    warm = [kib for t, kib in samples if t >= args.soak * 0.1] or [samples[-1][1]]
    growth = (max(warm) - warm[0]) / warm[0]
    report = {
        "kind": "soak", "addr": args.addr, "routes": args.routes, "concurrency": args.concurrency[0],
        "seconds": round(wall, 1), "rows": summarise(results, wall, args.concurrency[0]),
        "rss_kib": samples, "rss_after_warmup_kib": warm[0], "rss_max_kib": max(warm),
        "rss_growth": round(growth, 4), "memory_flat": growth <= 0.10,
        "server_5xx": server_errors(args.addr),
    }
    print(f"soak {wall:.0f}s: RSS {warm[0] / 1024:.1f} MiB after warm-up, max {max(warm) / 1024:.1f} MiB "
          f"({growth * 100:+.1f}%), {'flat' if report['memory_flat'] else 'NOT flat'}")
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="127.0.0.1:8080")
    p.add_argument("--routes", default="embeddings,search", type=lambda s: s.split(","),
                   help="comma-separated: embeddings, search, ask")
    p.add_argument("--concurrency", default="1,8,32", type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--duration", type=float, default=10.0, help="seconds per route and client count")
    p.add_argument("--max-requests", type=int, default=20000, help="cap per route and client count")
    p.add_argument("--rounds", type=int, default=1, help="repeat the sweep; speed-ups and latencies are the median round's")
    p.add_argument("--mode", default="dense", help="retrieval mode for /search")
    p.add_argument("--questions", default=DEFAULT_QUESTIONS, help="HotpotQA file: /search and /ask questions")
    p.add_argument("--sentences", default=DEFAULT_SENTENCES,
                   help="STS-B csv: /v1/embeddings inputs (single short sentences); "
                        "'questions' sends the questions instead")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--soak", type=float, help="seconds of mixed requests (all --routes) instead")
    p.add_argument("--pid", type=int, help="server process id, for memory samples in a soak")
    p.add_argument("--sample-every", type=float, default=5.0)
    p.add_argument("--out", help="report file (default eval/serving/default/load.json or soak.json)")
    args = p.parse_args()

    health = wait_ready(args.addr)
    if "ask" in args.routes and not health["models"]["generator"]:
        raise SystemExit("the server has no generator loaded; leave 'ask' out of --routes")
    asked = questions(args.questions)
    embedded = asked if args.sentences == "questions" else sentences(args.sentences)
    texts = {"embeddings": embedded, "search": asked, "ask": asked}
    out = args.out or os.path.join(os.path.dirname(__file__), "default", "soak.json" if args.soak else "load.json")
    if args.soak:
        if not args.pid:
            raise SystemExit("--soak needs --pid of the server to sample its memory")
        report = soak(args, texts)
    else:
        rows = []
        print(f"{'round':>5} {'route':<11} {'clients':>7} {'requests':>8} {'req/s':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}  statuses")
        # Rounds repeat the whole sweep, so each speed-up compares client counts measured minutes
        # apart at most, and the median round is not at the mercy of one noisy baseline.
        for round_ in range(1, args.rounds + 1):
            for route in args.routes:
                for c in args.concurrency:
                    results, wall = run(args.addr, [route], c, args.duration, args.max_requests, texts, args.mode,
                                        args.seed + round_ - 1)
                    for row in summarise(results, wall, c):
                        row["round"] = round_
                        rows.append(row)
                        print(f"{round_:>5} {row['route']:<11} {c:>7} {row['requests']:>8} {row['throughput_rps']:>9.1f} "
                              f"{row['p50_ms']:>8.2f} {row['p90_ms']:>8.2f} {row['p99_ms']:>8.2f}  {row['statuses']}")
        speedups, per_round = {}, {}
        for route in args.routes:
            for round_ in range(1, args.rounds + 1):
                by_c = {r["concurrency"]: r["throughput_rps"] for r in rows
                        if r["route"] == route and r["round"] == round_}
                if by_c.get(1, 0) > 0:
                    per_round.setdefault(route, []).append({str(c): round(t / by_c[1], 2) for c, t in by_c.items()})
            if route in per_round:
                speedups[route] = {c: statistics.median(r[c] for r in per_round[route]) for c in per_round[route][0]}
        for route, s in speedups.items():
            print(f"{route}: throughput over one sequential client, median of {args.rounds} round(s): {s}; "
                  f"per round: {per_round[route]}")
        median_rows = {}
        for route in args.routes:
            for c in args.concurrency:
                mine = [r for r in rows if r["route"] == route and r["concurrency"] == c]
                if mine:
                    median_rows[f"{route}/{c}"] = {key: statistics.median(r[key] for r in mine)
                                                   for key in ("throughput_rps", "p50_ms", "p90_ms", "p99_ms")}
                    print(f"{route:<11} {c:>7} clients, median of rounds: {median_rows[f'{route}/{c}']}")
        report = {"kind": "load", "addr": args.addr, "health": health, "mode": args.mode,
                  "duration_s": args.duration, "rounds": args.rounds, "rows": rows, "medians": median_rows,
                  "speedup_over_sequential": speedups, "speedup_per_round": per_round,
                  "server_5xx": server_errors(args.addr)}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"5xx other than 503: {report['server_5xx'] or 'none'}; report in {out}")
    bad = report["server_5xx"] or any(
        not str(s).isdigit() for row in report["rows"] for s in row["statuses"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
