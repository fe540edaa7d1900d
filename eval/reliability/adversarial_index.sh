#!/usr/bin/env bash
# Issue 54, cases 1-10 (data loss and broken indexes), tried as a careless or hostile user would:
# `rag index` into a folder of notes, beside unrelated `.old`/`.building` folders, onto a file,
# through a symlink, twice at once; an index missing a BM25 file, missing tantivy's lock files,
# with a manifest stripped of its checksums; file modes; /health after a damaged manifest is put
# back. Small indexes of the HotpotQA distractor sample, default MiniLM encoder.
# Writes adversarial_index.{json,md} here.
# Usage: eval/reliability/adversarial_index.sh [--baseline PATH-TO-ANOTHER-rag]
#   (each case is also run with that binary, e.g. one built from main before the fixes, to show
#   that the cases fail there; WORK=/tmp/rag-adversarial by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
OUT=eval/reliability
WORK=${WORK:-/tmp/rag-adversarial}
DATA=${RAG_DATA:-../shared/data}
private_rag "$WORK"
python3 "$OUT/adversarial_index.py" --rag "$RAG" --hotpot "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" \
  --work "$WORK" --out "$OUT" "$@"
