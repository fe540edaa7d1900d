#!/usr/bin/env bash
# Training speed in alternating rounds: each round runs train_speed.py for PyTorch, then this
# build of rag, then (with BASE_BIN) another build of rag, so that drift on a shared machine hits
# all of them alike; the report gives each one's median seconds per step over the rounds and
# the ratios. Background work should be paused for it (it says the load it saw).
#
#   RAG_BIN=PATH [BASE_BIN=PATH] ROUNDS=3 STEPS=10 eval/training/train_speed_rounds.sh
#
# Writes eval/training/train_speed_rounds.{json,md}; each round's own files under
# eval/training/runs/train-speed/round-N/.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
rounds=${ROUNDS:-3}
steps=${STEPS:-10}
modes=${MODES:-ese,raw}
out=eval/training/runs/train-speed
eval/reference/setup.sh >/dev/null
py=eval/.venv/bin/python
# Only this invocation's rounds are reported: a base build's files from an earlier one must not
# be read as this one's.
rm -rf "$out"/round-*
for round in $(seq 1 "$rounds"); do
  dir=$out/round-$round
  echo "== round $round/$rounds"
  "$py" eval/training/train_speed.py --mode "$modes" --steps "$steps" --skip-rust --out-dir "$dir/pytorch" | grep -E '^\| pytorch'
  "$py" eval/training/train_speed.py --mode "$modes" --steps "$steps" --skip-torch --rag-bin "$RAG_BIN" --out-dir "$dir/rag" | grep -E '^\| rust'
  if [ -n "${BASE_BIN:-}" ]; then
    "$py" eval/training/train_speed.py --mode "$modes" --steps "$steps" --skip-torch --rag-bin "$BASE_BIN" --out-dir "$dir/base" | grep -E '^\| rust'
  fi
done
"$py" - "$out" "$rounds" <<'PY'
import json, statistics, sys
from pathlib import Path
out, rounds = Path(sys.argv[1]), int(sys.argv[2])
times = {}  # (who, mode) -> [s/step per round]
loads = []
for r in range(1, rounds + 1):
    for who in ("pytorch", "rag", "base"):
        f = out / f"round-{r}" / who / "train_speed.json"
        if not f.exists():
            continue
        data = json.loads(f.read_text())
        loads.append(data["load_before"][0])
        for run in data["runs"]:
            times.setdefault((who, run["mode"]), []).append(run["seconds_per_step"])
modes = sorted({m for _, m in times})
rows, summary = [], {"rounds": rounds, "load_1min_before_each": loads, "modes": {}}
for mode in modes:
    med = {who: statistics.median(times[(who, mode)]) for who in ("pytorch", "rag", "base") if (who, mode) in times}
    entry = {"median_seconds_per_step": med, "per_round": {w: times[(w, mode)] for w in med}}
    entry["rag_vs_pytorch"] = med["pytorch"] / med["rag"]
    line = f"| {mode} | {med['pytorch']:.3f} | {med['rag']:.3f} | **{entry['rag_vs_pytorch']:.2f}x** |"
    if "base" in med:
        entry["base_vs_pytorch"] = med["pytorch"] / med["base"]
        entry["rag_vs_base"] = med["base"] / med["rag"]
        line += f" {med['base']:.3f} | {entry['base_vs_pytorch']:.2f}x | {entry['rag_vs_base']:.2f}x |"
    summary["modes"][mode] = entry
    rows.append(line)
has_base = any("base" in e["median_seconds_per_step"] for e in summary["modes"].values())
head = "| mode | PyTorch s/step | rag s/step | rag vs PyTorch |"
rule = "| --- | ---: | ---: | ---: |"
if has_base:
    head += " base rag s/step | base vs PyTorch | rag vs base |"
    rule += " ---: | ---: | ---: |"
md = [f"# Training speed in {rounds} alternating rounds (medians)", "",
      "32 NLI triplets per step, max length 64, 2 threads (eval/training/train_speed.py per round).", "",
      head, rule, *rows, "",
      f"1-minute load before each run: {loads} (2 cores; the runs themselves load both)."]
(out.parent.parent / "train_speed_rounds.md").write_text("\n".join(md) + "\n")
(out.parent.parent / "train_speed_rounds.json").write_text(json.dumps(summary, indent=2) + "\n")
print("\n".join(md))
PY
