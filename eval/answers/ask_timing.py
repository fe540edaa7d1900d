#!/usr/bin/env python3
"""`ask` side by side: today's pipeline (the binary of a base commit: dense retrieval, the top
five paragraphs whole, every prompt evaluated whole) against this one (its defaults), each a
warm `rag serve` on loopback with the same encoder, index and generator, asked the same
questions in alternation (old, new, old, new, ...) so that drift on a shared machine hits
both alike. Reports each one's median wall time per question, the ratio, prompt tokens and
exact match on the questions asked. Standard library only.

usage: ask_timing.py --old-rag BIN --new-rag BIN [--questions FILE] [--limit N] [--out DIR]
"""
import argparse
import json
import os
import signal
import statistics
import string
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "serving"))
from common import DEFAULT_QUESTIONS, Client  # noqa: E402


def normalize(s):
    """HotpotQA's answer normalisation (as src/eval/metrics.rs)."""
    s = "".join(c for c in s.lower() if c not in string.punctuation)
    return " ".join(w for w in s.split() if w not in ("a", "an", "the"))


def start(binary, port, index, llm, log):
    cmd = [binary, "serve", "--index", index, "--llm", llm, "--precision", "f32",
           "--addr", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    client = Client(f"127.0.0.1:{port}", timeout=600)
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"{binary} serve exited with {proc.returncode}; see its log")
        try:
            status, _, body = client.request("GET", "/health")
            if status == 200 and json.loads(body).get("status") == "ready":
                return proc, client
        except OSError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"{binary} serve did not get ready")


def ask(client, question, body):
    started = time.perf_counter()
    status, _, data = client.request("POST", "/ask", dict(body, question=question))
    elapsed = (time.perf_counter() - started) * 1000
    if status != 200:
        raise SystemExit(f"/ask answered {status}: {data[:300]!r}")
    return elapsed, json.loads(data)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--old-rag", required=True)
    p.add_argument("--new-rag", required=True)
    p.add_argument("--index", default="index/default")
    p.add_argument("--llm", default="data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    p.add_argument("--questions", default=DEFAULT_QUESTIONS)
    p.add_argument("--limit", type=int, default=60)
    p.add_argument("--out", default="eval/answers/timing")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(args.questions) as f:
        records = json.load(f)[: args.limit]
    log = open(os.path.join(args.out, "servers.log"), "w")
    servers = []
    try:
        old, old_client = start(args.old_rag, 18431, args.index, args.llm, log)
        servers.append(old)
        new, new_client = start(args.new_rag, 18432, args.index, args.llm, log)
        servers.append(new)
        # Today's `rag ask` defaults: dense, top 5 whole. The new server: its own defaults.
        sides = {"old": (old_client, {"top_k": 5, "mode": "dense"}), "new": (new_client, {})}
        for name, (client, body) in sides.items():  # warm-up, not counted
            ask(client, "Who wrote Hamlet?", body)
        rows = []
        for i, record in enumerate(records):
            row = {"id": record["_id"], "question": record["question"], "gold": record["answer"]}
            order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
            for name in order:
                client, body = sides[name]
                ms, result = ask(client, record["question"], body)
                row[name] = {
                    "ms": ms,
                    "answer": result["answer"],
                    "em": normalize(result["answer"]) == normalize(record["answer"]),
                    "prompt_tokens": result.get("prompt_tokens"),
                    "reused_tokens": result.get("reused_tokens"),
                }
            rows.append(row)
            print(f"{i + 1}/{len(records)}: old {row['old']['ms']:.0f} ms, new {row['new']['ms']:.0f} ms", flush=True)
    finally:
        for proc in servers:
            proc.send_signal(signal.SIGTERM)
        for proc in servers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    with open(os.path.join(args.out, "questions.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    med = {k: statistics.median(r[k]["ms"] for r in rows) for k in ("old", "new")}
    em = {k: 100 * sum(r[k]["em"] for r in rows) / len(rows) for k in ("old", "new")}
    tokens = statistics.median(r["new"]["prompt_tokens"] for r in rows)
    evaluated = statistics.median(r["new"]["prompt_tokens"] - r["new"]["reused_tokens"] for r in rows)
    summary = {
        "questions": len(rows),
        "median_ms_old": med["old"],
        "median_ms_new": med["new"],
        "ratio_new_to_old": med["new"] / med["old"],
        "median_ratio_per_question": statistics.median(r["new"]["ms"] / r["old"]["ms"] for r in rows),
        "em_old": em["old"],
        "em_new": em["new"],
        "median_prompt_tokens_new": tokens,
        "median_evaluated_prompt_tokens_new": evaluated,
        "old_rag": args.old_rag,
        "new_rag": args.new_rag,
    }
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
