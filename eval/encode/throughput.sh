#!/usr/bin/env bash
# Encoding throughput: sentence-transformers (PyTorch) and `rag` side by side on the
# same 2,000 distractor paragraphs (max length 256, batch 64, 2 threads, depths 6/3/1), then the
# ratios. Run on a quiet machine: both use every core. The two alternate for ROUNDS rounds
# (default 3) and the medians are reported: on a shared virtual machine the speed of both drifts
# by up to 10% from one minute to the next.
#   [ROUNDS=3] eval/encode/throughput.sh [LIMIT]
# Writes eval/encode/throughput.{json,md} (and each round's st-N.json, rag-N.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
LIMIT=${1:-2000}
DATA=${RAG_DATA:-../shared/data}
CORPUS=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
TEMPLATE="{title}: {text}"
OUT=eval/encode
mkdir -p "$OUT"
eval/reference/setup.sh >/dev/null
cargo build --release -q

ROUNDS=${ROUNDS:-3}
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS: sentence-transformers ..." >&2
  eval/.venv/bin/python eval/reference/encode_throughput.py --corpus "$CORPUS" --limit "$LIMIT" \
    --layers 6,3,1 --batch-size 64 --max-length 256 --threads 2 --template "$TEMPLATE" --json \
    > "$OUT/st-$round.json"
  echo "round $round/$ROUNDS: rag ..." >&2
  "$RAG_BIN" bench encode --corpus "$CORPUS" --limit "$LIMIT" --layers 6,3,1 --batch-size 64 \
    --max-length 256 --template "$TEMPLATE" --json > "$OUT/rag-$round.json"
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys, platform, datetime, statistics
out, rounds = sys.argv[1], int(sys.argv[2])
st = [json.load(open(f"{out}/st-{i}.json")) for i in range(1, rounds + 1)]
rag = [json.load(open(f"{out}/rag-{i}.json")) for i in range(1, rounds + 1)]
ours = [{str(d["layers"]): d["paragraphs_per_s"] for d in r["depths"]} for r in rag]
theirs = [{d: s["layers"][d]["paragraphs_per_s"] for d in ("6", "3", "1")} for s in st]
rows, report = [], {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
                    "paragraphs": st[0]["paragraphs"], "rounds": rounds, "sentence_transformers": st, "rag": rag,
                    "median_paragraphs_per_s": {}, "ratio": {}}
for depth in ("6", "3", "1"):
    s = statistics.median(t[depth] for t in theirs)
    r = statistics.median(o[depth] for o in ours)
    ratio = statistics.median(o[depth] / t[depth] for o, t in zip(ours, theirs))
    report["median_paragraphs_per_s"][depth] = {"sentence_transformers": s, "rag": r}
    report["ratio"][depth] = round(ratio, 3)
    per_round = ", ".join(f"{o[depth] / t[depth]:.2f}" for o, t in zip(ours, theirs))
    rows.append(f"| {depth} | {s:.1f} | {r:.1f} | {ratio:.2f}x | {per_round} |")
scaling = statistics.median(o["3"] / o["6"] for o in ours)
report["rag_depth_scaling_3_vs_6"] = round(scaling, 3)
json.dump(report, open(f"{out}/throughput.json", "w"), indent=1)
md = ["# Encoding throughput", "",
      f"{st[0]['paragraphs']} distinct distractor paragraphs, `{st[0]['template']}`, max length 256, batch 64, "
      f"2 threads; sentence-transformers and rag alternating for {rounds} rounds, medians.", "",
      "| layers | sentence-transformers p/s | rag p/s | rag / ST (median) | per round |",
      "| --- | --- | --- | --- | --- |", *rows, "",
      f"rag depth scaling, layers 3 vs 6: {scaling:.2f}x (target >= 1.9x); full depth vs ST: "
      f"{report['ratio']['6']:.2f}x (target >= 1.5x)."]
open(f"{out}/throughput.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
