#!/usr/bin/env bash
# The memory-mapped HNSW graph, damaged: a small index (the first 40 distractor records, depth
# 3 x 64, --ann hnsw:8), then copies of it with the graph cut in half, emptied, a 4 KiB block
# zeroed, one bit flipped in the vectors and one in the node tables; `rag search` on each must
# exit non-zero with one line naming the file (never answer). Writes
# eval/scale/results/cold_search/mapped_graph_damage.md.
#   [MODEL=DIR] eval/scale/mapped_graph_damage.sh RAG
set -euo pipefail
cd "$(dirname "$0")/../.."
rag=$(realpath "$1")
model=$(realpath "${MODEL:-data/models/all-MiniLM-L6-v2}")
out=$PWD/eval/scale/results/cold_search/mapped_graph_damage.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "${RAG_DATA:-../shared/data}/hotpotqa/hotpot_dev_distractor_sample.json" "$work/a.json" <<'PY'
import json, sys
json.dump(json.load(open(sys.argv[1]))[:40], open(sys.argv[2], "w"))
PY
cd "$work"
nice "$rag" index --corpus a.json --index idx --layers 3 --dim 64 --ann hnsw:8 --model "$model" >/dev/null 2>&1
graph=dense/L3-d64.hnsw.faiss
size=$(stat -c %s "idx/$graph")
question="Which magazine was started first?"
{
  echo "# A damaged memory-mapped graph (\`$graph\`, $size bytes), \`rag search\` on each copy"
  echo
  echo "| damage | exit | lines | message |"
  echo "| --- | ---: | ---: | --- |"
} >"$out"
damage() { # name python-statement
  rm -rf c && cp -r idx c
  python3 -c "$2"
  set +e
  msg=$("$rag" search "$question" --index c --model "$model" --k 3 2>&1 >/dev/null)
  rc=$?
  set -e
  echo "| $1 | $rc | $(printf '%s\n' "$msg" | grep -c .) | ${msg//|/\\|} |" >>"$out"
}
damage "none (a copy: hashed, served)" "pass"
damage "cut in half" "import os; os.truncate('c/$graph', $size // 2)"
damage "emptied" "import os; os.truncate('c/$graph', 0)"
damage "4 KiB zeroed in the middle" "f = open('c/$graph', 'r+b'); f.seek($size // 2); f.write(bytes(4096))"
damage "one bit in the last vector" "f = open('c/$graph', 'r+b'); f.seek($size - 100); b = f.read(1); f.seek($size - 100); f.write(bytes([b[0] ^ 0x40]))"
damage "one bit in the node tables" "f = open('c/$graph', 'r+b'); f.seek(200); b = f.read(1); f.seek(200); f.write(bytes([b[0] ^ 1]))"
cat "$out"
