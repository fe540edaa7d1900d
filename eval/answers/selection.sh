#!/usr/bin/env bash
# Issue 58, items 2 and 3: the context selection (chosen on the fullwiki tuning questions,
# reported on the distractor ones) and answers that do not hinge on the encoder's precision.
# Every stage is re-runnable; `rag eval` runs resume by name.
#   eval/answers/selection.sh contexts    # fullwiki 240, --context-only, every selection setting
#   eval/answers/selection.sh precision   # distractor first 300, --context-only, f32 and int8
#                                         # questions on the f32 index: prompts that change
#   eval/answers/selection.sh em-precision  # answers for the prompts int8 changed (and the
#                                         # current default's for the same questions)
#   eval/answers/selection.sh em-tuning   # fullwiki 240: the chosen selection against the
#                                         # default, answers only where the prompt differs
#   eval/answers/selection.sh em-distractor  # the same on the distractor first 300 (reports)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
DATA=${RAG_DATA:-../shared/data}
INDEX=${INDEX:-index/default}
TUNING=eval/answers/tuning
RUNS=eval/answers/runs
QUESTIONS=$TUNING/questions.json
DISTRACTOR=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
stage=${1:?stage: contexts, precision, em-precision, em-tuning or em-distractor}
summary() { grep -E '^\| [0-9]' || true; }
[ -f "$QUESTIONS" ] || python3 eval/answers/tuning_questions.py "$DATA" "$QUESTIONS"
context() { # DIR NAME FLAGS...
  local dir=$1 name=$2; shift 2
  echo "== $name: $*"
  "$RAG" eval --context-only --index "$INDEX" --runs-dir "$dir" --name "$name" "$@" | summary
}
case "$stage" in
contexts)
  context "$TUNING" sel-default --questions "$QUESTIONS"
  context "$TUNING" sel-250 --questions "$QUESTIONS" --context-tokens 250
  # Each of the best-ranked N paragraphs gets its best sentence before the rest by score.
  for floor in 2 3; do
    context "$TUNING" sel-floor$floor --questions "$QUESTIONS" --context-floor $floor
  done
  context "$TUNING" sel-250-floor2 --questions "$QUESTIONS" --context-tokens 250 --context-floor 2
  ;;
precision)
  context "$RUNS" contexts-f32-n300 --limit 300 --precision f32
  context "$RUNS" contexts-int8-n300 --limit 300 --precision int8
  python3 eval/answers/changed_contexts.py select "$RUNS/contexts-f32-n300" \
    "$RUNS/contexts-int8-n300" "$DISTRACTOR" "$RUNS/changed-int8.json"
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
