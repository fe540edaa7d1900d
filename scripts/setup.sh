#!/usr/bin/env bash
# One command for a fresh machine: build dependencies, default models, release build, the index
# of both HotpotQA sample files, and a first search. Safe to re-run: each step skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

step() { printf '\n== %s\n' "$*"; }

step "build dependencies"
ensure_build_deps
step "default models"
scripts/fetch-models.sh encoder llm
step "release build"
cargo build --release
ln -sfn "$RAG_BIN" rag
step "index (both HotpotQA sample files, depths 1,3,6)"
./rag index --layers 1,3,6
step "search"
./rag search "Which magazine was started first, Arthur's Magazine or First for Women?" --mode hybrid
printf '\nready: try ./rag search "your question" (see README.md)\n'
