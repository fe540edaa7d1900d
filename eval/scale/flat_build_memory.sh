#!/usr/bin/env bash
# Peak memory of a flat build from given vectors (`rag index --vectors-from`, everything but the
# encoder), the synthetic harness's rows and texts for N documents at LAYERS x DIM (made first by
# `eval/scale/synthetic.sh --n N --layers L --dim K`): /usr/bin/time's peak resident set in
# $OUT/<label>.json. The index is built in a temporary folder and removed.
#   eval/scale/flat_build_memory.sh N LAYERS DIM [RAG_BIN]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=$1 layers=$2 dim=$3 rag=${4:-./rag}
data=${RAG_DATA:-../shared/data}
work=${WORK:-/work/scale-data}/n$n-L$layers-d$dim
out=${OUT:-eval/scale/results/flat_stream}
mkdir -p "$out"
index=$(mktemp -d /tmp/flat-build.XXXXXX)
trap 'rm -rf "$index"' EXIT
/usr/bin/time -v -o "$index.time" nice "$rag" index --index "$index/index" --layers "$layers" --dim "$dim" \
  --vectors-from "$work/rows" --json --corpus "$data/hotpotqa/hotpot_dev_distractor_sample.json" \
  --corpus "$data/hotpotqa/hotpot_dev_fullwiki_sample.json" --corpus "$work/synthetic.jsonl.gz" > "$index/summary.json"
python3 - "$index.time" "$index/summary.json" "$out/n$n-L$layers-d$dim.json" "$rag" <<'PY'
import json, sys
time_file, summary, out, rag = sys.argv[1:]
fields = dict(l.strip().split(": ", 1) for l in open(time_file) if ": " in l)
flags = next(l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags"))
result = {"rag": rag, "documents": json.load(open(summary))["documents"],
          "peak_rss_mib": round(int(fields["Maximum resident set size (kbytes)"]) / 1024, 1),
          "wall": fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"],
          "cpu_flags": [f for f in flags if f in ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_tile")]}
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result))
PY
rm -f "$index.time"
