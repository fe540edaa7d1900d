#!/usr/bin/env bash
# The web page of `rag serve` measured in headless chromium on the default models (MiniLM, the
# 1.5B GGUF) and index: its bytes, and the time from Enter to the first answer token and to the
# whole answer for the first HotpotQA questions. Writes eval/web/measure.json and the
# screenshots page-wide.png and page-narrow.png beside it.
#   eval/web/measure.sh                       # index/default, 6 questions
#   RAG_INDEX=/path/to/index RAG_WEB_QUESTIONS=10 eval/web/measure.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
ensure_browser
ensure_debs "screenshot compression" pngquant
export RAG_WEB_OUT=eval/web
cargo bench --bench web_page
# A palette of 256 colours keeps them legible at a third of the size.
for png in eval/web/page-*.png; do
  pngquant --force --skip-if-larger --quality 65-90 --strip --output "$png" "$png" || true
done
