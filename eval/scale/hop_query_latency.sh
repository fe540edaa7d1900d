#!/usr/bin/env bash
# Warm fusion two-hop /search latency on a large index for each second-hop BM25 query rule
# (`rag serve --hop-query RULE`), the first 100 distractor questions:
# eval/scale/results/hop_query/<rule>.json.
#   eval/scale/hop_query_latency.sh INDEX [RULE...]   (default: full sentence title words:16 words:32)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
index=$1; shift
rules=("$@")
[ ${#rules[@]} -gt 0 ] || rules=(full sentence title words:16 words:32)
out=eval/scale/results/hop_query
for rule in "${rules[@]}"; do
  nice python3 eval/scale/serve_probe.py --rag "$RAG" --index "$index" --out "$out/${rule/:/}.json" --questions 100 \
    --serve-flag=--hop-query="$rule" --mode 'fusion-two-hop={"mode":"fusion","hops":2}' > /dev/null
done
