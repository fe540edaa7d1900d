#!/usr/bin/env bash
# The test suite: unit tests on tiny generated models, plus integration tests on the real default
# encoder (fetched here when missing) and the HotpotQA data in ../shared/data (or $RAG_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
ensure_build_deps
scripts/fetch-models.sh encoder
cargo test --release "$@"
