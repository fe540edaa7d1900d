#!/usr/bin/env bash
# Two `rag` binaries' two-hop BM25 and fusion latency on one index, in warm processes
# (`rag bench query`), alternated ROUNDS times so that both see the same load: each round's JSON
# in $OUT/<name>-<round>.json, the medians over rounds in $OUT/summary.md. For a change to BM25
# scoring whose rankings are the same (check with bm25_exactness.sh).
#   eval/scale/bm25_pair.sh INDEX BEFORE_BIN AFTER_BIN [QUESTIONS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 questions=${4:-40} rounds=${5:-4}
out=${OUT:?OUT=eval/scale/results/<name>}
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for name in before after; do
    bin=$before; [ "$name" = after ] && bin=$after
    echo "round $round $name (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    nice "$bin" bench query --index "$index" --modes bm25,fusion --hops 2 --limit "$questions" --json \
      > "$out/$name-$round.json"
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/*-*.json")):
    name = f.rsplit("/", 1)[1].rsplit("-", 1)[0]
    for mode in json.load(open(f))["latencies"]:
        rows.setdefault((name, mode["mode"]), []).append(mode)
lines = ["| binary | mode (two hops) | rounds | p50 ms (median of rounds) | p99 ms |", "| --- | --- | ---: | ---: | ---: |"]
for (name, mode), ms in sorted(rows.items()):
    med = lambda key: round(statistics.median(m[key] for m in ms), 1)
    lines.append(f"| {name} | {mode} | {len(ms)} | {med('p50_ms')} | {med('p99_ms')} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
