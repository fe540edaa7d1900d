#!/usr/bin/env bash
# Dense Recall@5 of `rag` against sentence-transformers + faiss on the same corpus
# (both HotpotQA sample files), questions (1,186 distractor questions) and text format
# ("{title}. {text}", the format of the untrained baseline numbers), at depths 6 and 3 and dims 384 and
# 64; then query latency per mode on that 19k-paragraph index in one warm process.
#   eval/retrieval/recall_latency.sh
# Writes eval/retrieval/recall_latency.{json,md} (from rag_recall.json, query_latency.json and
# runs/recall-dot/). Builds index/hotpot-19k-dot once (about 10 minutes); eval/serving/measure.sh
# and eval/precision/measure.sh use that index too.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
DATA=${RAG_DATA:-../shared/data}
D=$DATA/hotpotqa
TEMPLATE="{title}. {text}"
INDEX=index/hotpot-19k-dot
OUT=eval/retrieval
REF=eval/reference/results/retrieval_recall.json
mkdir -p "$OUT"
cargo build --release -q

if ! python3 -c "import json,sys; sys.exit(0 if sys.argv[2] in json.load(open(sys.argv[1])) else 1)" "$REF" "$TEMPLATE" 2>/dev/null; then
  echo "reference recall missing for $TEMPLATE: running sentence-transformers + faiss (about 15 minutes)" >&2
  eval/reference/setup.sh >/dev/null
  eval/.venv/bin/python eval/reference/retrieval_recall.py --corpus "$D/hotpot_dev_distractor_sample.json" \
    --corpus "$D/hotpot_dev_fullwiki_sample.json" --questions "$D/hotpot_dev_distractor_sample.json" \
    --layers 6,3 --dims 384,64 --template "$TEMPLATE" --k 5 --json > "$OUT/reference_recall_dot.json"
  REF_ONE=$OUT/reference_recall_dot.json
else
  REF_ONE=""
fi

"$RAG_BIN" index --index "$INDEX" --layers 3,6 --template "$TEMPLATE" \
  --corpus "$D/hotpot_dev_distractor_sample.json" --corpus "$D/hotpot_dev_fullwiki_sample.json"
"$RAG_BIN" eval --no-generate --sweep --mode dense --hops 1 --index "$INDEX" --layers 3,6 --dims 64,384 \
  --name recall-dot --runs-dir "$OUT/runs" --fresh --json > "$OUT/rag_recall.json"
"$RAG_BIN" bench query --index "$INDEX" --modes dense,bm25,hybrid --limit 300 --json > "$OUT/query_latency.json"

python3 - "$OUT" "$REF" "$TEMPLATE" "$REF_ONE" <<'PY'
import json, sys
out, ref_path, template, ref_one = sys.argv[1:5]
ref = json.load(open(ref_one)) if ref_one else json.load(open(ref_path))[template]
rag = json.load(open(f"{out}/rag_recall.json"))["cells"]
lat = json.load(open(f"{out}/query_latency.json"))
rows, report = [], {"template": template, "recall_at_5": [], "latency": lat}
for r in rag:
    layers, dim = str(r["layers"]), str(r["dim"])
    ours = r["recall"]["5"]
    theirs = ref["layers"][layers][dim]["recall_at_k"]
    report["recall_at_5"].append({"layers": int(layers), "dim": int(dim), "rag": ours, "reference": theirs,
                                  "difference_points": round(100 * (ours - theirs), 2)})
    rows.append(f"| {layers} | {dim} | {ours:.3f} | {theirs:.3f} | {100 * (ours - theirs):+.2f} |")
json.dump(report, open(f"{out}/recall_latency.json", "w"), indent=1)
lrows = [f"| {l['mode']} | {l['p50_ms']:.2f} | {l['p90_ms']:.2f} | {l['p99_ms']:.2f} |" for l in lat["latencies"]]
md = ["# Dense Recall@5 against the reference, and query latency", "",
      f"Corpus: both HotpotQA sample files ({lat['documents']} paragraphs), `{template}`; 1,186 distractor questions; dense, exact faiss IndexFlatL2.", "",
      "| layers | dim | rag Recall@5 | sentence-transformers + faiss | difference (points) |", "| --- | --- | --- | --- | --- |", *rows, "",
      f"Query latency, warm process, {lat['latencies'][0]['queries']} questions, k=5, layers {lat['layers']}, dim {lat['dim']} (encode + search + fetch):", "",
      "| mode | p50 ms | p90 ms | p99 ms |", "| --- | --- | --- | --- |", *lrows]
open(f"{out}/recall_latency.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
