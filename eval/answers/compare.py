"""Two `rag eval` runs of the same questions, answer by answer: how many answers changed, how
many of those became right or wrong, and each run's EM and F1 over the questions both hold.

    python3 eval/answers/compare.py BEFORE_RUN AFTER_RUN [--out FILE.json] [--show]
"""
import argparse
import json
import sys
from pathlib import Path


def predictions(run):
    path = Path(run) / "predictions.jsonl"
    try:
        with open(path) as f:
            return {r["id"]: r for r in map(json.loads, f)}
    except (OSError, json.JSONDecodeError, KeyError) as e:
        sys.exit(f"{Path(sys.argv[0]).name}: cannot read {path}: {e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--out", help="write the comparison here as JSON")
    parser.add_argument("--show", action="store_true", help="print every changed answer")
    args = parser.parse_args()
    before, after = predictions(args.before), predictions(args.after)
    shared = [q for q in before if q in after]
    if not shared:
        sys.exit(f"compare.py: {args.before} and {args.after} share no question")
    changed = [q for q in shared if before[q]["prediction"] != after[q]["prediction"]]
    count = lambda cond: sum(1 for q in changed if cond(before[q]["em"], after[q]["em"]))
    result = {
        "before": args.before,
        "after": args.after,
        "questions": len(shared),
        "changed": len(changed),
        "became_right": count(lambda b, a: not b and a),
        "became_wrong": count(lambda b, a: b and not a),
        "em": [round(100 * sum(run[q]["em"] for q in shared) / len(shared), 1) for run in (before, after)],
        "f1": [round(100 * sum(run[q]["f1"] for q in shared) / len(shared), 1) for run in (before, after)],
    }
    if args.show:
        for q in changed:
            b, a = before[q], after[q]
            print(f"{int(b['em'])}->{int(a['em'])} {b['prediction'][:50]!r} -> {a['prediction'][:50]!r} | gold {a['gold'][:40]!r}")
    print(
        f"{result['questions']} questions: {result['changed']} answers changed, "
        f"{result['became_right']} became right, {result['became_wrong']} became wrong; "
        f"EM {result['em'][0]} -> {result['em'][1]}, F1 {result['f1'][0]} -> {result['f1'][1]}"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
