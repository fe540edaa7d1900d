#!/usr/bin/env bash
# `rag serve` at 5.2M, before (the graph read whole into memory) and after (memory-mapped, read
# into the page cache before ready): time to ready, resident memory (anonymous and file-backed)
# and warm /search p50 / p99 for dense at efSearch 64 and 512 and fusion two-hop, one binary
# after the other on the same index (eval/scale/serve_probe.py). Results:
# eval/scale/results/cold_search/serve-<name>-{before,after}.json.
# FLAT=1 times dense and fusion two-hop only (an index without a graph).
#   [MODEL=DIR] [QUESTIONS=100] [FLAT=1] eval/scale/cold_search_serve.sh INDEX BEFORE_BIN AFTER_BIN NAME
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 name=$4
model=${MODEL:-data/models/all-MiniLM-L6-v2}
out=eval/scale/results/cold_search
mkdir -p "$out"
modes=(--mode dense='{"mode":"dense","hops":1}' --mode fusion-two-hop='{"mode":"fusion","hops":2}')
[ -n "${FLAT:-}" ] || modes+=(--mode dense-ef512='{"mode":"dense","hops":1,"ef_search":512}')
for which in before after; do
  bin=$before; [ "$which" = after ] && bin=$after
  nice python3 eval/scale/serve_probe.py --rag "$bin" --index "$index" --serve-flag=--model="$model" \
    --questions "${QUESTIONS:-100}" --out "$out/serve-$name-$which.json" "${modes[@]}" >/dev/null
done
python3 - "$out/serve-$name" <<'PY'
import json, sys
for which in ("before", "after"):
    r = json.load(open(f"{sys.argv[1]}-{which}.json"))
    modes = ", ".join(f"{k} {v['p50_ms']}/{v['p99_ms']} ms (index {v['search_p50_ms']})" for k, v in r["modes"].items())
    print(f"{which}: ready {r['ready_s']} s, RSS ready {r['rss_ready_mib']} MiB {r['memory_ready_mib']}, "
          f"end {r['memory_end_mib']}; {modes}; load {r['load_average_before']} -> {r['load_average_after']}")
PY
