#!/usr/bin/env python3
"""Issue 55's switch target: the served index takes additions and removals while clients search,
without a failed request. On a copy of the 19k-paragraph sample index (the original is never
touched), `rag serve` answers `--clients` searching clients for the whole run while
  1. 100 new paragraphs are added over HTTP (`POST /documents`, the server installs and serves
     the new generation itself),
  2. 100 more are added by `rag index --add` from outside (the server notices the new
     generation and switches),
  3. 100 titles are removed by `rag index --remove` from outside.
Every search's status is kept with the generation the server named before and after each step;
the run fails if any search is not answered 200, or if the new documents are not found (and the
removed ones still are) once their generation is served.

    eval/documents/switch_under_load.py      # --rag ./rag --source index/default --clients 4

Writes eval/documents/switch_under_load.json. Standard library only (and eval/serving/common.py).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serving"))
from common import DEFAULT_QUESTIONS, Client, questions, server_errors, stop, wait_ready  # noqa: E402


def new_documents(index, start, suffix):
    """100 paragraphs the index does not hold: its own from `start` on, retitled and extended."""
    with open(os.path.join(index, "docs.jsonl")) as docs:
        rows = [json.loads(line) for _, line in zip(range(start + 100), docs)][start:]
    return [{"title": f"{d['title']} ({suffix})", "text": d["text"] + f" {suffix.capitalize()}."} for d in rows]


def titles(index, start, count):
    with open(os.path.join(index, "docs.jsonl")) as docs:
        return [json.loads(line)["title"] for _, line in zip(range(start + count), docs)][start:]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rag", default="./rag")
    p.add_argument("--source", default="index/default")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--mode", default="hybrid", help="retrieval mode of the searching clients")
    p.add_argument("--settle", type=float, default=5.0, help="seconds of searching before, between and after steps")
    p.add_argument("--out", default=os.path.join(HERE, "switch_under_load.json"))
    args = p.parse_args()

    work = tempfile.mkdtemp(prefix="rag-switch.")
    index = os.path.join(work, "index")
    shutil.copytree(args.source, index)
    load_before = open("/proc/loadavg").read().split()[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    server = subprocess.Popen([args.rag, "serve", "--no-llm", "--index", index, "--addr", addr],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "serve.log"), "w"))
    try:
        report = run(args, work, index, addr, server, load_before)
    finally:
        stop(server)
    shutil.rmtree(work)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k not in ("steps",)}, indent=1))
    print(f"report in {args.out}")
    sys.exit(0 if report["failed_searches"] == 0 and report["all_found"] else 1)


def run(args, work, index, addr, server, load_before):
    health = wait_ready(addr)
    asked = questions(DEFAULT_QUESTIONS)
    searches, lock, done = [], threading.Lock(), threading.Event()

    def client(i):
        conn = Client(addr)
        n = i
        while not done.is_set():
            started = time.time()
            try:
                status, _, _ = conn.request("POST", "/search", {"query": asked[n % len(asked)], "k": 5, "mode": args.mode})
            except OSError as e:
                status = f"{type(e).__name__}"
            with lock:
                searches.append((started, time.time() - started, status))
            n += args.clients

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    control = Client(addr, timeout=600)

    def generation():
        return json.loads(control.request("GET", "/health")[2])["index"]

    def found(title):
        status, _, body = control.request("POST", "/search", {"query": title, "k": 10, "mode": "bm25"})
        return status == 200 and any(h["title"] == title for h in json.loads(body)["hits"])

    steps = []

    def step(label, action, check_added=(), check_removed=()):
        time.sleep(args.settle)
        before = generation()
        started = time.time()
        detail = action()
        returned = time.time()
        while generation()["generation"] == before["generation"]:
            if time.time() - returned > 120:
                raise SystemExit(f"{label}: the server never switched generation")
            time.sleep(0.05)
        served = time.time()
        after = generation()
        steps.append({
            "step": label, "started": started, "returned_s": round(returned - started, 3),
            "served_s": round(served - started, 3), "generation_before": before["generation"],
            "generation_after": after["generation"], "documents_before": before["documents"],
            "documents_after": after["documents"], "detail": detail,
            "added_found": sum(found(t) for t in check_added), "added_checked": len(check_added),
            "removed_found": sum(found(t) for t in check_removed), "removed_checked": len(check_removed),
        })
        print(f"{label}: returned {returned - started:.2f} s, served {served - started:.2f} s, "
              f"{before['documents']} -> {after['documents']} documents", flush=True)

    http_docs = new_documents(index, 0, "revised over http")
    cli_docs = new_documents(index, 100, "revised from the command line")
    cli_file = os.path.join(work, "add.jsonl")
    with open(cli_file, "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in cli_docs)
    removed = titles(index, 1000, 100)

    def post():
        status, _, body = control.request("POST", "/documents", {"documents": http_docs})
        if status != 200:
            raise SystemExit(f"POST /documents answered {status}: {body[:300]!r}")
        return json.loads(body)

    def command(*flags):
        def go():
            out = subprocess.run([args.rag, "index", "--index", index, "--json", *flags],
                                 check=True, capture_output=True, text=True)
            return json.loads(out.stdout)
        return go

    step("add 100 over HTTP", post, check_added=[d["title"] for d in http_docs[:10]])
    step("add 100 with rag index --add", command("--add", cli_file), check_added=[d["title"] for d in cli_docs[:10]])
    step("remove 100 with rag index --remove", command(*[a for t in removed for a in ("--remove", t)]),
         check_removed=removed[:10])
    time.sleep(args.settle)
    done.set()
    for t in threads:
        t.join()

    statuses = {}
    for _, _, s in searches:
        statuses[str(s)] = statuses.get(str(s), 0) + 1
    spans = [(s["started"], s["started"] + s["served_s"]) for s in steps]
    during = [x for x in searches if any(a <= x[0] <= b for a, b in spans)]
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
    return {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, " + ("AVX-512" if "avx512f" in flags else "AVX2")
                   + (" + FMA" if "fma" in flags else "")
                   + f"; 1-minute load {load_before} before the run, {open('/proc/loadavg').read().split()[0]} after",
        "index": f"copy of {args.source}: {health['index']['documents']} documents",
        "clients": args.clients, "mode": args.mode,
        "searches": len(searches), "statuses": statuses,
        "failed_searches": sum(v for k, v in statuses.items() if k != "200"),
        "searches_during_updates": len(during),
        "failed_during_updates": sum(1 for x in during if x[2] != 200),
        "p50_ms_during_updates": round(sorted(x[1] for x in during)[len(during) // 2] * 1000, 1) if during else None,
        "server_5xx": server_errors(addr),
        "all_found": all(s["added_found"] == s["added_checked"] and s["removed_found"] == 0 for s in steps),
        "steps": steps,
    }


if __name__ == "__main__":
    main()
