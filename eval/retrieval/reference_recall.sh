#!/usr/bin/env bash
# Agreement with the reference stack: Recall@5 of sentence-transformers + faiss
# (eval/reference/retrieval_recall.py) beside rag's, on the same corpus (both sample files),
# depths, dims and template. Run eval/retrieval/sweep.sh first (it makes rag's numbers) and
# eval/reference/setup.sh once. Target: every cell within 0.5 points. Writes
# eval/retrieval/reference_recall.md. Takes about 30 minutes (three torch encodings of the corpus).
set -euo pipefail
cd "$(dirname "$0")/../.."
D=../shared/data/hotpotqa
RUN=eval/retrieval/runs/dense-grid
[ -f "$RUN/summary.json" ] || { echo "run eval/retrieval/sweep.sh first" >&2; exit 1; }
nice -n 10 eval/.venv/bin/python eval/reference/retrieval_recall.py \
  --corpus $D/hotpot_dev_distractor_sample.json --corpus $D/hotpot_dev_fullwiki_sample.json \
  --questions $D/hotpot_dev_distractor_sample.json --layers 6,3,1 --dims 384,128,64,32 \
  --template "{title}: {text}" --k 5 --json > eval/reference/results/retrieval_recall_grid.json
python3 - > eval/retrieval/reference_recall.md <<'PY'
import json
ref = json.load(open("eval/reference/results/retrieval_recall_grid.json"))
ours = json.load(open("eval/retrieval/runs/dense-grid/summary.json"))
print("# Recall@5, rag vs sentence-transformers + faiss\n")
print(f"corpus {ref['corpus_size']} paragraphs, {ref['questions']} questions, template {ref['template']!r}\n")
print("| layers | dim | rag R@5 | reference R@5 | diff (points) | rag both@5 | reference both@5 |")
print("|---:|---:|---:|---:|---:|---:|---:|")
worst = 0.0
for cell in ours["cells"]:
    r = ref["layers"][str(cell["layers"])][str(cell["dim"])]
    diff = 100 * (cell["recall"]["5"] - r["recall_at_k"])
    worst = max(worst, abs(diff))
    print(f"| {cell['layers']} | {cell['dim']} | {100 * cell['recall']['5']:.2f} | {100 * r['recall_at_k']:.2f} "
          f"| {diff:+.2f} | {100 * cell['all_supporting']['5']:.2f} | {100 * r['all_in_top_k']:.2f} |")
print(f"\nlargest difference: {worst:.2f} points (target <= 0.5)")
PY
cat eval/retrieval/reference_recall.md
