#!/usr/bin/env bash
# Issue 54 items 11, 12, 14, 15 (16: huge_record.sh): what a careless or hostile user types and
# what a corpus holds, tried on BEFORE_RAG (a build of main before the fixes) and on RAG; one
# row per case, OK where the behaviour is the one wanted, in eval/reliability/adversarial_text.md.
#   BEFORE_RAG=/path/to/old/rag [RAG=./rag] [MODEL=data/models/all-MiniLM-L6-v2] \
#     eval/reliability/adversarial_text.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
BEFORE_RAG=${BEFORE_RAG:?set BEFORE_RAG to a build of main before the fixes}
MODEL=${MODEL:-data/models/all-MiniLM-L6-v2}
RESULT=eval/reliability/adversarial_text.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' \
  '{"title":"Villaggio Mall","text":"The biggest store, today owned by the State of Qatar, is in Doha."}' \
  '{"title":"Harrods","text":"Harrods is a department store in London."}' \
  '{"title":"Evil\u001b]0;owned\u0007\u202etitle","text":"A store with \u001b[2J in its text."}' \
  > "$work/corpus.jsonl"
printf '%s\n' '{"title":"A","text":"a."}' '{"title":"","text":"b."}' '{"title":"","text":"c."}' \
  > "$work/untitled.jsonl"
question="which store - today owned by the State of Qatar - is the biggest?"

case_11() { # questions are words: both stores found for the HotpotQA question
  local n
  n=$("$1" search "$question" --index "$2" --mode bm25 --json |
    python3 -c 'import json,sys; print(sum(h["title"] in ("Villaggio Mall","Harrods") for h in json.load(sys.stdin)["hits"]))')
  [ "$n" = 2 ] && echo OK || echo "FAIL ($n of the 2 stores found)"
}
case_12() { # an untitled paragraph is a named bad record, not a dropped duplicate
  local err
  err=$("$1" index --model "$MODEL" --corpus "$work/untitled.jsonl" --index "$work/u-$3" --layers 1 2>&1 >/dev/null)
  case "$err" in *"empty title"*) echo OK ;; *) echo "FAIL (indexed, exit 0)" ;; esac
}
case_14() { # `rag search ... | head -1`: quiet exit on the closed pipe
  local err
  err=$( { "$1" search store --index "$2" --mode bm25 -k 3 | head -c 0; } 2>&1)
  [ -z "$err" ] && echo OK || echo "FAIL ($(grep -m1 -o 'failed printing[^"]*' <<< "$err" || echo stderr))"
}
case_15() { # no raw ESC, BEL or RTL override from corpus text on the terminal
  if "$1" search store --index "$2" --mode bm25 | grep -q -P '[\x1b\x07]|\x{202e}'; then
    echo "FAIL (raw control characters printed)"
  else
    echo OK
  fi
}
{
  echo "# Questions and corpora as text (issue 54 items 11, 12, 14, 15)"
  echo
  echo "Made by \`eval/reliability/adversarial_text.sh\` (item 16: \`huge_record.md\`)."
  echo
  echo "| item | case | before | after |"
  echo "|---|---|---|---|"
  for side in before after; do
    bin=$RAG; [ "$side" = before ] && bin=$BEFORE_RAG
    "$bin" index --model "$MODEL" --corpus "$work/corpus.jsonl" --index "$work/$side" --layers 1 \
      > /dev/null 2>&1 || echo "index build failed with $bin" >&2
    for item in 11 12 14 15; do
      echo "$(case_$item "$bin" "$work/$side" "$side")" > "$work/$item.$side"
    done
  done
  describe=(
    [11]="\`search --mode bm25 \"$question\"\` finds both stores"
    [12]="two paragraphs with an empty title: refused by name (not one dropped as a duplicate)"
    [14]="\`rag search ... \\| head -c 0\`: no panic, nothing on stderr"
    [15]="a title with ESC, BEL and U+202E: escaped on the terminal"
  )
  for item in 11 12 14 15; do
    echo "| $item | ${describe[$item]} | $(cat "$work/$item.before") | $(cat "$work/$item.after") |"
  done
} > "$RESULT"
cat "$RESULT"
