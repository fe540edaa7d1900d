#!/usr/bin/env bash
# The ESE paper's RAG experiment (its Table 3) on this project's data: RAW, MRL, 2DMSE and ESE
# trained the same way, then HotpotQA recall and exact match at 6 / 3 layers x 384 / 64 dims.
#
#   eval/paper_rag/run.sh [MODEL...]
#       (default: untrained raw mrl 2dmse ese ese-sw1, evaluated setting by setting: retrieval,
#       dense, default; then the -paper group: its learning rate chosen on the fullwiki questions
#       (see "tuning" below), the chosen models in every setting, last the group at the shared rate)
#
# Every model trains on the same data (the NLI triplets plus the titled pairs of
# --pairs-from-corpus from both HotpotQA sample files), steps, learning rate and seed:
#   raw, mrl, 2dmse   the baselines (--mode raw|mrl|2dmse) with the same teacher terms as ese
#                     (--distill-weight 2 --embedding-distill-weight 20, on the layers and sizes
#                     each method trains)
#   ese               ESE with the HotpotQA recipe: k = 64, shallow weight 5, the teacher terms
#   ese-sw1           the same without the one ESE-only term of the recipe, the shallow weight:
#                     the paper's layer weights 1/(1+ln i) as they are, the teacher terms kept
#   raw-paper, mrl-paper, 2dmse-paper, ese-paper
#                     each method's own objective alone, no teacher (ese-paper: k = 64, weights
#                     1/(1+ln i)): the comparison without the terms beyond the papers
#   untrained         the base model, for reference
#   MODEL-lrRATE      MODEL trained at learning rate RATE instead of $LR (raw-paper-lr5e-5);
#                     MODEL-lr$LR, spelled as $LR is, names MODEL itself
# Each model is then evaluated on the first $LIMIT distractor questions, over the grid
# layers 3,6 x dims 64,384 (a sweep: one encoding of the corpus per model, an index of its own
# built once under index/), in three settings: `retrieval` is the paper's dense retrieval
# without the generator (seconds per model once its index exists, so that every model's recall
# is in long before the answers), `dense` is the paper's setting (the same retrieval, the five
# retrieved paragraphs whole, greedy answers), `default` is rag's ask pipeline (fusion, two
# hops, 200 context tokens, the yes/no bias). A fourth setting, `tuning`, is `retrieval` on the
# fullwiki questions whose supporting paragraphs are in the corpus (eval/answers/
# tuning_questions.py), all of them: what chooses a setting, as the distractor questions never do.
#
# The shared learning rate was chosen for the teacher recipe. Without a teacher each objective
# may want another, so, with no MODEL given, the -paper group is trained at each rate of
# $PAPER_LRS, each candidate evaluated in `tuning`, and each method's rate with the best mean
# Recall@5 over the grid (report.py --chosen) evaluated in every setting; the group at the shared
# rate comes after, as the comparison with the main group at one rate.
# Runs go to $OUT/runs/<model>-<setting>/ and are committed, finished or not: the experiment
# takes more CPU than one sitting, and the runs are what carries it from one to the next.
# eval/paper_rag/report.py makes the table.
#
# The `dense` runs read the paragraphs their model's `retrieval` run recorded, title by title
# (`rag eval --rankings-from`), with the untrained model's index for the documents: the same
# retrieval, without the trained model, so its answers can go on wherever the retrieval runs
# are. A model is trained only when a setting that needs it (`retrieval`, `default`) is not
# finished; training repeats bit for bit (seeded) on one kernel family (see kernels), and its
# weights' sha256 is kept in train/<model>.<kernels>.sha256, which a retraining must match.
#
# Resumable at every level: a finished run is skipped, a trained model is kept, an interrupted
# training resumes from its checkpoint, an interrupted evaluation from its last answered
# question. Hours of CPU: about 40-60 min of training per model on 2 cores, and per model and
# setting 1,200 answers.
#
# Settings (environment): STEPS (600), LR (2e-4), SEED (42), LIMIT (300), RAG_DATA
# (../shared/data), RAG_LLM (the default 1.5B generator), MODELS_DIR (data/trained/paper-rag),
# OUT (eval/paper_rag), SETTINGS ("retrieval dense default"), PAPER_LRS ("2e-5 5e-5 $LR").
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
STEPS=${STEPS:-600}
LR=${LR:-2e-4}
SEED=${SEED:-42}
LIMIT=${LIMIT:-300}
DATA=${RAG_DATA:-../shared/data}
MODELS_DIR=${MODELS_DIR:-data/trained/paper-rag}
OUT=${OUT:-eval/paper_rag}
read -r -a settings <<<"${SETTINGS:-retrieval dense default}"
read -r -a paper_lrs <<<"${PAPER_LRS:-2e-5 5e-5 $LR}"
LAYERS=3,6
DIMS=64,384
main=(untrained raw mrl 2dmse ese ese-sw1)
paper=(raw-paper mrl-paper 2dmse-paper ese-paper)
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("${main[@]}" "${paper[@]}")
mkdir -p "$OUT/train" "$OUT/runs" "$MODELS_DIR"
[ -x "$RAG_BIN" ] || { echo "no rag binary at $RAG_BIN: run cargo build --release (scripts/setup.sh)" >&2; exit 1; }

