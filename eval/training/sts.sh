#!/usr/bin/env bash
# STS: Spearman per layer x size of trained encoders (STS12-16, STS-B, SICK-R), the numbers
# eval/training/report.py compares across modes.
#   eval/training/sts.sh NAME...      (models under data/trained/NAME)
# Writes eval/training/sts/NAME/; for raw-nli also eval/training/sts/raw-nli-pca/ (post-hoc PCA
# beside truncation, the no-training baseline to ESE's first-k dimensions).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
OUT=eval/training/sts
for name in "$@"; do
  model=data/trained/$name
  [ -f "$model/ese.json" ] || { echo "$model is not a trained model" >&2; exit 1; }
  "$RAG_BIN" eval-sts --model "$model" --out "$OUT/$name"
  if [ "$name" = raw-nli ]; then
    "$RAG_BIN" eval-sts --model "$model" --dims 32,64,128,384 --reduce pca --out "$OUT/raw-nli-pca"
  fi
done
