#!/usr/bin/env python3
"""Writes the fullwiki questions whose supporting paragraphs are both in the corpus (both sample
files): the only ones whose retrieval can be measured. Settings are chosen on these; the
distractor questions never choose anything.

usage: tuning_questions.py DATA_DIR OUT.json [--rest]
  --rest: the other fullwiki questions instead (a supporting paragraph missing from the corpus):
          answers the context may lack, to see what a setting does where the model must know.
"""
import json
import sys
from pathlib import Path

data, out = Path(sys.argv[1]) / "hotpotqa", Path(sys.argv[2])
files = ["hotpot_dev_distractor_sample.json", "hotpot_dev_fullwiki_sample.json"]
titles = set()
for name in files:
    for record in json.loads((data / name).read_text()):
        titles.update(title for title, _ in record.get("context") or [])
fullwiki = json.loads((data / files[1]).read_text())
rest = sys.argv[3:] == ["--rest"]
kept = [r for r in fullwiki if ({t for t, _ in r["supporting_facts"]} <= titles) != rest]
out.write_text(json.dumps(kept))
which = "lack a supporting paragraph in" if rest else "have both supporting paragraphs in"
print(f"{len(kept)} of {len(fullwiki)} fullwiki questions {which} the corpus -> {out}")
