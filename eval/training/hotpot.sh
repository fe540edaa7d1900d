#!/usr/bin/env bash
# Issue 4, HotpotQA: dense Recall@5 of trained encoders at 3 layers / 64 dims and 6 layers /
# 384 dims, on the same corpus (both HotpotQA sample files), questions (the distractor sample)
# and text format ("{title}. {text}") as the untrained numbers in the issue (eval/issue2/).
#   eval/issue4_hotpot.sh NAME...      (models under data/trained/NAME)
# Builds index/issue4-NAME once per model; writes eval/issue4/hotpot-NAME.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
D=${RAG_DATA:-../shared/data}/hotpotqa
OUT=eval/issue4
mkdir -p "$OUT"
for name in "$@"; do
  model=data/trained/$name
  [ -f "$model/ese.json" ] || { echo "$model is not a trained model" >&2; exit 1; }
  "$RAG_BIN" index --model "$model" --index "index/issue4-$name" --layers 3,6 --template "{title}. {text}" \
    --corpus "$D/hotpot_dev_distractor_sample.json" --corpus "$D/hotpot_dev_fullwiki_sample.json" >&2
  "$RAG_BIN" eval --no-generate --sweep --index "index/issue4-$name" --layers 3,6 --dims 64,384 \
    --name "issue4-$name" --runs-dir "$OUT/runs" --fresh --json > "$OUT/hotpot-$name.json"
  python3 - "$OUT/hotpot-$name.json" "$name" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
print(sys.argv[2], " ".join(f"R@5[{c['layers']}/{c['dim']}]={c['recall']['5']:.3f}" for c in summary["cells"]))
PY
done
