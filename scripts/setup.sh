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
# A question both of whose paragraphs the corpus holds: the two-hop fusion search finds both.
question="Were Scott Derrickson and Ed Wood of the same nationality?"
step "search"
./rag search "$question" --mode fusion --hops 2
step "ask"
./rag ask "$question"
printf '\nready: try ./rag ask "your question" or ./rag search "your question" (see README.md)\n'
