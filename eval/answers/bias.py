#!/usr/bin/env python3
"""Chooses a decision bias of the generator from one fullwiki run whose predictions record each
decided answer's margin, so that every bias's accuracy follows from the one run:
  yes-no   --yes-no-bias, from the yes/no questions answered with bias 0: the margin is the
           yes-token's logit minus the no-token's; "yes" when it is above the bias.
  options  --option-bias, from the "..., A or B?" questions: the margin is the first option's
           log-probability minus the second's; the first option when it is above the bias.
The chosen bias is the middle of the widest range whose accuracy is within one question of the
best: one sharp best point among a few dozen questions is noise.
With --calibrated (yes-no only), each margin less the one the same question got with no
documents (`rag eval --yes-no-prior` records it): contextual calibration (Zhao et al., 2021),
which takes out how much the model says "yes" to the question whatever the evidence.
With --swapped, a run of the same questions with their two options swapped ("..., B or A?"):
each margin is then the mean of the two orders' (the first order's first option against its
second), which cancels a preference for whichever option is named first.

usage: bias.py yes-no|options RUN_DIR [--out OUT.json] [--swapped RUN_DIR] [--calibrated]
"""
import argparse
import json
import sys
from pathlib import Path

from ask_timing import normalize

p = argparse.ArgumentParser()
p.add_argument("kind", choices=["yes-no", "options"])
p.add_argument("run", type=Path)
p.add_argument("--out", type=Path)
p.add_argument("--swapped", type=Path)
p.add_argument("--calibrated", action="store_true")
args = p.parse_args()
kind, run = args.kind, args.run


def predictions(run):
    return [json.loads(line) for line in (run / "predictions.jsonl").open()]


rows = predictions(run)
swapped = {}
if args.swapped:
    for r in predictions(args.swapped):
        if r.get("option_choice"):
            swapped[r["id"]] = -r["option_choice"]["margin"]
# Per decided answer: (margin, right when the first side is answered, right when the second is,
# right as greedy decoding answered).
if kind == "yes-no":
    decided = []
    for r in rows:
        if r.get("yes_no_margin") is not None:
            yes = normalize(r["gold"]) == "yes"
            greedy = (r["yes_no_margin"] > 0) == yes
            margin = r["yes_no_margin"]
            if args.calibrated:
                if r.get("yes_no_prior") is None:
                    sys.exit(f"{run}: {r['id']} has no yes_no_prior (rag eval --yes-no-prior)")
                margin -= r["yes_no_prior"]
            decided.append((margin, yes, not yes, greedy))
elif kind == "options":
    decided = []
    for r in rows:
        c = r.get("option_choice")
        if c:
            gold = normalize(r["gold"])
            first, second = (normalize(o) == gold for o in c["options"])
            margin = c["margin"]
            if r["id"] in swapped:
                margin = (margin + swapped[r["id"]]) / 2
            decided.append((margin, first, second, normalize(c["greedy_answer"]) == gold))
if not decided:
    sys.exit(f"{run}: no prediction records a {kind} margin (made by this build?)")


def correct(bias):
    return sum(first if margin > bias else second for margin, first, second, _ in decided)


grid = [round(0.1 * i, 1) for i in range(-50, 51)]
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
greedy = sum(g for *_, g in decided)
report = {
    "kind": kind,
    "run": str(run),
    "swapped": str(args.swapped) if args.swapped else None,
    "calibrated": args.calibrated,
    "both_orders": len(swapped),
    "questions": len(rows),
    "decided": len(decided),
    "right_first": sum(f for _, f, _, _ in decided),
    "right_second": sum(s for _, _, s, _ in decided),
    "greedy": greedy,
    "best": best,
    "range_within_one_of_best": [widest[0], widest[-1]],
    "chosen_bias": chosen,
    "accuracy_at_chosen": accuracy[chosen],
    "accuracy": {str(b): accuracy[b] for b in grid},
}
for b in grid:
    if b in (0.0, chosen) or b == int(b):
        print(f"bias {b:5.1f}: {accuracy[b]}/{len(decided)}{'  <- chosen' if b == chosen else ''}")
print(f"chosen {kind} bias {chosen}: {accuracy[chosen]}/{len(decided)} right, "
      f"against {greedy} greedy")
if args.out:
    args.out.write_text(json.dumps(report, indent=2) + "\n")
