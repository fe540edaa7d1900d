#!/usr/bin/env bash
# Where one encoding batch's time goes, function by function, for a CPU without hardware
# counters (a VM): `perf record -e cpu-clock` over examples/encode_profile (one batch of 64
# distractor paragraphs, ROUNDS rounds after a warm-up, as profile.sh), then each function's
# share of the samples and the epilogue's hottest instructions (`perf annotate`), with the
# CPU's flags and the cap.
#   [RAG_MAX_ISA=avx2] [ROUNDS=5] [PRECISION=f32] [PROFILE_BIN=PATH] eval/encode/perf_symbols.sh LABEL
# Writes eval/encode/perf-LABEL.txt. PROFILE_BIN: an encode_profile binary (default: built here).
set -euo pipefail
cd "$(dirname "$0")/../.."
LABEL=${1:?usage: perf_symbols.sh LABEL}
DATA=${RAG_DATA:-../shared/data}
MODEL=${RAG_MODEL:-data/models/all-MiniLM-L6-v2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
command -v perf >/dev/null || { echo "perf_symbols.sh: perf is not installed (apt install linux-perf)" >&2; exit 1; }
BIN=${PROFILE_BIN:-}
if [ -z "$BIN" ]; then
  nice cargo build --release -q --example encode_profile
  BIN=$CARGO_TARGET_DIR/release/examples/encode_profile
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=eval/encode/perf-$LABEL.txt
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | sort | tr '\n' ' ')
nice perf record -q -e cpu-clock -F 2000 -o "$TMP/perf.data" "$BIN" \
  "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" "$MODEL" 64 "${ROUNDS:-5}" "${PRECISION:-f32}" 6 \
  > "$TMP/profile.json"
{
  echo "# perf_symbols.sh $LABEL, $(date -u +%FT%RZ)"
  echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs) model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | xargs); flags $FLAGS; RAG_MAX_ISA=${RAG_MAX_ISA:-}; ${PRECISION:-f32}"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"# batch {1000*r['batch_seconds']:.0f} ms ({r['paragraphs']/r['batch_seconds']:.1f} paragraphs/s), mean of {r['rounds']} rounds\")" "$TMP/profile.json"
  echo "## share of samples by function"
  perf report -i "$TMP/perf.data" --no-children --sort symbol --stdio 2>/dev/null > "$TMP/report.txt"
  grep -E '^ +[0-9.]+%' "$TMP/report.txt" | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' | sed -n 1,15p
  sed -nE 's/.*\[\.\] (rag::encoder::gemm::epilogue::.*finish_[a-z0-9]+).*/\1/p' "$TMP/report.txt" | sort -u \
    | while read -r symbol; do
        echo "## $symbol: instructions with over 3% of its samples"
        perf annotate -i "$TMP/perf.data" --stdio -s "$symbol" 2>/dev/null < /dev/null | awk '$1+0 > 3'
      done
} > "$OUT"
cat "$OUT"
