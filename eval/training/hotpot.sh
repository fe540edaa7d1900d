#!/usr/bin/env bash
# HotpotQA: dense Recall@5 of trained encoders at 3 and 6 layers x 64 and 384 dims, on the same
# corpus (both HotpotQA sample files), questions (the distractor sample) and text format
# ("{title}. {text}") as the untrained model's numbers (eval/retrieval/rag_recall.json).
#   eval/training/hotpot.sh NAME...      (models under data/trained/NAME)
# Builds index/trained-NAME once per model; writes eval/training/hotpot-NAME.json and
# eval/training/runs/NAME/.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
D=${RAG_DATA:-../shared/data}/hotpotqa
OUT=eval/training
mkdir -p "$OUT"
for name in "$@"; do
  model=data/trained/$name
  [ -f "$model/ese.json" ] || { echo "$model is not a trained model" >&2; exit 1; }
  "$RAG_BIN" index --model "$model" --index "index/trained-$name" --layers 3,6 --template "{title}. {text}" \
    --corpus "$D/hotpot_dev_distractor_sample.json" --corpus "$D/hotpot_dev_fullwiki_sample.json" >&2
  "$RAG_BIN" eval --no-generate --sweep --mode dense --hops 1 --index "index/trained-$name" \
    --layers 3,6 --dims 64,384 --name "$name" --runs-dir "$OUT/runs" --fresh --json > "$OUT/hotpot-$name.json"
  python3 - "$OUT/hotpot-$name.json" "$name" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
print(sys.argv[2], " ".join(f"R@5[{c['layers']}/{c['dim']}]={c['recall']['5']:.3f}" for c in summary["cells"]))
PY
done
