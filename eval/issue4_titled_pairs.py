#!/usr/bin/env python3
"""Issue 4 experiment: corpus pairs whose positive carries the paragraph's title, written as the
JSONL `rag train --data` reads. The anchor is what `--pairs-from-corpus` makes (title + first
sentence); the positive is "{title}: {rest of the paragraph}" instead of the bare rest, so the
positive looks like an indexed document.

    eval/issue4_titled_pairs.py OUT.jsonl CORPUS.json...
"""
import json
import sys

out_path, corpora = sys.argv[1], sys.argv[2:]
seen = set()
with open(out_path, "w") as out:
    for path in corpora:
        for record in json.load(open(path)):
            for title, sentences in record["context"]:
                rest = "".join(sentences[1:]).strip()
                if title in seen or len(sentences) < 2 or not rest:
                    continue
                seen.add(title)
                out.write(json.dumps({"query": f"{title}: {sentences[0].strip()}",
                                      "positive": f"{title}: {rest}"}) + "\n")
print(f"{len(seen)} pairs -> {out_path}")
