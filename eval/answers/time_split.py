#!/usr/bin/env python3
"""Where a warm `ask` spends its time: one `rag serve` (every default, f32 encoder) asked the
first N distractor questions one at a time after a warm-up question; per question the server's
own split (encode, search, sentence choice, prompt layout, prefill, generation) and the wall
time the client saw. Writes OUT/time_split.json (medians, each part's share of the median
total, the CPU's flags) and OUT/time_split.jsonl (every question). Standard library only.

usage: time_split.py [--rag ./rag] [--index index/default] [--limit 20] [--out eval/answers/timing]
"""
import argparse
import json
import os
import statistics
import sys

from ask_timing import ask, start

PARTS = ["encode_ms", "search_ms", "select_ms", "prompt_ms", "prompt_eval_ms", "generation_ms"]


def cpu_flags():
    """The SIMD flags that decide llama.cpp's and the encoder's kernels."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    wanted = ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"]
                    return {flag: flag in have for flag in wanted}
    except OSError:
        pass
    return {}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rag", default="./rag")
    p.add_argument("--index", default="index/default")
    p.add_argument("--llm", default="data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    p.add_argument("--questions", default="../shared/data/hotpotqa/hotpot_dev_distractor_sample.json")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--port", type=int, default=18433)
    p.add_argument("--out", default="eval/answers/timing")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(args.questions) as f:
        records = json.load(f)[: args.limit + 1]
    log = open(os.path.join(args.out, "time_split.log"), "w")
    # What else the machine was doing: the split is meant for a quiet one.
    load_before = os.getloadavg()
    server, client = start(args.rag, args.port, args.index, args.llm, log)
    rows = []
    try:
        # The first question pays one-off costs (the title automaton, first allocations).
        ask(client, records[0]["question"], {})
        for r in records[1:]:
            wall, data = ask(client, r["question"], {})
            t = data["timings"]
            row = {"id": r["_id"], "wall_ms": wall, "prompt_tokens": data.get("prompt_tokens"),
                   "reused_tokens": data.get("reused_tokens"), "answer": data.get("answer")}
            row.update({k: t.get(k, 0.0) for k in PARTS + ["total_ms"]})
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait()
    with open(os.path.join(args.out, "time_split.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    median = {k: statistics.median(r[k] for r in rows) for k in PARTS + ["total_ms", "wall_ms"]}
    total = median["total_ms"]
    # Per question, the share of everything that is neither prefill nor generation.
    other = [sum(r[k] for k in PARTS[:4]) / r["total_ms"] for r in rows if r["total_ms"] > 0]
    evaluated = [r["prompt_tokens"] - r["reused_tokens"] for r in rows]
    summary = {
        "questions": len(rows),
        "cpu_flags": cpu_flags(),
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
        "cpus": os.cpu_count(),
        "median_ms": {k: round(v, 1) for k, v in median.items()},
        "share_of_median_total": {k: round(median[k] / total, 3) for k in PARTS},
        "median_share_outside_prefill_and_generation": round(statistics.median(other), 3),
        "median_prompt_tokens_evaluated": statistics.median(evaluated),
        "prefill_tokens_per_second": round(
            statistics.median(
                (r["prompt_tokens"] - r["reused_tokens"]) * 1000 / r["prompt_eval_ms"]
                for r in rows if r["prompt_eval_ms"] > 0), 1),
    }
    with open(os.path.join(args.out, "time_split.json"), "w") as f:
        json.dump(summary, f, indent=2)
    json.dump(summary, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
