#!/usr/bin/env bash
# `--precision int8` against f32 on the default model, each measured in its own warm process,
# alternating, ROUNDS times (default 2): encoding throughput (`rag bench encode`, 1,000
# distractor paragraphs at 6 and 3 layers), query latency (`rag bench query`, 300 questions,
# dense), HotpotQA dense recall with int8 questions against the f32 19k index, and the int8
# vectors' lowest cosine to the reference fixture (the golden test). Writes each measurement under
# eval/precision/ and prints the summary table. Run on a quiet machine.
#   eval/precision/measure.sh | tee eval/precision/summary.md
# INDEX=index/hotpot-19k-dot by default, the f32 index eval/retrieval/recall_latency.sh builds.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
ROUNDS=${ROUNDS:-2}
INDEX=${INDEX:-index/hotpot-19k-dot}
OUT=eval/precision
[ -d "$INDEX" ] || { echo "no index at $INDEX (eval/retrieval/recall_latency.sh builds it)" >&2; exit 1; }
mkdir -p "$OUT"
cargo build --release -q

for round in $(seq 1 "$ROUNDS"); do
  for precision in f32 int8; do
    "$RAG_BIN" bench encode --layers 6,3 --limit 1000 --precision "$precision" --json \
      > "$OUT/encode-$precision-$round.json"
    "$RAG_BIN" bench query --index "$INDEX" --modes dense --limit 300 --precision "$precision" \
      --json > "$OUT/query-$precision-$round.json"
  done
done
for precision in f32 int8; do
  "$RAG_BIN" eval --index "$INDEX" --layers 3,6 --dims 64,384 --sweep --no-generate --mode dense --hops 1 \
    --precision "$precision" --runs-dir "$OUT/runs" --name "recall-$precision" --fresh \
    > /dev/null
done
cargo test --release -q --test golden_vectors int8 -- --nocapture 2>&1 \
  | grep "lowest cosine" > "$OUT/cosine.txt"

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
load = lambda name: json.load(open(f"{out}/{name}"))
print("| measure | f32 | int8 | int8 / f32 |\n| --- | ---: | ---: | ---: |")
for layers in (6, 3):
    per = {p: statistics.median(
        next(d["paragraphs_per_s"] for d in load(f"encode-{p}-{r}.json")["depths"] if d["layers"] == layers)
        for r in range(1, rounds + 1)) for p in ("f32", "int8")}
    print(f"| encoding, {layers} layers (paragraphs/s, median of {rounds}) | {per['f32']:.1f} | {per['int8']:.1f} | {per['int8'] / per['f32']:.2f}x |")
for key, label in (("p50_ms", "p50"), ("mean_encode_ms", "mean encode")):
    per = {p: statistics.median(load(f"query-{p}-{r}.json")["latencies"][0][key]
                                for r in range(1, rounds + 1)) for p in ("f32", "int8")}
    print(f"| dense query {label} (ms, median of {rounds}) | {per['f32']:.2f} | {per['int8']:.2f} | {per['int8'] / per['f32']:.2f}x |")
cells = {p: {(c["layers"], c["dim"]): c["recall"]["5"] for c in load(f"runs/recall-{p}/summary.json")["cells"]}
         for p in ("f32", "int8")}
for cell in sorted(cells["f32"]):
    a, b = cells["f32"][cell], cells["int8"][cell]
    print(f"| Recall@5, {cell[0]} layers / {cell[1]} dims | {a:.3f} | {b:.3f} | {b - a:+.3f} |")
print(open(f"{out}/cosine.txt").read().strip())
PY