hotpot=$DATA/hotpotqa
common=(--data nli --data-dir "$DATA" --pairs-from-corpus "$hotpot/hotpot_dev_fullwiki_sample.json"
        --pairs-from-corpus "$hotpot/hotpot_dev_distractor_sample.json"
        --max-steps "$STEPS" --seed "$SEED" --no-eval)

teacher="--distill-weight 2 --embedding-distill-weight 20"
base() { # model -> the model without its learning rate
  echo "${1%-lr*}"
}

lr_of() { # model -> its learning rate
  case $1 in
    *-lr*) echo "${1##*-lr}" ;;
    *) echo "$LR" ;;
  esac
}

canon() { # model -> its one name: MODEL-lr$LR is MODEL
  if [ "$(lr_of "$1")" = "$LR" ]; then base "$1"; else echo "$1"; fi
}

flags() { # model -> its training flags
  local m
  m=$(base "$1")
  case $m in
    raw|mrl|2dmse) echo "--mode $m $teacher" ;;
    ese) echo "--mode ese --compression-size 64 --shallow-weight 5 $teacher" ;;
    ese-sw1) echo "--mode ese --compression-size 64 $teacher" ;;
    raw-paper|mrl-paper|2dmse-paper) echo "--mode ${m%-paper}" ;;
    ese-paper) echo "--mode ese --compression-size 64" ;;
    *) echo "unknown model '$1' (untrained raw mrl 2dmse ese ese-sw1 raw-paper mrl-paper 2dmse-paper ese-paper)" >&2; return 1 ;;
  esac
}

model_dir() { # model -> the directory rag eval loads
  if [ "$1" = untrained ]; then echo "${RAG_MODEL:-data/models/all-MiniLM-L6-v2}"; else echo "$MODELS_DIR/$1"; fi
}

# Training repeats bit for bit on one family of CPU kernels: with AVX-512 the encoder's kernels
# (and those of the libraries it calls) take other paths than with AVX2, which round otherwise
# (ese's final loss 30.26213 against 30.26212), so each family keeps its own sum of the weights.
kernels() {
  case $(uname -m) in
    x86_64) if grep -qw avx512f /proc/cpuinfo; then echo avx512; else echo avx2; fi ;;
    *) uname -m ;;
  esac
}

train() { # model
  local dir
  dir=$(model_dir "$1")
  if [ "$1" = untrained ] || [ -f "$dir/ese.json" ]; then
    return
  fi
  local f
  f=$(flags "$1")
  echo "== training $1: $f"
  # shellcheck disable=SC2086 # the flags are words
  # Through a partial file, as every summary here: an interrupted run must not leave it empty.
  "$RAG_BIN" train --out "$dir" --resume $f --lr "$(lr_of "$1")" "${common[@]}" --json >"$OUT/train/$1.json.part"
  mv "$OUT/train/$1.json.part" "$OUT/train/$1.json"
  local sums=$OUT/train/$1.$(kernels).sha256
  if [ -f "$sums" ]; then
    (cd "$dir" && sha256sum --quiet -c -) <"$sums" ||
      { echo "$1: the retrained weights differ from $sums: training no longer repeats" >&2; exit 1; }
  else
    (cd "$dir" && sha256sum model.safetensors) >"$sums"
  fi
}

tuning_questions=$OUT/tuning/questions.json
tuning_count() { # -> how many tuning questions (written first where missing)
  [ -f "$tuning_questions" ] || { mkdir -p "$OUT/tuning" && python3 eval/answers/tuning_questions.py "$DATA" "$tuning_questions" >&2; }
  python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$tuning_questions"
}

