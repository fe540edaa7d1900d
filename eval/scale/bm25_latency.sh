#!/usr/bin/env bash
# Warm BM25 and fusion two-hop /search latency on a large index, two `rag` binaries side by side,
# alternated ROUNDS times on the same machine: $OUT/<name>-<round>.json and $OUT/summary.md.
# Made for BM25 scoring every match against MaxScore (src/index/bm25/max_score.rs, OUT's
# default); OUT=eval/scale/results/fusion_parallel_5200000 holds a second hop's searches run
# one after another against side by side.
#   eval/scale/bm25_latency.sh INDEX BEFORE_BIN AFTER_BIN [QUESTIONS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 questions=${4:-50} rounds=${5:-2}
out=${OUT:-eval/scale/results/bm25_max_score}
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for name in before after; do
    bin=$before; [ "$name" = after ] && bin=$after
    nice python3 eval/scale/serve_probe.py --rag "$bin" --index "$index" --out "$out/$name-$round.json" \
      --questions "$questions" --mode 'bm25={"mode":"bm25","hops":1}' \
      --mode 'fusion-two-hop={"mode":"fusion","hops":2}' > /dev/null
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/*-*.json")):
    r = json.load(open(f))
    name = f.rsplit("/", 1)[1].rsplit("-", 1)[0]
    for mode, m in r["modes"].items():
        rows.setdefault((name, mode), []).append(m)
lines = ["| binary | mode | rounds | wall p50 ms (median of rounds) | wall p99 ms | index search p50 ms |", "| --- | --- | ---: | ---: | ---: | ---: |"]
for (name, mode), ms in sorted(rows.items()):
    med = lambda key: round(statistics.median(m.get(key, float("nan")) for m in ms), 1)
    lines.append(f"| {name} | {mode} | {len(ms)} | {med('p50_ms')} | {med('p99_ms')} | {med('search_p50_ms')} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
