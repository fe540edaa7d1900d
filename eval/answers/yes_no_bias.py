#!/usr/bin/env python3
"""Chooses --yes-no-bias from a run of the fullwiki yes/no questions made with bias 0, whose
predictions record each answer's margin (the yes-token's logit minus the no-token's). An answer
says "yes" only when its margin is above the bias, so every bias's accuracy follows from the one
run. The chosen bias is the middle of the range whose accuracy is within one question of the
best: one sharp best point among 50 questions is noise.

usage: yes_no_bias.py RUN_DIR [OUT.json]
"""
import json
import sys
from pathlib import Path

run = Path(sys.argv[1])
rows = [json.loads(line) for line in (run / "predictions.jsonl").open()]
scored = [(r["yes_no_margin"], r["gold"].strip().lower() == "yes")
          for r in rows if r.get("yes_no_margin") is not None]
if not scored:
    sys.exit(f"{run}: no prediction has a yes_no_margin (made with bias 0 by this build?)")


def correct(bias):
    return sum((margin > bias) == yes for margin, yes in scored)


grid = [round(0.1 * i, 1) for i in range(-10, 51)]
accuracy = {b: correct(b) for b in grid}
best = max(accuracy.values())
near = [b for b in grid if accuracy[b] >= best - 1]
# The widest run of consecutive grid points within one question of the best.
runs, current = [], [near[0]]
for b in near[1:]:
    if round(b - current[-1], 1) == 0.1:
        current.append(b)
    else:
        runs.append(current)
        current = [b]
runs.append(current)
widest = max(runs, key=len)
chosen = round((widest[0] + widest[-1]) / 2, 1)
report = {
    "run": str(run),
    "questions": len(rows),
    "with_margin": len(scored),
    "gold_yes": sum(yes for _, yes in scored),
    "accuracy_at_0": accuracy[0.0],
    "best": best,
    "range_within_one_of_best": [widest[0], widest[-1]],
    "chosen_bias": chosen,
    "accuracy_at_chosen": accuracy[chosen],
    "accuracy": {str(b): accuracy[b] for b in grid},
}
for b in grid:
    if b in (0.0, chosen) or b * 2 == int(b * 2):
        print(f"bias {b:5.1f}: {accuracy[b]}/{len(scored)}{'  <- chosen' if b == chosen else ''}")
print(f"chosen --yes-no-bias {chosen}: {accuracy[chosen]}/{len(scored)} right, "
      f"against {accuracy[0.0]} at 0 (greedy)")
if len(sys.argv) > 2:
    Path(sys.argv[2]).write_text(json.dumps(report, indent=2) + "\n")
