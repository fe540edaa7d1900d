#!/usr/bin/env python3
"""Why two `rag eval --context-only` runs of the same questions (f32 and int8 question
encoding) built different prompts: the top-5 paragraphs differ (which, or their order), or the
same paragraphs gave different sentences.

    python3 eval/answers/precision_changes.py F32_RUN INT8_RUN [--out FILE.json]
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import predictions  # noqa: E402




def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("f32")
    parser.add_argument("int8")
    parser.add_argument("--out")
    args = parser.parse_args()
    a, b = predictions(args.f32), predictions(args.int8)
    shared = [q for q in a if q in b]
    changed = [q for q in shared if a[q]["context"] != b[q]["context"]]
    kinds = {"other paragraphs in the top 5": [], "the same top 5, reordered": [],
             "the same top 5, other sentences": []}
    for q in changed:
        top_a, top_b = a[q]["retrieved"][:5], b[q]["retrieved"][:5]
        if set(top_a) != set(top_b):
            kinds["other paragraphs in the top 5"].append(q)
        elif top_a != top_b:
            kinds["the same top 5, reordered"].append(q)
        else:
            kinds["the same top 5, other sentences"].append(q)
    flips = lambda key: sum(a[q].get(key) != b[q].get(key) for q in changed)
    result = {
        "questions": len(shared),
        "prompts_changed": len(changed),
        "by_cause": {k: len(v) for k, v in kinds.items()},
        "answer_in_context_flips": flips("answer_in_context"),
        "both_at_5": [sum(r[q]["retrieval"]["all_supporting"]["5"] for q in shared) for r in (a, b)],
        "changed": {k: v for k, v in kinds.items()},
    }
    print(json.dumps({k: v for k, v in result.items() if k != "changed"}))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
