#!/usr/bin/env bash
# Issue 3, retrieval grid: `rag eval --sweep --no-generate` over layers 1,3,6 x dims
# 32,64,128,384 on all 1,186 distractor questions, from no cached index, timed against one
# full-depth encoding of the same corpus (`rag index --layers 6`). Target: sweep <= 1.2x that.
# Writes eval/runs/issue3-sweep-retrieval/ (summary.md, heatmap.png) and eval/issue3_sweep.md.
# Takes about 9 minutes of both cores (two full encodings of the 19k-paragraph corpus).
# Builds rag first: on a machine with a shared cargo cache, export CARGO_TARGET_DIR to it
# (else scripts/common.sh uses ./target, a cold build of faiss and llama.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
cargo build --release -q
# A scratch base index path that does not exist, so the sweep has to build its own.
BASE=index/issue3-no-such-index
rm -rf index/issue3-full-L6 index/issue3-full-L6.building index/eval-L1-3-6-*
start=$(date +%s.%N)
"$RAG_BIN" index --index index/issue3-full-L6 --layers 6 --fresh
mid=$(date +%s.%N)
"$RAG_BIN" eval --index "$BASE" --sweep --no-generate --name issue3-sweep-retrieval --fresh
end=$(date +%s.%N)
python3 - "$start" "$mid" "$end" > eval/issue3_sweep.md <<'PY'
import sys
start, mid, end = map(float, sys.argv[1:])
full, sweep = mid - start, end - mid
print("# Issue 3: retrieval sweep, layers 1,3,6 x dims 32,64,128,384, all distractor questions\n")
print(f"- one full-depth index build (`rag index --layers 6`): {full:.1f} s")
print(f"- `rag eval --sweep --no-generate` from no cached index: {sweep:.1f} s")
print(f"- ratio: {sweep / full:.2f} (target <= 1.2)\n")
print(open("eval/runs/issue3-sweep-retrieval/summary.md").read())
print("![heatmap](runs/issue3-sweep-retrieval/heatmap.png)")
PY
rm -rf index/issue3-full-L6
cat eval/issue3_sweep.md
