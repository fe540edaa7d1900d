#!/usr/bin/env bash
# Recall@10 of faiss IVF and HNSW against flat search on an index's vectors (ann_recall.py):
#   eval/scale/ann_recall.sh [INDEX]     (default index/default, built at full depth)
# faiss-cpu and numpy from PyPI in a venv of their own ($HOME/.cache/rag/ann-venv).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${ANN_VENV:-$HOME/.cache/rag/ann-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import faiss, numpy" 2>/dev/null ||
  "$venv/bin/pip" install -q "faiss-cpu==1.15.1" "numpy>=1.26"
"$venv/bin/python" eval/scale/ann_recall.py --index "${1:-index/default}" --depth 6 --dims 384,64
