#!/usr/bin/env bash
# Builds check.cpp against the faiss that faiss-sys built into the cargo target dir and runs it:
# the mapped and the in-memory graph must print the same digests, and efSearch 1 and 300
# different ones. Output: eval/scale/faiss_mmap/result.txt.
#   [CARGO_TARGET_DIR=...] eval/scale/faiss_mmap/check.sh
set -euo pipefail
cd "$(dirname "$0")"
target=${CARGO_TARGET_DIR:-../../../target}
lib=$(ls -d "$target"/release/build/faiss-sys-*/out/lib/libfaiss.a | head -1)
out=$(dirname "$(dirname "$lib")")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nice g++ -std=c++17 -O1 -I"$out/include" check.cpp "$lib" -lgomp -lblas -llapack -o "$work/check"
"$work/check" "$work/graph.faiss" | sed -E 's/0x[0-9a-f]+/ptr/g' | tee result.txt
