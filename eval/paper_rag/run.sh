#!/usr/bin/env bash
# The ESE paper's RAG experiment (its Table 3) on this project's data: RAW, MRL, 2DMSE and ESE
# trained the same way, then HotpotQA recall and exact match at 6 / 3 layers x 384 / 64 dims.
#
#   eval/paper_rag/run.sh [MODEL...]
#       (default: untrained raw mrl 2dmse ese, then raw-paper mrl-paper 2dmse-paper ese-paper;
#       each group trained first, then evaluated setting by setting: retrieval, dense, default)
#
# Every model trains on the same data (the NLI triplets plus the titled pairs of
# --pairs-from-corpus from both HotpotQA sample files), steps, learning rate and seed:
#   raw, mrl, 2dmse   the baselines (--mode raw|mrl|2dmse) with the same teacher terms as ese
#                     (--distill-weight 2 --embedding-distill-weight 20, on the layers and sizes
#                     each method trains)
#   ese               ESE with the HotpotQA recipe: k = 64, shallow weight 5, the teacher terms
#   raw-paper, mrl-paper, 2dmse-paper, ese-paper
#                     each method's own objective alone, no teacher (ese-paper: k = 64, weights
#                     1/(1+ln i)): the comparison without the terms beyond the papers
#   untrained         the base model, for reference
# Each model is then evaluated on the first $LIMIT distractor questions, over the grid
# layers 3,6 x dims 64,384 (a sweep: one encoding of the corpus per model, an index of its own
# built once under index/), in three settings: `retrieval` is the paper's dense retrieval
# without the generator (seconds per model once its index exists, so that every model's recall
# is in long before the answers), `dense` is the paper's setting (the same retrieval, the five
# retrieved paragraphs whole, greedy answers), `default` is rag's ask pipeline (fusion, two
# hops, 200 context tokens, the yes/no bias).
# Runs go to $OUT/runs/<model>-<setting>/; eval/paper_rag/report.py makes the table.
#
# Resumable at every level: a trained model is skipped, an interrupted training resumes from
# its checkpoint, an interrupted evaluation from its last answered question. Hours of CPU:
# about 40-60 min of training per model on 2 cores, and per model and setting 1,200 answers.
#
# Settings (environment): STEPS (600), LR (2e-4), SEED (42), LIMIT (300), RAG_DATA
# (../shared/data), RAG_LLM (the default 1.5B generator), MODELS_DIR (data/trained/paper-rag),
# OUT (eval/paper_rag), SETTINGS ("retrieval dense default").
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
main=(untrained raw mrl 2dmse ese)
paper=(raw-paper mrl-paper 2dmse-paper ese-paper)
models=("$@")
[ ${#models[@]} -gt 0 ] || models=("${main[@]}" "${paper[@]}")
mkdir -p "$OUT/train" "$OUT/runs" "$MODELS_DIR"
[ -x "$RAG_BIN" ] || { echo "no rag binary at $RAG_BIN: run cargo build --release (scripts/setup.sh)" >&2; exit 1; }

hotpot=$DATA/hotpotqa
common=(--data nli --data-dir "$DATA" --pairs-from-corpus "$hotpot/hotpot_dev_fullwiki_sample.json"
        --pairs-from-corpus "$hotpot/hotpot_dev_distractor_sample.json"
        --max-steps "$STEPS" --lr "$LR" --seed "$SEED" --no-eval)

teacher="--distill-weight 2 --embedding-distill-weight 20"
flags() { # model -> its training flags
  case $1 in
    raw|mrl|2dmse) echo "--mode $1 $teacher" ;;
    ese) echo "--mode ese --compression-size 64 --shallow-weight 5 $teacher" ;;
    raw-paper|mrl-paper|2dmse-paper) echo "--mode ${1%-paper}" ;;
    ese-paper) echo "--mode ese --compression-size 64" ;;
    *) echo "unknown model '$1' (untrained raw mrl 2dmse ese raw-paper mrl-paper 2dmse-paper ese-paper)" >&2; return 1 ;;
  esac
}

model_dir() { # model -> the directory rag eval loads
  if [ "$1" = untrained ]; then echo "${RAG_MODEL:-data/models/all-MiniLM-L6-v2}"; else echo "$MODELS_DIR/$1"; fi
}

train() { # model
  local dir
  dir=$(model_dir "$1")
  if [ "$1" = untrained ] || [ -f "$dir/ese.json" ]; then
    echo "== $1: ready ($dir)"
    return
  fi
  local f
  f=$(flags "$1")
  echo "== training $1: $f"
  # shellcheck disable=SC2086 # the flags are words
  "$RAG_BIN" train --out "$dir" --resume $f "${common[@]}" --json >"$OUT/train/$1.json"
}

evaluate() { # model, setting
  local retrieval
  case $2 in
    retrieval) retrieval=(--mode dense --hops 1 --no-generate) ;;
    # The paper's generator decoded greedily: no yes/no bias, answers not kept to spans.
    dense) retrieval=(--mode dense --hops 1 --context-tokens 0 --yes-no-bias 0 --extractive false) ;;
    default) retrieval=() ;;
    *) echo "unknown setting '$2' (retrieval dense default)" >&2; return 1 ;;
  esac
  echo "== evaluating $1 ($2)"
  "$RAG_BIN" eval --model "$(model_dir "$1")" --data-dir "$DATA" --sweep --layers 3,6 --dims 64,384 \
    --limit "$LIMIT" "${retrieval[@]}" --name "$1-$2" --runs-dir "$OUT/runs" --json >"$OUT/runs/$1-$2.json"
}

for model in "${models[@]}"; do
  [ "$model" = untrained ] || flags "$model" >/dev/null
done
# A group's models are all trained, then evaluated setting by setting, so that the headline
# comparison (the main models, dense) is complete before the rest: on 2 cores the whole grid is
# days of CPU, and every stage resumes.
run_group() { # MODEL...
  local model setting
  for model in "$@"; do train "$model"; done
  for setting in "${settings[@]}"; do
    for model in "$@"; do evaluate "$model" "$setting"; done
  done
}
if [ $# -gt 0 ]; then
  run_group "${models[@]}"
else
  run_group "${main[@]}"
  run_group "${paper[@]}"
fi
echo "done: ${models[*]} x ${settings[*]} -> $OUT/runs/ (python3 eval/paper_rag/report.py writes the table)"
