#!/usr/bin/env bash
# Issue 2, encoding throughput: sentence-transformers (PyTorch) and `rag` side by side on the
# same 2,000 distractor paragraphs (max length 256, batch 64, 2 threads, depths 6/3/1), then the
# ratios. Run on a quiet machine: both use every core.
#   eval/issue2_encode.sh [LIMIT]
# Writes eval/issue2/encode_throughput.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
LIMIT=${1:-2000}
DATA=${RAG_DATA:-../shared/data}
CORPUS=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
TEMPLATE="{title}: {text}"
OUT=eval/issue2
mkdir -p "$OUT"
eval/reference/setup.sh >/dev/null
cargo build --release -q

echo "sentence-transformers ..." >&2
eval/.venv/bin/python eval/reference/encode_throughput.py --corpus "$CORPUS" --limit "$LIMIT" \
  --layers 6,3,1 --batch-size 64 --max-length 256 --threads 2 --template "$TEMPLATE" --json \
  > "$OUT/st.json"
echo "rag ..." >&2
"$RAG_BIN" bench encode --corpus "$CORPUS" --limit "$LIMIT" --layers 6,3,1 --batch-size 64 \
  --max-length 256 --template "$TEMPLATE" --json > "$OUT/rag.json"

python3 - "$OUT" <<'PY'
import json, sys, platform, datetime
out = sys.argv[1]
st = json.load(open(f"{out}/st.json"))
rag = json.load(open(f"{out}/rag.json"))
ours = {str(d["layers"]): d for d in rag["depths"]}
rows, report = [], {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
                    "paragraphs": st["paragraphs"], "sentence_transformers": st, "rag": rag, "ratio": {}}
for depth in ("6", "3", "1"):
    s, r = st["layers"][depth]["paragraphs_per_s"], ours[depth]["paragraphs_per_s"]
    report["ratio"][depth] = round(r / s, 3)
    rows.append(f"| {depth} | {s:.1f} | {r:.1f} | {r / s:.2f}x |")
scaling = ours["3"]["paragraphs_per_s"] / ours["6"]["paragraphs_per_s"]
report["rag_depth_scaling_3_vs_6"] = round(scaling, 3)
json.dump(report, open(f"{out}/encode_throughput.json", "w"), indent=1)
md = ["# Encoding throughput (issue 2)", "",
      f"{st['paragraphs']} distinct distractor paragraphs, `{st['template']}`, max length 256, batch 64, 2 threads.", "",
      "| layers | sentence-transformers p/s | rag p/s | rag / ST |", "| --- | --- | --- | --- |", *rows, "",
      f"rag depth scaling, layers 3 vs 6: {scaling:.2f}x (target >= 1.9x); full depth vs ST: "
      f"{report['ratio']['6']:.2f}x (target >= 1.5x)."]
open(f"{out}/encode_throughput.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
