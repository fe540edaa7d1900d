#!/usr/bin/env bash
# Issue 58, items 2 and 3: the context selection (chosen on the fullwiki tuning questions,
# reported on the distractor ones) and answers that do not hinge on the encoder's precision.
# Every stage is re-runnable; `rag eval` runs resume by name.
#   eval/answers/selection.sh contexts    # fullwiki 240, --context-only, every selection setting
#   eval/answers/selection.sh weights     # fullwiki 240, --context-only, a lower rank weight
#   eval/answers/selection.sh precision   # distractor first 300, --context-only, f32 and int8
#                                         # questions on the f32 index: prompts that change
#   eval/answers/selection.sh em-default  # distractor first 300: the current default's answers
#                                         # (recorded ones where the prompt is unchanged)
#   eval/answers/selection.sh em-precision  # f32 and int8 answers where int8 changed the prompt
#   TAG=bf16 F32_INDEX=DIR eval/answers/selection.sh precision-index  # distractor first 300: the
#                                         # index built in this CPU's default (bf16 on AMX, int8
#                                         # on VNNI) against an f32 one; answers where prompts differ
#   eval/answers/selection.sh em-tuning   # fullwiki 240: the chosen selection against the
#                                         # default, answers only where the prompt differs
#   eval/answers/selection.sh em-distractor  # the same on the distractor first 300 (reports)
#   PROMPT=NAME eval/answers/selection.sh em-prompt  # fullwiki 240: the chat instruction of
#                                         # eval/answers/prompts/NAME.txt against the default's
#                                         # (every prompt changes, so all 240 are answered)
#   PROMPT=NAME eval/answers/selection.sh em-prompt-distractor  # the same on the distractor
#                                         # first 300 (reports; only for a PROMPT fullwiki chose)
#   eval/answers/selection.sh em-full-dates  # every default on the distractor first 300,
#                                         # answered afresh, against em-default's (reports)
#   eval/answers/selection.sh em-option-dates  # the same once --option-dates is a default,
#                                         # against em-full-dates' (reports)
#   eval/answers/selection.sh em-option-counts  # the same once --option-counts is a default,
#                                         # against em-option-dates' (reports)
#   eval/answers/selection.sh em-number-words  # the same once --number-words is a default,
#                                         # against em-option-dates' (reports)
#   eval/answers/selection.sh em-option-measures  # the same once --option-measures is a
#                                         # default, against em-number-words' (reports)
#   eval/answers/selection.sh em-opening-names  # the same once documents are also named by
#                                         # their texts' opening names (reports)
#   eval/answers/selection.sh em-shared-place  # the same once --shared-place is a default,
#                                         # against em-opening-names' (reports)
#   eval/answers/selection.sh em-answer-again  # the same once --answer-again is a default,
#                                         # against em-shared-place's (reports)
#   eval/answers/selection.sh em-ordinal-digits  # the 300's bare-number answers with
#                                         # --number-words off and on (reports)
#   eval/answers/selection.sh em-widen    # the 300's answers found in none of their prompt's
#                                         # documents, --widen-tokens off and on (reports)
#   RUNS_TAG=-zen4 eval/answers/selection.sh em-option-counts  # em-option-counts again, on a
#                                         # Zen 4 once "the only species" counts one (reports)
set -euo pipefail
# One function, called on the last line: bash has read the whole script before it runs any of
# it, so editing the script while a stage runs (they run for hours) cannot change that run.
main() {
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
DATA=${RAG_DATA:-../shared/data}
INDEX=${INDEX:-index/default}
TUNING=eval/answers/tuning
RUNS=eval/answers/runs
QUESTIONS=$TUNING/questions.json
DISTRACTOR=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
stage=${1:?stage: contexts, weights, precision, em-default, em-precision, precision-index, em-tuning, em-distractor, em-prompt, em-prompt-distractor, em-full-dates, em-option-dates, em-option-counts, em-number-words, em-option-measures, em-opening-names, em-shared-place, em-answer-again, em-ordinal-digits or em-widen}
summary() { grep -E '^\| [0-9]' || true; }
[ -f "$QUESTIONS" ] || python3 eval/answers/tuning_questions.py "$DATA" "$QUESTIONS"
context() { # DIR NAME FLAGS...
  local dir=$1 name=$2; shift 2
  echo "== $name: $*"
  "$RAG" eval --context-only --index "$INDEX" --runs-dir "$dir" --name "$name" "$@" | summary
}
answers() { # DIR NAME FLAGS...
  local dir=$1 name=$2; shift 2
  echo "== $name: $*"
  "$RAG" eval --index "$INDEX" --runs-dir "$dir" --name "$name" "$@" | summary
}
# Stages em-option-dates, em-option-counts and em-number-words: every default over the first
# 300 (run answers-FLAG-n300) against the run answers-BEFORE-n300; then the step's own share,
# apart from the generator's machine: the questions of KIND of the 300 (date_questions.py, a
# superset of those it can change, but for number) answered here with --FLAG false, compared in
# compare-TAG.json.
# RUNS_TAG (say -zen4) names the runs apart, for a stage run again on another machine or build.
decided_by_documents() { # FLAG BEFORE KIND TAG
  local flag=$1 before=$2 kind=$3 tag=$4
  local run=answers-$flag${RUNS_TAG:-}
  answers "$RUNS" "$run-n300" --limit 300
  python3 eval/answers/compare.py "$RUNS/answers-$before-n300" "$RUNS/$run-n300" \
    --show --out "$RUNS/$run-n300/compare.json"
  python3 eval/answers/date_questions.py "$DISTRACTOR" "$RUNS/$kind-questions-n300.json" --kind "$kind" --limit 300
  answers "$RUNS" "$run-off-n300" --questions "$RUNS/$kind-questions-n300.json" "--$flag" false
  python3 eval/answers/compare.py "$RUNS/$run-off-n300" "$RUNS/$run-n300" \
    --show --out "$RUNS/$run-n300/compare-$tag.json"
}
# The selection to answer with (a context run sel-$CHOSEN of stage contexts or weights) and its
# flags: the best answer-in-context at an unchanged prompt length (floor2 lost, selection.md).
CHOSEN=${CHOSEN:-w-rank0.15}
read -ra CHOSEN_FLAGS <<< "${CHOSEN_FLAGS:---sentence-weights 1,1,0.15,0.15,0.3}"
case "$stage" in
contexts)
  context "$TUNING" sel-default --questions "$QUESTIONS"
  context "$TUNING" sel-250 --questions "$QUESTIONS" --context-tokens 250
  # Each of the best-ranked N paragraphs gets its best sentence before the rest by score.
  for floor in 2 3; do
    context "$TUNING" sel-floor$floor --questions "$QUESTIONS" --context-floor $floor
  done
  context "$TUNING" sel-250-floor2 --questions "$QUESTIONS" --context-tokens 250 --context-floor 2
  python3 eval/answers/selection_report.py "$TUNING/sel-default" "$TUNING"/sel-{250,floor2,floor3,250-floor2} \
    --docs "$INDEX/docs.jsonl" --out eval/answers/selection.md
  ;;
