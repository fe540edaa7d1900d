#!/usr/bin/env bash
# Issue 58's measurements (every default of this build: ties by id at a fixed grain,
# question-named paragraphs' best sentence first). Runs resume; each stage is re-runnable.
#   eval/answers/issue58.sh contexts   # the prompts only (--context-only): fullwiki 240 (chooses),
#                                      # distractor first 300 (reports)
#   eval/answers/issue58.sh changed    # distractor first 300: answers regenerated only where the
#                                      # context changed against runs/answers-sentence-links-n300;
#                                      # merged into runs/answers-issue58-n300 (+ compare.json)
#   eval/answers/issue58.sh yes-no     # fullwiki yes/no questions, bias 0, prior margins recorded;
#                                      # bias.py raw and calibrated
#   eval/answers/issue58.sh yes-no-facts  # the same questions decided after the facts
#                                      # (--yes-no-facts true), bias 0; bias.py raw
#   eval/answers/issue58.sh timing     # the warm ask's time split (time_split.py); TIMING_OUT=DIR writes elsewhere
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
DATA=${RAG_DATA:-../shared/data}
TUNING=eval/answers/tuning
RUNS=eval/answers/runs
stage=${1:?stage: contexts, changed, yes-no, yes-no-facts or timing}
summary() { grep -E '^\| [0-9]' || true; }
case "$stage" in
contexts)
  [ -f "$TUNING/questions.json" ] || python3 eval/answers/tuning_questions.py "$DATA" "$TUNING/questions.json"
  "$RAG" eval --context-only --questions "$TUNING/questions.json" --runs-dir "$TUNING" --name context-issue58 | summary
  "$RAG" eval --context-only --limit 300 --runs-dir "$RUNS" --name contexts-issue58-n300 | summary
  ;;
changed)
  # The questions whose prompt text differs from the run of the previous defaults; the others
  # keep their recorded answers (greedy decoding of the same prompt gives the same answer).
  python3 eval/answers/changed_contexts.py select "$RUNS/answers-sentence-links-n300" \
    "$RUNS/contexts-issue58-n300" "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" \
    "$RUNS/changed-issue58.json"
  "$RAG" eval --questions "$RUNS/changed-issue58.json" --runs-dir "$RUNS" --name answers-issue58-changed | summary
  python3 eval/answers/changed_contexts.py merge "$RUNS/answers-sentence-links-n300" \
    "$RUNS/answers-issue58-changed" "$RUNS/answers-issue58-n300"
  python3 eval/answers/compare.py "$RUNS/answers-sentence-links-n300" "$RUNS/answers-issue58-n300" \
    --out "$RUNS/answers-issue58-n300/compare.json"
  ;;
yes-no|yes-no-facts)
  YES_NO=$TUNING/yes_no_questions.json
  python3 - "$DATA/hotpotqa/hotpot_dev_fullwiki_sample.json" "$YES_NO" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))
kept = [r for r in records if r["answer"].strip().lower() in ("yes", "no")]
json.dump(kept, open(sys.argv[2], "w"))
PY
  if [ "$stage" = yes-no ]; then
    name=yes-no-greedy-issue58; flags=(--yes-no-prior)
  else
    name=yes-no-facts; flags=(--yes-no-facts true)
  fi
  "$RAG" eval --questions "$YES_NO" --runs-dir "$TUNING" --name "$name" --yes-no-bias 0 "${flags[@]}" | summary
  python3 eval/answers/bias.py yes-no "$TUNING/$name" --out "$TUNING/$name/bias.json"
  if [ "$stage" = yes-no ]; then
    python3 eval/answers/bias.py yes-no "$TUNING/$name" --calibrated \
      --out "$TUNING/$name/bias-calibrated.json"
  fi
  ;;
timing)
  python3 eval/answers/time_split.py --rag "$RAG" --limit "${TIMING_QUESTIONS:-20}" --out "${TIMING_OUT:-eval/answers/timing}"
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
