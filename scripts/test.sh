#!/usr/bin/env bash
# The test suite: unit tests on tiny generated models, plus integration tests on the real default
# encoder (fetched here when missing) and the HotpotQA data in ../shared/data (or $RAG_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_build_deps
scripts/fetch-models.sh encoder
# Integration tests that need a model skip when it is missing; say so where CI logs show it
# (cargo hides the output of tests that pass).
llm=data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
[ -f "${RAG_LLM:-$llm}" ] ||
  echo "note: ${RAG_LLM:-$llm} is missing, so the generation tests will SKIP (scripts/fetch-models.sh llm fetches it)"
# The web page test (tests/web.rs) drives headless chromium; it answers with the small generator
# when it is there, else the default one.
ensure_browser || echo "note: chromium and chromium-driver are missing, so the web page test will SKIP (FAIL with RAG_REQUIRE set)"
[ -d "${RAG_DATA:-../shared/data}/hotpotqa" ] ||
  echo "note: ${RAG_DATA:-../shared/data}/hotpotqa is missing, so the HotpotQA end-to-end test will SKIP"
[ -d "${RAG_DATA:-../shared/data}/sts" ] ||
  echo "note: ${RAG_DATA:-../shared/data}/sts is missing, so the STS test on the default model will SKIP"
cargo test --release "$@"
