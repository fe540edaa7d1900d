#!/usr/bin/env bash
# `rag ask` overhead and generation speed: asks a few distractor questions with --json and
# tabulates, per question, the time to answer (model already loaded), llama.cpp's own
# prompt-eval + generation time, the rest (retrieval, sentence selection, prompt; target < 5% of
# the total), and generation tokens/s as measured here vs as llama.cpp reports it (target within
# 5%). Needs an index (`rag index`, or pass --index DIR). Writes eval/answers/ask_overhead.md.
#   eval/answers/ask_overhead.sh [rag ask flags, e.g. --index index/eval-L1-3-6-xxxx --llm FILE]
# Builds rag first: on a machine with a shared cargo cache, export CARGO_TARGET_DIR to it
# (else scripts/common.sh uses ./target, a cold build of faiss and llama.cpp).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
cargo build --release -q
N=${N:-5}
OUT=$(mktemp)
python3 -c "
import json, sys
for q in json.load(open('../shared/data/hotpotqa/hotpot_dev_distractor_sample.json'))[:$N]:
    print(q['question'])" | while IFS= read -r question; do
  "$RAG_BIN" ask "$question" --json "$@" | python3 -c "import json,sys; print(json.dumps(json.load(sys.stdin)))" >> "$OUT"
done
python3 - "$OUT" > eval/answers/ask_overhead.md <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("# `rag ask` overhead and generation speed\n")
print("| question | answer | total ms | llama.cpp ms | rest ms | rest % | tokens/s (rag) | tokens/s (llama.cpp) | diff % |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    t, g = r["timings"], r["generation"]
    rest = t["total_ms"] - t["llama_ms"]
    diff = 100 * (g["tokens_per_second"] - g["llama_tokens_per_second"]) / g["llama_tokens_per_second"] if g["llama_tokens_per_second"] else 0
    print(f"| {r['question'][:60]} | {r['answer'][:30]} | {t['total_ms']:.0f} | {t['llama_ms']:.0f} | {rest:.1f} "
          f"| {100 * rest / t['total_ms']:.2f} | {g['tokens_per_second']:.1f} | {g['llama_tokens_per_second']:.1f} | {diff:+.1f} |")
print("\nrag's tokens/s: answer tokens over the wall time of the sampling + decoding loop; llama.cpp's: "
      "its single-token decode calls over their own time (its perf counters).")
PY
rm -f "$OUT"
cat eval/answers/ask_overhead.md
