#!/usr/bin/env bash
# Create eval/.venv with the Python reference stack (CPU use of torch, transformers,
# sentence-transformers, faiss-cpu, numpy; onnx, onnxscript and onnxruntime for the ONNX Runtime
# backends of encode_throughput.py). Idempotent; PyPI only.
#
#   eval/reference/setup.sh           install exactly the versions in requirements.lock
#   eval/reference/setup.sh --update  re-resolve the latest versions, rebuild the venv
#                                     and rewrite requirements.lock
#
# Torch route: PyPI has no CPU-only x86_64 Linux torch wheel, and the one it has links
# libtorch_python.so -> libtorch_cuda.so -> libcudart/cublas/cudnn/nccl/nvshmem/...,
# so `import torch` fails unless the nvidia-* / cuda-toolkit libraries are present
# (torch --no-deps alone does not import). What torch does not need to import or run
# on CPU is left out: triton (~1 GB) and cuda-bindings/cuda-pathfinder. Everything is
# therefore installed with --no-deps from a fully pinned list (`pip check` will name
# the packages left out; that is expected).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$(cd "$here/.." && pwd)/.venv"
lock="$here/requirements.lock"
py="${PYTHON:-python3}"
packages=(torch transformers sentence-transformers faiss-cpu numpy onnx onnxscript onnxruntime)
skip='^(triton|cuda-bindings|cuda-pathfinder)$'
check='import torch, transformers, sentence_transformers, faiss, numpy, onnx, onnxruntime; assert float(torch.ones(3) @ torch.ones(3)) == 3.0'

fail() { echo "setup.sh: $*" >&2; exit 1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1

update=0
case "${1:-}" in
  --update) update=1 ;;
  "") ;;
  *) fail "unknown argument '$1' (usage: setup.sh [--update])" ;;
esac
[[ $update == 1 || -f "$lock" ]] || fail "missing $lock (run with --update to create it)"
command -v "$py" >/dev/null || fail "no '$py' on PATH (set PYTHON=...)"

# setuptools is pinned too (torch wants >= 77; the venv's own is older), pip is not.
frozen() { "$venv/bin/python" -m pip freeze --all | grep -v '^pip==' | LC_ALL=C sort; }
pinned() { grep -v '^#' "$lock" | LC_ALL=C sort; }

if [[ $update == 0 && -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$check" 2>/dev/null \
   && diff -q <(frozen) <(pinned) >/dev/null; then
  echo "setup.sh: ok: $venv already matches requirements.lock"
  exit 0
fi

if [[ $update == 1 ]]; then
  rm -rf "$venv"
fi
if [[ ! -x "$venv/bin/python" ]]; then
  "$py" -m venv "$venv" || fail "could not create a venv at $venv"
fi
pip=("$venv/bin/python" -m pip)

if [[ $update == 1 ]]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  "${pip[@]}" install -q --dry-run --ignore-installed --report "$tmp/report.json" "${packages[@]}" \
    || fail "pip could not resolve ${packages[*]}"
  "$venv/bin/python" - "$tmp/report.json" "$skip" > "$tmp/req.txt" <<'PY' || fail "could not read pip's report"
import json, re, sys
report, skip = json.load(open(sys.argv[1])), re.compile(sys.argv[2])
for item in report["install"]:
    meta = item["metadata"]
    if not skip.match(meta["name"].lower()):
        print(f'{meta["name"]}=={meta["version"]}')
PY
  "${pip[@]}" install -q --no-deps -r "$tmp/req.txt" || fail "pip install of the resolved packages failed"
  { echo "# pip freeze of eval/.venv, written by eval/reference/setup.sh --update (installed with --no-deps)"
    frozen; } > "$lock"
else
  "${pip[@]}" install -q --no-deps -r "$lock" || fail "pip install -r requirements.lock failed"
fi

"$venv/bin/python" -c "$check" || fail "packages installed, but the import check fails"
"$venv/bin/python" -c 'import torch, transformers, sentence_transformers, faiss, onnxruntime
print("setup.sh: ok: torch", torch.__version__, "| transformers", transformers.__version__,
      "| sentence-transformers", sentence_transformers.__version__, "| faiss", faiss.__version__,
      "| onnxruntime", onnxruntime.__version__)'
