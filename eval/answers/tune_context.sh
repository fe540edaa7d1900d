#!/usr/bin/env bash
# Chooses the context budget on the fullwiki tuning questions (see tune_retrieval.sh): each
# budget's prompts are built with the default retrieval and measured, without generating
# (`rag eval --context-only`): how often the gold answer is in the context, and prompt tokens.
#   eval/answers/tune_context.sh [BUDGET...]   (default: 0 100 150 200 250; 0 is whole paragraphs)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
DATA=${RAG_DATA:-../shared/data}
OUT=eval/answers/tuning
QUESTIONS=$OUT/questions.json
mkdir -p "$OUT"
[ -f "$QUESTIONS" ] || python3 eval/answers/tuning_questions.py "$DATA" "$QUESTIONS"
for budget in "${@:-0 100 150 200 250}"; do
  for b in $budget; do
    echo "== context $b"
    "$RAG" eval --context-only --questions "$QUESTIONS" --runs-dir "$OUT" --name "context-$b" \
      --context-tokens "$b" | grep -E '^\| 6 '
  done
done
# Then the sentence scores' weights at a budget of 200 (dense,lexical,rank,first), with
# SENTENCE_WEIGHTS="1,0.5,0.3,0.15 1,0.5,0.6,0.15 ..." eval/answers/tune_context.sh 200
for weights in ${SENTENCE_WEIGHTS:-}; do
  echo "== context 200, sentence weights $weights"
  "$RAG" eval --context-only --questions "$QUESTIONS" --runs-dir "$OUT" --name "context-200-w$weights" \
    --context-tokens 200 --sentence-weights "$weights" | grep -E '^\| 6 '
done
