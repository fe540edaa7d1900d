#!/usr/bin/env python3
"""Regenerates only what a context change touched. Greedy decoding of the same prompt gives the
same answer, so a run whose prompts changed for a few questions needs new answers only there.

  select BEFORE_RUN CONTEXT_RUN QUESTIONS_JSON OUT_JSON [--yes-no]
      the questions (HotpotQA records from QUESTIONS_JSON) whose context in CONTEXT_RUN (a
      `rag eval --context-only` run) differs from BEFORE_RUN's, written to OUT_JSON; with
      --yes-no also those BEFORE_RUN answered yes or no (for a BEFORE_RUN made before yes/no
      answers were decided after the facts: the same prompt may then answer otherwise)
  merge BEFORE_RUN CHANGED_RUN OUT_RUN
      BEFORE_RUN's predictions with CHANGED_RUN's replacing those it holds, as OUT_RUN's
      predictions.jsonl, and a summary.json of EM, F1 and answer-in-context over them
"""
import json
import statistics
import sys
from pathlib import Path


def in_context(rows):
    """The share of questions whose gold answer is in the context, in percent, over those where
    that can be told (not for yes/no answers), as `rag eval` reports it."""
    known = [r["answer_in_context"] for r in rows if r.get("answer_in_context") is not None]
    return round(100 * sum(known) / len(known), 1) if known else None


def predictions(run):
    with open(Path(run) / "predictions.jsonl") as f:
        return [json.loads(line) for line in f]


def yes_or_no(prediction):
    words = (prediction or "").strip().lower().split()
    return bool(words) and words[0].strip(".,!") in ("yes", "no")


def select(before, contexts, questions, out, *flags):
    if set(flags) - {"--yes-no"}:
        sys.exit(f"changed_contexts.py: unknown flags {flags}")
    old = {r["id"]: r for r in predictions(before)}
    new = {r["id"]: r for r in predictions(contexts)}
    changed = {q for q in new if q in old and new[q]["context"] != old[q]["context"]}
    if "--yes-no" in flags:
        answered = {q for q in new if q in old and yes_or_no(old[q]["prediction"])}
        print(f"{len(answered - changed)} more answered yes or no in {before}")
        changed |= answered
    records = [r for r in json.load(open(questions)) if r["_id"] in changed]
    json.dump(records, open(out, "w"))
    shared = [q for q in new if q in old]
    print(f"{len(changed)} of {len(shared)} contexts changed -> {out}; answer in context "
          f"{in_context([old[q] for q in shared])}% -> {in_context([new[q] for q in shared])}%")


def merge(before, changed, out):
    rows = predictions(before)
    new = {r["id"]: r for r in predictions(changed)}
    merged = [new.get(r["id"], r) for r in rows]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "predictions.jsonl", "w") as f:
        for r in merged:
            f.write(json.dumps(r) + "\n")
    n = len(merged)
    summary = {
        "questions": n,
        "regenerated": sum(r["id"] in new for r in rows),
        "from": {"before": str(before), "changed": str(changed)},
        "em": round(100 * sum(bool(r["em"]) for r in merged) / n, 1),
        "f1": round(100 * statistics.mean(r["f1"] for r in merged), 1),
        "answer_in_context": in_context(merged),
        "median_prompt_tokens": statistics.median(r["timings"]["prompt_tokens"] for r in merged),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    {"select": select, "merge": merge}[sys.argv[1]](*sys.argv[2:])
