#!/usr/bin/env bash
# Issue 54 item 11: BM25 read questions and second-hop queries as tantivy query syntax; now they
# are plain words. Retrieval before (BEFORE_RAG: a build of main before the change) and after
# (RAG), the default pipeline (fusion, two hops, title links) and BM25 alone (two hops), over
# the fullwiki and distractor question samples. Runs resume; each lands in
# eval/answers/runs/bm25-plain-text/<name>/, the table in eval/answers/bm25_plain_text.md.
#   BEFORE_RAG=/path/to/old/rag [RAG=./rag] [INDEX=index/default] eval/answers/bm25_plain_text.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
BEFORE_RAG=${BEFORE_RAG:?set BEFORE_RAG to a build of main before plain-text questions}
INDEX=${INDEX:-index/default}
DATA=${RAG_DATA:-../shared/data}/hotpotqa
OUT=eval/answers/runs/bm25-plain-text
RESULT=eval/answers/bm25_plain_text.md
mkdir -p "$OUT"
row() { # NAME: its both@5 and R@5 from summary.json
  python3 - "$OUT/$1/summary.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["cells"][0]
print(f"{r['questions']} | {100 * r['all_supporting']['5']:.1f} | {100 * r['recall']['5']:.1f}")
PY
}
{
  echo "# BM25 questions as words (issue 54 item 11)"
  echo
  echo "Made by \`eval/answers/bm25_plain_text.sh\` on index \`$INDEX\` (retrieval only, top 5, full"
  echo "depth and size). before: questions and second-hop queries parsed as tantivy query syntax"
  echo "(leniently); after: plain words, tokenised like the documents."
  echo
  echo "| questions | pipeline | n | both@5 before | R@5 before | both@5 after | R@5 after |"
  echo "|---|---|---:|---:|---:|---:|---:|"
} > "$RESULT.tmp"
for questions in fullwiki distractor; do
  file=$DATA/hotpot_dev_${questions}_sample.json
  for pipeline in default bm25; do
    flags=(--no-generate --index "$INDEX" --questions "$file" --runs-dir "$OUT")
    [ "$pipeline" = bm25 ] && flags+=(--mode bm25)
    for side in before after; do
      bin=$RAG; [ "$side" = before ] && bin=$BEFORE_RAG
      name=$questions-$pipeline-$side
      echo "== $name" >&2
      "$bin" eval "${flags[@]}" --name "$name" > /dev/null
    done
    before=$(row "$questions-$pipeline-before"); after=$(row "$questions-$pipeline-after")
    echo "| $questions | $pipeline | ${before%% |*} | ${before#* | } | ${after#* | } |" >> "$RESULT.tmp"
  done
done
mv "$RESULT.tmp" "$RESULT"
cat "$RESULT"
