#!/usr/bin/env bash
# A cold two-hop `rag search` process (open, encode, fusion, two hops, title links), two `rag`
# binaries on one index, alternated ROUNDS times: the title links made from every title on
# first use (before) against stored and memory-mapped (after, src/index/links.rs). Wall time
# and peak memory per run, with the CPU flags and load: eval/scale/results/links/<name>.json.
#   eval/scale/links_cold.sh INDEX BEFORE_BIN AFTER_BIN NAME [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 name=$4 rounds=${5:-3}
out=eval/scale/results/links
mkdir -p "$out"
question="Were Scott Derrickson and Ed Wood of the same nationality?"
runs=()
for round in $(seq 1 "$rounds"); do
  for which in before after; do
    bin=$before; [ "$which" = after ] && bin=$after
    line=$( { nice /usr/bin/time -f "%e %M" "$bin" search "$question" --index "$index" --mode fusion --hops 2 --json > /dev/null; } 2>&1 | tail -1)
    runs+=("{\"binary\": \"$which\", \"wall_s\": ${line% *}, \"peak_rss_kib\": ${line#* }}")
  done
done
flags=$(grep -o -w -E 'avx2|fma|avx512f|avx512_vnni|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
printf '{"index": "%s", "cpu_flags": "%s", "load_average": "%s", "runs": [%s]}\n' "$index" "$flags" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(IFS=,; echo "${runs[*]}")" > "$out/$name.json"
python3 - "$out/$name.json" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
for which in ("before", "after"):
    runs = [x for x in r["runs"] if x["binary"] == which]
    print(which, "median wall s", statistics.median(x["wall_s"] for x in runs),
          "median peak MiB", round(statistics.median(x["peak_rss_kib"] for x in runs) / 1024))
PY
