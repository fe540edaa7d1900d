#!/usr/bin/env bash
# The test suite: unit tests on tiny generated models, plus integration tests on the real default
# encoder (fetched here when missing) and the HotpotQA data in ../shared/data (or $RAG_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_build_deps
# Unformatted code fails here, before the build, rather than slipping through as 26599df did.
cargo fmt --check >/dev/null || { echo "cargo fmt --check: unformatted code (run cargo fmt)" >&2; exit 1; }
scripts/fetch-models.sh encoder
# Integration tests that need a model or the data skip when it is missing, unless RAG_REQUIRE
# (CI sets RAG_REQUIRE=models,data) names it: then they fail. The generation tests use the
# default generator, else the small one, which is fetched here when models are required.
requires() { case ",${RAG_REQUIRE:-}," in *,"$1",*|*,all,*) return 0 ;; esac; return 1; }
llm=data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
if [ ! -f "${RAG_LLM:-$llm}" ]; then
  if requires models; then
    scripts/fetch-models.sh llm-small
  elif [ ! -f data/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf ]; then
    echo "note: no GGUF generator, so the generation tests will SKIP (scripts/fetch-models.sh llm or llm-small fetches one)"
  fi
fi
# The demo question (tests/demo_question.rs) is asked of the default generator on the default
# index, as scripts/setup.sh ends: with models and data required, the generator is fetched and
# index/default is built as setup builds it where it is missing (about 6-10 minutes on two
# cores; a fresh clone, as in CI, has none).
if requires models && requires data; then
  [ -f "${RAG_LLM:-$llm}" ] || scripts/fetch-models.sh llm
  if [ -z "${RAG_INDEX:-}" ] && [ ! -f index/default/manifest.json ]; then
    cargo build --release --quiet
    echo "building index/default for the demo question"
    nice "$RAG_BIN" index --layers 1,3,6
  fi
fi
# The cluster test (tests/cluster.rs) runs a local Ray cluster: with RAG_REQUIRE set, Ray is
# installed (cluster/setup.sh: PyPI, into a cached virtual environment) and then required.
if [ -n "${RAG_REQUIRE:-}" ]; then
  RAG_RAY_VENV="$(cluster/setup.sh)"
  export RAG_RAY_VENV RAG_REQUIRE="$RAG_REQUIRE,ray"
elif [ ! -x "${RAG_RAY_VENV:-$HOME/.cache/rag/ray-venv}/bin/ray" ]; then
  echo "note: Ray is not installed, so the cluster test will SKIP (cluster/setup.sh installs it)"
fi
# The web page test (tests/web.rs) drives headless chromium; it answers with the small generator
# when it is there, else the default one.
ensure_browser || echo "note: chromium and chromium-driver are missing, so the web page test will SKIP (FAIL with RAG_REQUIRE set)"
[ -d "${RAG_DATA:-../shared/data}/hotpotqa" ] ||
  echo "note: ${RAG_DATA:-../shared/data}/hotpotqa is missing, so the HotpotQA end-to-end test will SKIP"
[ -d "${RAG_DATA:-../shared/data}/sts" ] ||
  echo "note: ${RAG_DATA:-../shared/data}/sts is missing, so the STS test on the default model will SKIP"
# Tests that skip (a CPU feature missing, or a model without RAG_REQUIRE) say why here, listed
# once at the end.
RAG_SKIP_LOG=$(mktemp)
results=$(mktemp)
export RAG_SKIP_LOG
trap 'rm -f "$RAG_SKIP_LOG" "$results"' EXIT
# The library builds without the command line (clap and its derives are behind `cli`).
cargo check --release --lib --no-default-features --quiet
set +e
cargo test --release "$@" 2>&1 | tee "$results"
status=${PIPESTATUS[0]}
# On an AVX-512 machine the AVX2 path (most laptops', many cloud machines') is tested too: the
# encoder's kernel tests and the golden vectors again, its kernels capped at AVX2.
if [ $# -eq 0 ] && grep -qw avx512f /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo; then
  echo "the encoder's kernels and golden vectors again with RAG_MAX_ISA=avx2"
  for target in "--lib encoder::" "--test golden_vectors"; do
    # shellcheck disable=SC2086 # two words each
    RAG_MAX_ISA=avx2 cargo test --release $target 2>&1 | tee -a "$results"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  done
fi
set -e
if [ -s "$RAG_SKIP_LOG" ]; then
  echo "skipped: $(sort -u "$RAG_SKIP_LOG" | paste -sd ';' | sed 's/;/; /g')"
else
  echo "skipped: none"
fi
# One closing line for the whole suite (cargo prints one per test binary).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$results"
exit "$status"