weights)
  # The first-hop paragraph takes several sentences where a bridge's second paragraph gets one
  # (selection.md's misses): half the rank weight spreads the budget across paragraphs.
  context "$TUNING" sel-w-rank0.15 --questions "$QUESTIONS" --sentence-weights 1,1,0.15,0.15,0.3
  python3 eval/answers/selection_report.py "$TUNING/sel-default" "$TUNING"/sel-{250,floor2,w-rank0.15} \
    --docs "$INDEX/docs.jsonl" --out eval/answers/selection.md
  ;;
precision)
  context "$RUNS" contexts-f32-n300 --limit 300 --precision f32
  context "$RUNS" contexts-int8-n300 --limit 300 --precision int8
  python3 eval/answers/changed_contexts.py select "$RUNS/contexts-f32-n300" \
    "$RUNS/contexts-int8-n300" "$DISTRACTOR" "$RUNS/changed-int8.json"
  python3 eval/answers/precision_changes.py "$RUNS/contexts-f32-n300" "$RUNS/contexts-int8-n300" \
    --out "$RUNS/contexts-int8-n300/changes.json"
  ;;
em-default)
  # The current default's answers on the first 300 (f32): answers-sentence-links-n300's where
  # the prompt is the same and it did not answer yes or no (decided after the facts since),
  # the rest regenerated.
  python3 eval/answers/changed_contexts.py select "$RUNS/answers-sentence-links-n300" \
    "$RUNS/contexts-f32-n300" "$DISTRACTOR" "$RUNS/changed-default.json" --yes-no
  answers "$RUNS" answers-default-changed --questions "$RUNS/changed-default.json"
  python3 eval/answers/changed_contexts.py merge "$RUNS/answers-sentence-links-n300" \
    "$RUNS/answers-default-changed" "$RUNS/answers-selection-default-n300"
  ;;
