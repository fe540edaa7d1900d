#!/usr/bin/env python3
"""The questions of DATA whose answer in the given runs is found in none of its prompt's
documents, as `src/generate/grounded.rs` decides: not a yes or a no, and not a run of whole
words (articles and punctuation aside) of a document's title or of the sentences read from it.
Those are the answers `--widen-tokens` gives again from a wider context.

  python3 eval/answers/ungrounded_questions.py DATA.json OUT.json RUN_DIR... [--limit N]

--limit keeps the questions among DATA's first N (a run of `rag eval --limit N`)."""
import argparse
import json
import re


def words(text):
    # crate::words::alphanumeric, lower-cased, articles dropped (generate::options::words).
    return [w for w in re.findall(r"[^\W_]+", text.lower()) if w not in ("the", "a", "an")]


def contains(hay, needle):
    return bool(needle) and any(hay[i:i + len(needle)] == needle
                                for i in range(len(hay) - len(needle) + 1))


def said_yes_or_no(answer):
    return answer.strip().rstrip(".").lower() in ("yes", "no")


def grounded(prediction):
    answer = prediction.get("prediction") or ""
    if said_yes_or_no(answer):
        return True
    needle = words(answer)
    # Each context entry is "Title: the sentences read", in the order of context_titles.
    for title, read in zip(prediction["context_titles"], prediction["context"]):
        text = read[len(title) + 2:] if read.startswith(title + ": ") else read
        if contains(words(title), needle) or contains(words(text), needle):
            return True
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--limit", type=int)
    args = parser.parse_args()
    ids = set()
    answered = 0
    for run in args.runs:
        for line in open(f"{run}/predictions.jsonl"):
            prediction = json.loads(line)
            if prediction.get("prediction") is None:
                continue
            if not prediction.get("context"):
                raise SystemExit(f"{run}: a prediction without its context (a run of whole "
                                 "paragraphs or of context-only prompts); it cannot be read")
            answered += 1
            if not grounded(prediction):
                ids.add(prediction["id"])
    records = json.load(open(args.data))
    if args.limit is not None:
        records = records[:args.limit]
    kept = [r for r in records if r["_id"] in ids]
    json.dump(kept, open(args.out, "w"))
    print(f"{len(kept)} of {answered} answers found in none of their prompt's documents "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
