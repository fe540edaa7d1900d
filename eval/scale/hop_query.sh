#!/usr/bin/env bash
# The second hop's BM25 query rule (`--hop-query`), chosen on the fullwiki questions whose
# supporting paragraphs are in the corpus (eval/answers/tuning_questions.py) with the default
# pipeline on the 19k-paragraph index, retrieval only; the distractor questions are reported
# beside the chosen rule and never choose. Each setting is one resumable `rag eval` run under
# eval/scale/hop_query/runs/; report.py tabulates them into eval/scale/hop_query/result.md.
#   eval/scale/hop_query.sh [RULE...]      (default: full sentence title words:16 words:32)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
DATA=${RAG_DATA:-../shared/data}
INDEX=${INDEX:-index/default}
OUT=eval/scale/hop_query/runs
QUESTIONS=eval/scale/hop_query/fullwiki_questions.json
mkdir -p "$OUT"
[ -f "$QUESTIONS" ] || python3 eval/answers/tuning_questions.py "$DATA" "$QUESTIONS"
rules=("$@")
[ ${#rules[@]} -gt 0 ] || rules=(full sentence title words:16 words:32)
for rule in "${rules[@]}"; do
  name=fullwiki-${rule/:/}
  echo "== $name"
  nice "$RAG" eval --no-generate --index "$INDEX" --questions "$QUESTIONS" --runs-dir "$OUT" \
    --name "$name" --hop-query "$rule" | grep -E '^\| ' | tail -1
done
# The distractor questions, for the record only: DISTRACTOR="full sentence" to run them.
for rule in ${DISTRACTOR:-}; do
  name=distractor-${rule/:/}
  echo "== $name"
  nice "$RAG" eval --no-generate --index "$INDEX" --questions "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" \
    --runs-dir "$OUT" --name "$name" --hop-query "$rule" | grep -E '^\| ' | tail -1
done
