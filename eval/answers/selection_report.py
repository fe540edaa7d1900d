#!/usr/bin/env python3
"""Tabulates eval/answers/selection.sh's context runs against a base run: answer in context,
median prompt tokens, R@5 / both@5, how many prompts differ from the base's, and among the
questions whose gold answer sits in a retrieved top-5 paragraph, how often the selection left
it out (the loss the selection, not retrieval, causes).

    python3 eval/answers/selection_report.py BASE_RUN RUN... [--docs DOCS_JSONL] [--out FILE.md]
"""
import argparse
import json
import re
import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import predictions  # noqa: E402


def normalize(text):
    """The official HotpotQA answer normalisation (as `rag eval`'s answer-in-context uses)."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())




def row(run, base, docs):
    rows = predictions(run)
    summary = json.loads((Path(run) / "summary.json").read_text())["cells"][0]
    shared = [q for q in rows if q in base]
    changed = sum(rows[q]["context"] != base[q]["context"] for q in shared)
    # Answers (yes/no aside) that a top-5 paragraph holds whole: how many the context lost.
    held = lost = 0
    for r in rows.values():
        if r.get("answer_in_context") is None:
            continue
        gold = normalize(r["gold"])
        if any(gold in normalize(docs.get(t, "")) for t in r["retrieved"][:5]):
            held += 1
            lost += not r["answer_in_context"]
    return (
        f"| {Path(run).name} | {100 * summary['answer_in_context']:.1f} | "
        f"{summary['median_prompt_tokens']:.0f} | {100 * summary['recall']['5']:.1f} | "
        f"{100 * summary['all_supporting']['5']:.1f} | {changed} of {len(shared)} | "
        f"{lost} of {held} ({100 * lost / max(held, 1):.1f}%) |"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("runs", nargs="*")
    parser.add_argument("--docs", default="index/default/docs.jsonl",
                        help="the index's documents (title, text), for the top-5 paragraphs' text")
    parser.add_argument("--out")
    args = parser.parse_args()
    docs = {}
    try:
        with open(args.docs) as f:
            for line in f:
                d = json.loads(line)
                docs[d["title"]] = d["text"]
    except (OSError, json.JSONDecodeError, KeyError) as e:
        sys.exit(f"selection_report.py: cannot read {args.docs}: {e}")
    base = predictions(args.base)
    lines = [
        "| run | answer in context % | median prompt tokens | R@5 | both@5 | prompts changed | "
        "answer in a top-5 paragraph but not in the context |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [row(run, base, docs) for run in [args.base, *args.runs]]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
