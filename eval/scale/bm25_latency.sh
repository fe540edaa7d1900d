#!/usr/bin/env bash
# Warm BM25 and fusion two-hop latency on a large index, two `rag` binaries side by side,
# alternated ROUNDS times on the same machine: $OUT/<name>-<round>.json and $OUT/summary.md.
# Made for BM25 scoring every match against MaxScore (src/index/bm25/max_score.rs, OUT's
# default); OUT=eval/scale/results/fusion_parallel_5200000 holds a second hop's searches run
# one after another against side by side.
#   PROBE=serve (default): `/search` on a `rag serve` (serve_probe.py), BM25 one hop and fusion
#     two hops;
#   PROBE=bench: warm `rag bench query` processes, BM25 and fusion both two hops (the second
#     hop's whole-paragraph queries are where BM25's time goes at scale).
#   eval/scale/bm25_latency.sh INDEX BEFORE_BIN AFTER_BIN [QUESTIONS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 questions=${4:-50} rounds=${5:-2}
out=${OUT:-eval/scale/results/bm25_max_score}
probe=${PROBE:-serve}
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for name in before after; do
    bin=$before; [ "$name" = after ] && bin=$after
    echo "round $round $name (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    case $probe in
      serve) nice python3 eval/scale/serve_probe.py --rag "$bin" --index "$index" --out "$out/$name-$round.json" \
               --questions "$questions" --mode 'bm25={"mode":"bm25","hops":1}' \
               --mode 'fusion-two-hop={"mode":"fusion","hops":2}' > /dev/null ;;
      bench) nice "$bin" bench query --index "$index" --modes bm25,fusion --hops 2 --limit "$questions" --json \
               > "$out/$name-$round.json" ;;
      *) echo "PROBE is serve or bench, not $probe" >&2; exit 2 ;;
    esac
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/*-*.json")):
    r = json.load(open(f))
    name = f.rsplit("/", 1)[1].rsplit("-", 1)[0]
    # serve_probe.py: {"modes": {name: stats}}; rag bench query: {"latencies": [stats]}.
    modes = r["modes"].items() if "modes" in r else ((f"{m['mode']}-{m['hops']}-hop", m) for m in r["latencies"])
    for mode, m in modes:
        rows.setdefault((name, mode), []).append(m)
lines = ["| binary | mode | rounds | wall p50 ms (median of rounds) | wall p99 ms | index search p50 ms |", "| --- | --- | ---: | ---: | ---: | ---: |"]
for (name, mode), ms in sorted(rows.items()):
    def med(key):
        values = [m[key] for m in ms if key in m]
        return round(statistics.median(values), 1) if values else "-"
    lines.append(f"| {name} | {mode} | {len(ms)} | {med('p50_ms')} | {med('p99_ms')} | {med('search_p50_ms')} |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