em-precision)
  # int8 questions on the f32 index: greedy answers to the same prompt are the same, so only
  # the prompts int8 changed need answers, f32's and int8's.
  for precision in f32 int8; do
    answers "$RUNS" "answers-$precision-changed" --questions "$RUNS/changed-int8.json" --precision $precision
  done
  python3 eval/answers/compare.py "$RUNS/answers-f32-changed" "$RUNS/answers-int8-changed" \
    --show --out "$RUNS/answers-int8-changed/compare.json"
  ;;
precision-index)
  # INDEX as `rag index` builds it on this CPU (or with --precision TAG), F32_INDEX with
  # --precision f32, the same corpus. The TAG index is searched with f32 questions (rag eval's
  # and ask's default) and with TAG questions; each against the f32 index's prompts. Greedy
  # answers to the same prompt are the same, so only prompts that differ are answered, from
  # both sides. The f32 prompts are also checked against contexts-f32-n300 (another CPU's).
  tag=${TAG:?TAG: the precision rag index defaults to here, e.g. bf16}
  f32=${F32_INDEX:?F32_INDEX: an index of the same corpus built with --precision f32}
  base="$RUNS/contexts-f32-index-$tag-host-n300"
  INDEX=$f32 context "$RUNS" "contexts-f32-index-$tag-host-n300" --limit 300
  python3 eval/answers/precision_changes.py "$RUNS/contexts-f32-n300" "$base" --out "$base/changes.json"
  against_f32() { # NAME(suffix) FLAGS...: contexts from the TAG index, then answers where they differ
    local name=$1; shift
    context "$RUNS" "contexts-$name-n300" --limit 300 "$@"
    python3 eval/answers/precision_changes.py "$base" "$RUNS/contexts-$name-n300" --out "$RUNS/contexts-$name-n300/changes.json"
    python3 eval/answers/changed_contexts.py select "$base" "$RUNS/contexts-$name-n300" "$DISTRACTOR" "$RUNS/changed-$name.json"
    if ! python3 -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1])))' "$RUNS/changed-$name.json"; then
      echo "no prompt changed: $name answers as the f32 index does"
      return
    fi
    INDEX=$f32 answers "$RUNS" "answers-f32-index-for-$name" --questions "$RUNS/changed-$name.json"
    answers "$RUNS" "answers-$name-changed" --questions "$RUNS/changed-$name.json" "$@"
    python3 eval/answers/compare.py "$RUNS/answers-f32-index-for-$name" "$RUNS/answers-$name-changed" \
      --show --out "$RUNS/answers-$name-changed/compare.json"
  }
  against_f32 "$tag-index"
  against_f32 "$tag-index-$tag-questions" --precision "$tag"
  ;;
em-tuning)
  # The chosen selection against the default on the fullwiki questions whose prompt it changes.
  python3 eval/answers/changed_contexts.py select "$TUNING/sel-default" "$TUNING/sel-$CHOSEN" \
    "$QUESTIONS" "$TUNING/changed-$CHOSEN.json"
  answers "$TUNING" "em-sel-default-changed-$CHOSEN" --questions "$TUNING/changed-$CHOSEN.json"
  answers "$TUNING" "em-sel-$CHOSEN-changed" --questions "$TUNING/changed-$CHOSEN.json" "${CHOSEN_FLAGS[@]}"
  python3 eval/answers/compare.py "$TUNING/em-sel-default-changed-$CHOSEN" "$TUNING/em-sel-$CHOSEN-changed" \
    --show --out "$TUNING/em-sel-$CHOSEN-changed/compare.json"
  ;;
