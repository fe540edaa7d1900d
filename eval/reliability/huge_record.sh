#!/usr/bin/env bash
# Issue 54 item 16: one 50 MB paragraph beside a few ordinary ones, indexed by BEFORE_RAG (a
# build of main before only the head of a text was tokenised) and by RAG; peak memory (maximum
# resident set) and wall time from /usr/bin/time -v, in eval/reliability/huge_record.md.
#   BEFORE_RAG=/path/to/old/rag [RAG=./rag] [MODEL=data/models/all-MiniLM-L6-v2] \
#     eval/reliability/huge_record.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
BEFORE_RAG=${BEFORE_RAG:?set BEFORE_RAG to a build of main before the change}
MODEL=${MODEL:-data/models/all-MiniLM-L6-v2}
RESULT=eval/reliability/huge_record.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/corpus.jsonl" <<'PY'
import json, sys
words = "the river flows through the old city past the stone bridge and the harbor "
with open(sys.argv[1], "w") as out:
    for n in range(5):
        out.write(json.dumps({"title": f"Ordinary {n}", "text": words * 3}) + "\n")
    huge = words * (50_000_000 // len(words))
    out.write(json.dumps({"title": "Huge", "text": huge}) + "\n")
PY
measure() { # NAME BINARY
  /usr/bin/time -v "$2" index --model "$MODEL" --corpus "$work/corpus.jsonl" --index "$work/$1" \
    --layers 6 > /dev/null 2> "$work/$1.time"
  local peak wall
  peak=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$work/$1.time")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/$1.time")
  echo "| $1 | $peak | $wall |"
}
cpu=$(grep -o -w -E 'avx2|avx512f' /proc/cpuinfo | sort -u | xargs)
{
  echo "# One 50 MB record (issue 54 item 16)"
  echo
  echo "Made by \`eval/reliability/huge_record.sh\`: \`rag index\` (depth 6) of 5 ordinary paragraphs"
  echo "and one of 50 MB. Measured on a shared, loaded machine (2 cores; CPU flags: ${cpu:-none})."
  echo
  echo "| build | peak memory (MiB) | wall time |"
  echo "|---|---:|---:|"
  measure before "$BEFORE_RAG"
  measure after "$RAG"
} > "$RESULT"
cat "$RESULT"
