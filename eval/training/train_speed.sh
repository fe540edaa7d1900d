#!/usr/bin/env bash
# Training speed: `rag train` and an equivalent PyTorch step side by side (run one after the
# other), ratio reported. Arguments go to eval/training/train_speed.py, e.g.
#   eval/training/train_speed.sh --mode ese,raw --steps 20 [--rag-bin PATH]
# Does not build rag: set CARGO_TARGET_DIR (or pass --rag-bin) to the release build to time.
# Run on a quiet machine; both sides use 2 threads. Writes eval/training/train_speed.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval/reference/setup.sh >/dev/null
exec eval/.venv/bin/python eval/training/train_speed.py "$@"
