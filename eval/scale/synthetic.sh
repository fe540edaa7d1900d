#!/usr/bin/env bash
# The scale harness (issue 53 item 5; see synthetic.py): numpy from PyPI in a venv of its own
# ($HOME/.cache/rag/scale-venv), then synthetic.py with the given flags, niced.
#   eval/scale/synthetic.sh --n 1000000 --layers 3 --dim 64
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${SCALE_VENV:-$HOME/.cache/rag/scale-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import numpy" 2>/dev/null || "$venv/bin/pip" install -q "numpy>=1.26"
exec nice "$venv/bin/python" eval/scale/synthetic.py "$@"
