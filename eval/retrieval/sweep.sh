#!/usr/bin/env bash
# The cost of a retrieval grid: `rag eval --sweep --no-generate --mode dense --hops 1` over layers 1,3,6 x dims
# 32,64,128,384 on all 1,186 distractor questions, from no cached index, timed against one
# full-depth encoding of the same corpus (`rag index --layers 6`). Target: sweep <= 1.2x that.
# Writes eval/retrieval/runs/dense-grid/ (summary.md, heatmap.png) and eval/retrieval/sweep.md.
# Takes about 9 minutes of both cores (two full encodings of the 19k-paragraph corpus).
# Builds rag first: on a machine with a shared cargo cache, export CARGO_TARGET_DIR to it
# (else scripts/common.sh uses ./target, a cold build of faiss and llama.cpp).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
cargo build --release -q
# A scratch base index path that does not exist, so the sweep has to build its own.
BASE=index/sweep-no-such-index
rm -rf index/sweep-full-L6 index/sweep-full-L6.building index/eval-L1-3-6-*
start=$(date +%s.%N)
"$RAG_BIN" index --index index/sweep-full-L6 --layers 6 --fresh
mid=$(date +%s.%N)
"$RAG_BIN" eval --index "$BASE" --sweep --no-generate --mode dense --hops 1 \
  --runs-dir eval/retrieval/runs --name dense-grid --fresh
end=$(date +%s.%N)
python3 - "$start" "$mid" "$end" > eval/retrieval/sweep.md <<'PY'
import sys
start, mid, end = map(float, sys.argv[1:])
full, sweep = mid - start, end - mid
print("# Retrieval sweep, dense, layers 1,3,6 x dims 32,64,128,384, all distractor questions\n")
print(f"- one full-depth index build (`rag index --layers 6`): {full:.1f} s")
print(f"- `rag eval --sweep --no-generate` from no cached index: {sweep:.1f} s")
print(f"- ratio: {sweep / full:.2f} (target <= 1.2)\n")
print(open("eval/retrieval/runs/dense-grid/summary.md").read())
print("![heatmap](runs/dense-grid/heatmap.png)")
PY
rm -rf index/sweep-full-L6
cat eval/retrieval/sweep.md
