#!/usr/bin/env bash
# The corruption suite: two small indexes of the HotpotQA distractor sample (records
# 1-40 and 41-80, about 400 paragraphs each, default MiniLM encoder, depths 3 and 6), then every
# file of the first truncated, zeroed, bit-flipped and swapped with the second's, and search, ask
# (with the 0.5B generator when present) and serve run on each. Writes corruption.{json,md} here.
# Usage: eval/reliability/corruption.sh [--no-serve]   (WORK=/tmp/rag-reliability by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
OUT=eval/reliability
WORK=${WORK:-/tmp/rag-reliability}
DATA=${RAG_DATA:-../shared/data}
LLM=${RAG_SMALL_LLM:-data/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf}
private_rag "$WORK"
python3 - "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" "$WORK" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))
json.dump(records[:40], open(f"{sys.argv[2]}/a.json", "w"))
json.dump(records[40:80], open(f"{sys.argv[2]}/b.json", "w"))
PY
for name in a b; do
  "$RAG" index --corpus "$WORK/$name.json" --index "$WORK/index-$name" --layers 3,6 >/dev/null
done
python3 "$OUT/corruption.py" --rag "$RAG" --pristine "$WORK/index-a" --other "$WORK/index-b" \
  --llm "$LLM" --work "$WORK" --out "$OUT" "$@"
