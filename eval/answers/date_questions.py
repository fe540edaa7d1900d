"""The questions of a HotpotQA file that `--full-dates` can change: those opening with "when" or
asking for a date, as src/generate/full_date.rs reads a question.

    python3 eval/answers/date_questions.py QUESTIONS OUT [--limit N]  # the first N only
"""
import argparse
import json
import re

ASKS_FOR_DATE = re.compile(r"^\W*when\b|\bdate\b", re.I)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions")
    parser.add_argument("out")
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    records = json.load(open(args.questions))[: args.limit]
    kept = [r for r in records if ASKS_FOR_DATE.search(r["question"])]
    json.dump(kept, open(args.out, "w"))
    print(f"{len(kept)} of {len(records)} questions ask for a date -> {args.out}")


if __name__ == "__main__":
    main()
