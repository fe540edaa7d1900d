#!/usr/bin/env bash
# Installs Ray (cluster/requirements.txt, from PyPI only) into a virtual environment outside the
# checkout: $RAG_RAY_VENV, default ~/.cache/rag/ray-venv. Re-running does nothing once the
# installed requirements match. Prints the environment's directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${RAG_RAY_VENV:-$HOME/.cache/rag/ray-venv}"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ -x "$venv/bin/ray" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv"
  exit 0
fi
echo "installing Ray into $venv (about 285 MB, from PyPI)" >&2
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  --index-url https://pypi.org/simple -r "$here/requirements.txt" >&2
echo "$want" > "$stamp"
echo "$venv"
