#!/usr/bin/env python3
"""What answering a "..., A or B?" question with the option its answer names would do to exact
match: for each answer in a run that names exactly one of the question's two options (the
rules of src/generate/options.rs, ported here), the option as the question writes it against
the answer as generated. Prints the counts and writes the changed answers to --out. (On the
fullwiki questions it changed 4 of 99 answers, none to right, so rag has no such step.)

usage: option_snap.py RUN_DIR [--out FILE]
"""
import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import predictions  # noqa: E402
from selection_report import normalize  # noqa: E402


def bare(text):
    """An option without enclosing quotes or a leading article (options.rs `bare`)."""
    text = text.strip()
    for open_, close in (('"', '"'), ("\u201c", "\u201d")):
        if text.startswith(open_) and text.endswith(close) and len(text) >= 2:
            return text[1:-1].strip()
    for article in ("the ", "The ", "a ", "A ", "an ", "An "):
        if text.startswith(article):
            return text[len(article):].lstrip()
    return text


def words(text):
    return [w.lower() for w in re.findall(r"[^\W_]+", text) if w.lower() not in ("a", "an", "the")]


def parse(question):
    body = question.strip()
    if not body.endswith("?"):
        return None
    body = body[:-1].rstrip()
    split = body.rfind(" or ")
    if split < 0:
        return None
    head, second = body[:split], body[split + 4:]
    comma = head.rfind(",")
    if comma < 0 or "," in second:
        return None
    first, second = bare(head[comma + 1:]), bare(second)
    if not first or not second or words(first) == words(second):
        return None
    return [first, second]


def contains(haystack, needle):
    n = len(needle)
    return n > 0 and any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def named(answer, options):
    answer = words(answer)
    if not answer:
        return None
    hits = [contains(answer, words(o)) or contains(words(o), answer) for o in options]
    return hits.index(True) if hits.count(True) == 1 else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--out")
    args = p.parse_args()
    rows = list(predictions(args.run).values())
    counts = dict(questions=len(rows), options=0, names_one=0, changed=0, became_right=0,
                  became_wrong=0, right_before=0, right_after=0)
    changed = []
    for r in rows:
        right = normalize(r["prediction"]) == normalize(r["gold"])
        counts["right_before"] += right
        options = parse(r["question"])
        side = named(r["prediction"], options) if options else None
        counts["options"] += options is not None
        after = r["prediction"]
        if side is not None:
            counts["names_one"] += 1
            if normalize(options[side]) != normalize(r["prediction"]):
                after = options[side]
        now_right = normalize(after) == normalize(r["gold"])
        counts["right_after"] += now_right
        if after != r["prediction"] and normalize(after) != normalize(r["prediction"]):
            counts["changed"] += 1
            counts["became_right"] += now_right and not right
            counts["became_wrong"] += right and not now_right
            changed.append(dict(id=r["id"], question=r["question"], gold=r["gold"],
                                before=r["prediction"], after=after))
    n = counts["questions"]
    counts["em"] = [round(100 * counts["right_before"] / n, 1), round(100 * counts["right_after"] / n, 1)]
    print(json.dumps(counts))
    for c in changed:
        print(f"  {c['before']!r} -> {c['after']!r} (gold {c['gold']!r})")
    if args.out:
        json.dump(dict(counts, changed_answers=changed), open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
