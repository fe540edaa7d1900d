#!/usr/bin/env bash
# The baseline the ask pipeline is measured against: exact match on the first 300 distractor
# questions (the same subset everywhere) with the default generator, the previous pipeline's
# context (top-5 dense retrieval in one hop at full depth and 384 dims, five whole paragraphs:
# --mode dense --hops 1 --context-tokens 0), and with the gold paragraphs (--oracle), each with
# both prompt styles. Runs resume where they stopped and land in eval/answers/baseline/<name>/;
# the collected table goes to eval/answers/baseline_em.md.
#   eval/answers/baseline_em.sh [extra rag eval flags, e.g. --llm data/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf]
# N=100 runs the first 100 questions instead (other run names, so they do not mix).
# Takes hours on 2 cores (4 x 300 generations with a 1.5B model).
# Builds rag first: on a machine with a shared cargo cache, export CARGO_TARGET_DIR to it
# (else scripts/common.sh uses ./target, a cold build of faiss and llama.cpp).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
cargo build --release -q
N=${N:-300}
OUT=eval/answers/baseline
runs=()
for style in chat paper; do
  "$RAG_BIN" eval --mode dense --hops 1 --context-tokens 0 --layers 6 --dim 384 --top-k 5 \
    --limit "$N" --prompt-style "$style" --runs-dir "$OUT" --name "dense-$style-n$N" "$@"
  "$RAG_BIN" eval --oracle --limit "$N" --prompt-style "$style" \
    --runs-dir "$OUT" --name "oracle-$style-n$N" "$@"
  runs+=("dense-$style-n$N" "oracle-$style-n$N")
done
python3 - "${runs[@]}" > eval/answers/baseline_em.md <<'PY'
import json, sys
print("# Exact match of the previous pipeline (dense, whole paragraphs) and of the gold paragraphs\n")
print("| run | context | prompt | generator | n | EM | F1 | R@5 | both@5 | mean prompt tokens | tokens/s |")
print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
for name in sys.argv[1:]:
    s = json.load(open(f"eval/answers/baseline/{name}/summary.json"))
    c, cell = s["config"], s["cells"][0]
    ctx = "gold (oracle)" if c["oracle"] else f"top {c['top_k']} {c['mode']} L{cell['layers']} d{cell['dim']}"
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}"
    r5 = "-" if c["oracle"] else pct(cell["recall"]["5"])
    b5 = "-" if c["oracle"] else pct(cell["all_supporting"]["5"])
    tps = cell.get("generation_tokens_per_second")
    print(f"| {name} | {ctx} | {c['prompt_style']} | {c['generator']} | {cell['questions']} | {pct(cell['exact_match'])} "
          f"| {pct(cell['f1'])} | {r5} | {b5} | {cell['mean_prompt_tokens']:.0f} | {tps or 0:.1f} |")
PY
cat eval/answers/baseline_em.md