finished() { # run name, questions: whether its every question has every cell
  local file=$OUT/runs/$1/predictions.jsonl
  local cells=$(( $(tr ',' '\n' <<<"$LAYERS" | wc -l) * $(tr ',' '\n' <<<"$DIMS" | wc -l) ))
  [ -f "$file" ] && [ "$(wc -l <"$file")" -ge $(($2 * cells)) ]
}

# Setting `stored` (issue 53): the default pipeline from indexes that store one cell each (`rag
# index --layers L --dim K`: encoding stops at layer L, the vectors are K wide), at the cells of
# STORED (default 3x64 6x384), each its own run MODEL-stored-LxK. The index is encoded in f32
# (`rag index` would pick bf16 on AMX), so that no number depends on the CPU that built it.
stored() { # model
  local cell layers dim name index
  train "$1"
  for cell in ${STORED:-3x64 6x384}; do
    layers=${cell%x*} dim=${cell#*x} name=$1-stored-$cell index=index/paper-rag-$1-stored-$cell
    if [ -f "$OUT/runs/$name.json" ]; then echo "== $name: finished"; continue; fi
    echo "== indexing $name"
    "$RAG_BIN" index --model "$(model_dir "$1")" --data-dir "$DATA" --index "$index" --layers "$layers" \
      --dim "$dim" --precision f32 --json >"$OUT/runs/$name.index.json"
    echo "== evaluating $name"
    "$RAG_BIN" eval --index "$index" --data-dir "$DATA" --limit "$LIMIT" --name "$name" --runs-dir "$OUT/runs" \
      --json >"$OUT/runs/$name.json.part"
    mv "$OUT/runs/$name.json.part" "$OUT/runs/$name.json"
  done
}

evaluate() { # model, setting
  local name=$1-$2 model=$1 questions=$LIMIT select=(--limit "$LIMIT") retrieval
  if [ "$2" = stored ]; then stored "$1"; return; fi
  if [ "$2" = tuning ]; then
    questions=$(tuning_count)
    select=(--questions "$tuning_questions")
  fi
  if finished "$name" "$questions"; then
    echo "== $name: finished"
    return
  fi
  case $2 in
    retrieval|tuning) retrieval=(--mode dense --hops 1 --no-generate) ;;
    # The paper's generator decoded greedily: no yes/no bias, answers not kept to spans.
    dense)
      finished "$1-retrieval" "$LIMIT" || { echo "== $name: waits for $1-retrieval" >&2; return; }
      model=untrained
      retrieval=(--mode dense --hops 1 --context-tokens 0 --yes-no-bias 0 --extractive false
                 --rankings-from "$OUT/runs/$1-retrieval") ;;
    default) retrieval=() ;;
    *) echo "unknown setting '$2' (retrieval dense default tuning stored)" >&2; return 1 ;;
  esac
  train "$model"
  echo "== evaluating $name"
  "$RAG_BIN" eval --model "$(model_dir "$model")" --data-dir "$DATA" --sweep --layers "$LAYERS" --dims "$DIMS" \
    "${select[@]}" "${retrieval[@]}" --name "$name" --runs-dir "$OUT/runs" --json >"$OUT/runs/$name.json.part"
  mv "$OUT/runs/$name.json.part" "$OUT/runs/$name.json"
}

for i in "${!models[@]}"; do
  [ "${models[$i]}" = untrained ] || flags "${models[$i]}" >/dev/null
  models[i]=$(canon "${models[$i]}")
done
# A group's models are evaluated setting by setting, so that the headline comparison (the main
# models, dense) is complete before the rest: on 2 cores the whole grid is days of CPU, and
# every stage resumes.
run_group() { # MODEL...
  local model setting
  for setting in "${settings[@]}"; do
    for model in "$@"; do evaluate "$model" "$setting"; done
  done
}
tune() { # MODEL...: the `tuning` setting alone
  local -a settings=(tuning)
  run_group "$@"
}
if [ $# -gt 0 ]; then
  run_group "${models[@]}"
else
  run_group "${main[@]}"
  candidates=()
  for model in "${paper[@]}"; do
    for lr in "${paper_lrs[@]}"; do candidates+=("$(canon "$model-lr$lr")"); done
  done
  tune untrained "${candidates[@]}" # the untrained row: what training adds, no candidate
  read -r -a chosen <<<"$(python3 eval/paper_rag/report.py --runs "$OUT/runs" --chosen)"
  echo "== the -paper group at its learning rates chosen on the fullwiki questions: ${chosen[*]}"
  run_group "${chosen[@]}"
  run_group "${paper[@]}"
fi
echo "done: ${models[*]} x ${settings[*]} -> $OUT/runs/ (python3 eval/paper_rag/report.py writes the table)"