em-distractor)
  # Reports only: the chosen selection's answers where its prompt differs from the default's
  # (stage em-default), the rest the default's.
  context "$RUNS" "contexts-$CHOSEN-n300" --limit 300 "${CHOSEN_FLAGS[@]}"
  python3 eval/answers/changed_contexts.py select "$RUNS/contexts-f32-n300" \
    "$RUNS/contexts-$CHOSEN-n300" "$DISTRACTOR" "$RUNS/changed-$CHOSEN.json"
  answers "$RUNS" "answers-$CHOSEN-changed" --questions "$RUNS/changed-$CHOSEN.json" "${CHOSEN_FLAGS[@]}"
  python3 eval/answers/changed_contexts.py merge "$RUNS/answers-selection-default-n300" \
    "$RUNS/answers-$CHOSEN-changed" "$RUNS/answers-$CHOSEN-n300"
  python3 eval/answers/compare.py "$RUNS/answers-selection-default-n300" "$RUNS/answers-$CHOSEN-n300" \
    --show --out "$RUNS/answers-$CHOSEN-n300/compare.json"
  ;;
em-prompt)
  # The default's 240 answers are em-sel-default-changed-250's (changed-250.json holds all 240).
  prompt=(--prompt-style chat --prompt-file "eval/answers/prompts/${PROMPT:?PROMPT=NAME of eval/answers/prompts/NAME.txt}.txt")
  answers "$TUNING" em-sel-default-changed-250 --questions "$TUNING/changed-250.json"
  answers "$TUNING" "em-prompt-$PROMPT" --questions "$TUNING/changed-250.json" "${prompt[@]}"
  python3 eval/answers/compare.py "$TUNING/em-sel-default-changed-250" "$TUNING/em-prompt-$PROMPT" \
    --show --out "$TUNING/em-prompt-$PROMPT/compare.json"
  ;;
em-prompt-distractor)
  prompt=(--prompt-style chat --prompt-file "eval/answers/prompts/${PROMPT:?PROMPT=NAME of eval/answers/prompts/NAME.txt}.txt")
  answers "$RUNS" "answers-prompt-$PROMPT-n300" --limit 300 "${prompt[@]}"
  python3 eval/answers/compare.py "$RUNS/answers-selection-default-n300" "$RUNS/answers-prompt-$PROMPT-n300" \
    --show --out "$RUNS/answers-prompt-$PROMPT-n300/compare.json"
  ;;
em-full-dates)
  # Reports: every default over the first 300, all answered afresh, now that a bare year asked
  # "when" becomes the full date (chosen on fullwiki: tune.sh full-dates), against the
  # default before it.
  answers "$RUNS" answers-full-dates-n300 --limit 300
  python3 eval/answers/compare.py "$RUNS/answers-selection-default-n300" "$RUNS/answers-full-dates-n300" \
    --show --out "$RUNS/answers-full-dates-n300/compare.json"
  # The full dates' own share of that, apart from the generator's machine: the date questions
  # of the 300 (the only ones it can change) answered here with --full-dates false.
  python3 eval/answers/date_questions.py "$DISTRACTOR" "$RUNS/date-questions-n300.json" --limit 300
  answers "$RUNS" answers-full-dates-off-n300 --questions "$RUNS/date-questions-n300.json" --full-dates false
  python3 eval/answers/compare.py "$RUNS/answers-full-dates-off-n300" "$RUNS/answers-full-dates-n300" \
    --show --out "$RUNS/answers-full-dates-n300/compare-dates.json"
  ;;
em-option-dates)
  # Reports: every default over the first 300, all answered afresh, now that an earlier-or-later
  # choice between two documents is decided by their years (chosen on fullwiki: tune.sh
  # option-dates), against the default before it.
  decided_by_documents option-dates full-dates choice choices
  ;;
em-option-counts)
  # Reports: the same once a more-or-fewer choice between two documents is decided by their
  # counts (chosen on fullwiki: tune.sh option-counts), against the default before it
  # (answered on the machine that run names).
  decided_by_documents option-counts option-dates count counts
  ;;
em-number-words)
  # Reports: the same once a bare number the documents write only as a word is answered with
  # the word (chosen on fullwiki: tune.sh number-words), against option-dates' run, the last
  # made on a Zen 4 (option-counts decided none of the 300 there). Any bare-number answer can
  # change, so the "number" questions answered with it off are its share only in part.
  decided_by_documents number-words option-dates number numbers
  ;;
