#!/usr/bin/env bash
# Chooses the retrieval defaults on the fullwiki questions whose supporting paragraphs are in the
# corpus (tuning_questions.py), retrieval only, full depth and size. Each setting is one
# `rag eval --no-generate` run under eval/answers/tuning/; summarize.py tabulates them.
#   eval/answers/tune_retrieval.sh [STAGE]   stage 1: modes x hops; 2: the second hop's beam and weight
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
DATA=${RAG_DATA:-../shared/data}
OUT=eval/answers/tuning
QUESTIONS=$OUT/questions.json
mkdir -p "$OUT"
[ -f "$QUESTIONS" ] || python3 eval/answers/tuning_questions.py "$DATA" "$QUESTIONS"
run() { # NAME FLAGS...
  local name=$1; shift
  echo "== $name: $*"
  "$RAG" eval --no-generate --questions "$QUESTIONS" --runs-dir "$OUT" --name "$name" "$@" | grep -E '^\| 6 '
}
stage=${1:-all}
if [ "$stage" = 1 ] || [ "$stage" = all ]; then
  for hops in 1 2; do
    for mode in dense bm25 hybrid; do run "$mode-h$hops" --mode $mode --hops $hops; done
    for w in 0.3 0.5 0.7; do run "fusion$w-h$hops" --mode fusion --fusion-weight $w --hops $hops; done
  done
fi
if [ "$stage" = 2 ] || [ "$stage" = all ]; then
  for beam in 2 3; do
    for hw in 0.15 0.3 0.5; do
      run "fusion${FUSION_WEIGHT:-0.3}-h2-b$beam-w$hw" --mode fusion --fusion-weight "${FUSION_WEIGHT:-0.3}" --hops 2 --hop-beam $beam --hop-weight $hw
    done
  done
fi
