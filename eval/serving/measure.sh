#!/usr/bin/env bash
# `rag serve` measured in one go: starts `rag serve` on the 19k index, sends the bad-input
# list, the load test (embeddings and dense search at 1, 8 and 32 clients), optionally a soak
# of mixed requests, the bad-input list again, then SIGTERM (the server must drain and exit 0).
#   eval/serving/measure.sh [SECONDS_PER_CELL] [SOAK_SECONDS] [ROUNDS]   (defaults 15, 0: no soak, 3)
# Writes eval/serving/default/{bad_input,load,soak,bad_input_after}.json. Run on a quiet machine: the
# Python client shares the cores with the server. The server runs at its default precision
# (int8 where the CPU has AVX-512 VNNI, else f32; load.json's `health` says which);
# PRECISION=f32 or PRECISION=int8 asks for one and writes under eval/serving/$PRECISION/ instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
DURATION=${1:-15}
SOAK=${2:-0}
ROUNDS=${3:-3}
INDEX=${INDEX:-index/hotpot-19k-dot}
ADDR=${ADDR:-127.0.0.1:18080}
PRECISION=${PRECISION:-}
OUT=eval/serving/default
PRECISION_FLAG=()
if [ -n "$PRECISION" ]; then
  OUT=eval/serving/$PRECISION
  PRECISION_FLAG=(--precision "$PRECISION")
fi
mkdir -p "$OUT"
[ -d "$INDEX" ] || { echo "no index at $INDEX (eval/retrieval/recall_latency.sh builds it)" >&2; exit 1; }
cargo build --release -q

LOG=$(mktemp -t rag-serve.XXXXXX.log)
"$RAG_BIN" serve --no-llm --index "$INDEX" --addr "$ADDR" "${PRECISION_FLAG[@]}" > "$LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://$ADDR/health" > /dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "server exited; see $LOG" >&2; exit 1; }
  sleep 1
done

python3 eval/serving/bad_input.py --addr "$ADDR" --out "$OUT/bad_input.json"
python3 eval/serving/load.py --addr "$ADDR" --routes embeddings,search --mode dense \
  --concurrency 1,8,32 --duration "$DURATION" --rounds "$ROUNDS" --out "$OUT/load.json"
if [ "$SOAK" -gt 0 ]; then
  python3 eval/serving/load.py --addr "$ADDR" --routes embeddings,search --soak "$SOAK" \
    --pid $SERVER --concurrency 8 --max-requests 100000000 --out "$OUT/soak.json"
fi
python3 eval/serving/bad_input.py --addr "$ADDR" --out "$OUT/bad_input_after.json"

trap - EXIT
kill -TERM $SERVER
if wait $SERVER; then
  echo "server drained and exited 0 on SIGTERM"
else
  echo "server exited with status $? on SIGTERM" >&2
  exit 1
fi