em-option-measures)
  # Reports: the same once a taller-or-more-populous comparison of two documents is decided by
  # their heights or populations, and counts read floors as stories and compound number words
  # (chosen on fullwiki: tune.sh option-measures, RUNS_TAG=-floors tune.sh option-counts),
  # against number-words' run (the same Zen 4). Which step decided a changed answer is in its
  # record (measured_choice, counted_choice).
  decided_by_documents option-measures number-words measure measures
  ;;
em-opening-names)
  # Reports: every default over the first 300, all answered afresh, once a document is also
  # named by the fuller title its text opens with (chosen on fullwiki: tune.sh opening-names;
  # no flag), against option-measures' run (the same Zen 4, the build before it).
  answers "$RUNS" answers-opening-names-n300 --limit 300
  python3 eval/answers/compare.py "$RUNS/answers-option-measures-n300" "$RUNS/answers-opening-names-n300" \
    --show --out "$RUNS/answers-opening-names-n300/compare.json"
  ;;
em-shared-place)
  # Reports: the same once a "yes" to two documents both being in or from a place becomes "no"
  # where one does not mention it (chosen on fullwiki: tune.sh shared-place), against
  # opening-names' run (the same Zen 4, the build before it).
  decided_by_documents shared-place opening-names place places
  ;;
em-answer-again)
  # Reports: the same once an answer that only repeats a phrase of its question is given again
  # with its first word forbidden (chosen on fullwiki: tune.sh answer-again), against
  # shared-place's run (the same Zen 4, the build before it); the answers that changed record
  # `echo` in predictions.jsonl.
  answers "$RUNS" "answers-answer-again${RUNS_TAG:-}-n300" --limit 300
  python3 eval/answers/compare.py "$RUNS/answers-shared-place-n300" "$RUNS/answers-answer-again${RUNS_TAG:-}-n300" \
    --show --out "$RUNS/answers-answer-again${RUNS_TAG:-}-n300/compare.json"
  ;;
em-ordinal-digits)
  # Reports: the same once a bare number the documents write in digits only as one ordinal
  # takes its suffix (chosen on fullwiki: tune.sh ordinal-digits). The step only rewrites a
  # bare-number answer after generation, so the questions of the 300 that answer-again's run
  # answered with one are answered here with --number-words off and on; every other answer is
  # that run's.
  bare=$RUNS/bare-number-questions-n300.json
  python3 - "$DISTRACTOR" "$bare" "$RUNS/answers-answer-again-n300" <<'PY'
import json, re, sys
ids = {r["id"] for r in map(json.loads, open(f"{sys.argv[3]}/predictions.jsonl"))
       if re.fullmatch(r"[1-9][0-9]{0,2}\.?", (r["prediction"] or "").strip())}
kept = [r for r in json.load(open(sys.argv[1]))[:300] if r["_id"] in ids]
json.dump(kept, open(sys.argv[2], "w"))
print(f"{len(kept)} of the first 300 answered with a bare number -> {sys.argv[2]}")
PY
  answers "$RUNS" answers-ordinal-digits-off-n300 --questions "$bare" --number-words false
  answers "$RUNS" answers-ordinal-digits-n300 --questions "$bare"
  python3 eval/answers/compare.py "$RUNS/answers-ordinal-digits-off-n300" "$RUNS/answers-ordinal-digits-n300" \
    --show --out "$RUNS/answers-ordinal-digits-n300/compare.json"
  ;;
em-widen)
  # Reports: the same once an answer found in none of its prompt's documents is given again
  # from a wider context (chosen on fullwiki: tune.sh widen). Only those answers change, so the
  # questions of the 300 that answer-again's run answered so (ungrounded_questions.py; no
  # answer of them is a bare number that em-ordinal-digits changed) are answered here with
  # --widen-tokens 0 and with the default; every other answer is that run's.
  ungrounded=$RUNS/ungrounded-questions-n300.json
  python3 eval/answers/ungrounded_questions.py "$DISTRACTOR" "$ungrounded" "$RUNS/answers-answer-again-n300" --limit 300
  answers "$RUNS" answers-widen-off-n300 --questions "$ungrounded" --widen-tokens 0
  answers "$RUNS" answers-widen-n300 --questions "$ungrounded"
  python3 eval/answers/compare.py "$RUNS/answers-widen-off-n300" "$RUNS/answers-widen-n300" \
    --show --out "$RUNS/answers-widen-n300/compare.json"
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
}
main "$@"; exit
