#!/usr/bin/env bash
# Trains the default MiniLM with every objective on the same data, seed and steps (NLI
# triplets, one epoch); eval/training/sts.sh and eval/training/hotpot.sh evaluate the models.
# Resumable: a finished model is skipped, an interrupted one resumes from its checkpoint.
#
#   eval/training/train.sh [MODE...]     (default: ese raw mrl pooler 2dmse)
#
# ese-sw2 is ESE on the same data with --shallow-weight 2 (the shallow layers' terms doubled);
# pooler32 the pooler at 32 dimensions.
#
# Also the HotpotQA recipe experiments (NLI plus the titled pairs of --pairs-from-corpus from
# both HotpotQA files, k = 64): ese-titled-c64 (200 steps), ese-titled-c64-sw5-600
#   (--shallow-weight 5, 600 steps), ese-titled-c64-distill (--shallow-weight 5,
#   --distill-weight 2: the base model's full-depth similarities distilled into every trained
#   layer, 300 steps),
#   ese-titled-c64-distill10 (the same with --distill-weight 10), ese-titled-c64-embed
#   (ese-titled-c64-distill plus --embedding-distill-weight 20: the base model's full-depth
#   embeddings themselves distilled into every trained layer), ese-titled-c64-embed-500 (the
#   same, 500 steps at learning rate 1e-4) and ese-titled-c64-embed-600 (600 steps at 2e-4).
#
# Models go to data/trained/<mode>-nli/ (the experiments to data/trained/<name>/), reports to
# eval/training/.
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-${CARGO_TARGET_DIR:-target}/release/rag}
OUT=eval/training
mkdir -p "$OUT" data/trained
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(ese raw mrl pooler 2dmse)

train() { # name, flags...
    local name=$1; shift
    if [ -f "data/trained/$name/ese.json" ]; then
        echo "== $name: already trained"
        return
    fi
    echo "== training $name"
    "$RAG" train --out "data/trained/$name" --resume "$@" --json | tee "$OUT/train-$name.json"
}

D=${RAG_DATA:-../shared/data}/hotpotqa
corpora=("$D/hotpot_dev_fullwiki_sample.json" "$D/hotpot_dev_distractor_sample.json")
pairs=(--mode ese --data nli --pairs-from-corpus "${corpora[0]}" --pairs-from-corpus "${corpora[1]}")

titled=("${pairs[@]}" --compression-size 64)

for mode in "${modes[@]}"; do
    case $mode in
        pooler) train pooler64-nli --mode pooler --pooler-dim 64 ;;
        pooler32) train pooler32-nli --mode pooler --pooler-dim 32 ;;
        ese-titled-c64) train "$mode" "${titled[@]}" --max-steps 200 ;;
        ese-titled-c64-sw5-600) train "$mode" "${titled[@]}" --max-steps 600 --shallow-weight 5 ;;
        ese-titled-c64-distill) train "$mode" "${titled[@]}" --max-steps 300 --shallow-weight 5 --distill-weight 2 ;;
        ese-titled-c64-distill10) train "$mode" "${titled[@]}" --max-steps 300 --shallow-weight 5 --distill-weight 10 ;;
        ese-titled-c64-embed) train "$mode" "${titled[@]}" --max-steps 300 --shallow-weight 5 --distill-weight 2 \
            --embedding-distill-weight 20 ;;
        ese-titled-c64-embed-500) train "$mode" "${titled[@]}" --max-steps 500 --lr 1e-4 --shallow-weight 5 \
            --distill-weight 2 --embedding-distill-weight 20 ;;
        ese-titled-c64-embed-600) train "$mode" "${titled[@]}" --max-steps 600 --lr 2e-4 --shallow-weight 5 \
            --distill-weight 2 --embedding-distill-weight 20 ;;
        ese-sw2) train ese-sw2-nli --mode ese --shallow-weight 2 ;;
        *) train "$mode-nli" --mode "$mode" ;;
    esac
done
