#!/usr/bin/env python3
"""Which option the generator picks in "..., A or B?" questions (yes/no ones aside) against
which one is right: a position bias, like the yes bias that --yes-no-bias corrects, would show
as more A-for-B than B-for-A answers. Reads a run's predictions.jsonl.

usage: option_position.py RUN_DIR
"""
import json
import re
import sys
from collections import Counter
from pathlib import Path

OPTIONS = re.compile(r",?\s*([^,]+?)\s+or\s+([^,?]+)\?$")
rows = [json.loads(line) for line in (Path(sys.argv[1]) / "predictions.jsonl").open()]
counts = Counter()
for r in rows:
    m = OPTIONS.search(r["question"])
    if not m or r["gold"].strip().lower() in ("yes", "no"):
        continue
    a, b = m.group(1).lower(), m.group(2).lower()

    def side(text):
        text = (text or "").strip().lower()
        return "A" if text and text in a else "B" if text and text in b else "neither"

    counts[(side(r["gold"]), side(r["prediction"]))] += 1
total = sum(counts.values())
print(f"{total} 'A or B' questions in {sys.argv[1]} (gold side -> answered side):")
for (gold, said), n in sorted(counts.items()):
    print(f"  gold {gold:7} answered {said:7} {n}")
