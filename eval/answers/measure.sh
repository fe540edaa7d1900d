#!/usr/bin/env bash
# The distractor-question measurements of eval/answers/README.md (the distractor questions
# choose nothing: every setting was chosen by tune.sh on the
# fullwiki questions). Runs resume; each lands in eval/answers/runs/<name>/.
#   eval/answers/measure.sh [retrieval|em|timing|all]
# timing needs OLD_RAG: the binary of the commit before the ask pipeline (6b9aa01), built by
#   git worktree add --detach ../base 6b9aa01 && (cd ../base && cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
OUT=eval/answers/runs
what=${1:-all}
eval_run() { # NAME FLAGS...
  local name=$1; shift
  echo "== $name: rag eval $*"
  "$RAG" eval --runs-dir "$OUT" --name "$name" "$@" | grep -E '^\| [0-9]'
}
if [ "$what" = retrieval ] || [ "$what" = all ]; then
  # Today's modes and the new ones, one hop and two, full depth and size, all 1,186 questions,
  # as measured before title links (link weight 0).
  for mode in dense bm25 hybrid fusion; do
    for hops in 1 2; do eval_run "retrieval-$mode-h$hops" --no-generate --mode $mode --hops $hops --link-weight 0; done
  done
  # The default with title links (tune.sh links).
  eval_run retrieval-fusion-h2-l0.15 --no-generate --mode fusion --hops 2 --link-weight 0.15
  # The default (before links) over the depth x size grid (the untrained model: layers 1 and 3
  # are raw MiniLM).
  eval_run retrieval-default-grid --no-generate --sweep --link-weight 0
  eval_run retrieval-dense-grid --no-generate --sweep --mode dense --hops 1
fi
if [ "$what" = em ] || [ "$what" = all ]; then
  # Exact match on the first 300 questions with the default 1.5B generator and every default:
  # greedy answers before title links and with them (made before document labels became
  # subjects), then the defaults before sentence links (title links, the yes/no bias, labels),
  # then those with the answers kept to spans of the prompt (--extractive true, not a default),
  # then every default of today (sentence links). The runs before sentence links were made with
  # six-letter word stems, which no flag brings back.
  before_links=(--sentence-weights 1,1,0.3,0.15,0)
  eval_run answers-default-n300 --limit 300 --link-weight 0 --yes-no-bias 0 "${before_links[@]}"
  eval_run answers-default-l0.15-n300 --limit 300 --link-weight 0.15 --yes-no-bias 0 "${before_links[@]}"
  eval_run answers-yes-no-n300 --limit 300 "${before_links[@]}"
  eval_run answers-extractive-n300 --limit 300 --extractive true "${before_links[@]}"
  eval_run answers-sentence-links-n300 --limit 300
  python3 eval/answers/compare.py "$OUT/answers-yes-no-n300" "$OUT/answers-sentence-links-n300" \
    --out "$OUT/answers-sentence-links-n300/compare.json"
  python3 eval/answers/compare.py "$OUT/answers-yes-no-n300" "$OUT/answers-extractive-n300" \
    --out "$OUT/answers-extractive-n300/compare.json"
fi
if [ "$what" = timing ] || [ "$what" = all ]; then
  python3 eval/answers/ask_timing.py --old-rag "${OLD_RAG:?set OLD_RAG}" --new-rag "$RAG" \
    --limit "${TIMING_QUESTIONS:-60}" --out eval/answers/timing
fi
