#!/usr/bin/env bash
# Two `rag` binaries' encoding throughput, alternating in one run (a shared machine drifts by
# more than the difference between them): `rag bench encode` on the first LIMIT distractor
# paragraphs (`{title}: {text}`, max length 256, batch 64) at depths 6 and 3, ROUNDS rounds each,
# medians, with the CPU's flags and the kernels that ran (RAG_MAX_ISA=avx2 times the AVX2 path
# on an AVX-512 machine).
#   [RAG_MAX_ISA=avx2] [ROUNDS=3] [PRECISION=f32] eval/encode/ab.sh BASE_BIN NEW_BIN LABEL [LIMIT=256]
# Writes eval/encode/ab-LABEL.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=$1 NEW=$2 LABEL=$3 LIMIT=${4:-256}
DATA=${RAG_DATA:-../shared/data}
MODEL=${RAG_MODEL:-data/models/all-MiniLM-L6-v2}
ROUNDS=${ROUNDS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  for side in base new; do
    bin=$BASE; [ "$side" = new ] && bin=$NEW
    nice "$bin" bench encode --corpus "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" --model "$MODEL" \
      --limit "$LIMIT" --layers 6,3 --batch-size 64 --max-length 256 --template "{title}: {text}" \
      --precision "${PRECISION:-f32}" --json > "$TMP/$side-$round.json"
    echo "round $round $side: $(python3 -c "import json,sys; print({d['layers']: round(d['paragraphs_per_s'],1) for d in json.load(open(sys.argv[1]))['depths']})" "$TMP/$side-$round.json")" >&2
  done
done
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | sort | tr '\n' ' ')
python3 - "$TMP" "$ROUNDS" "$FLAGS" "eval/encode/ab-$LABEL.json" "$BASE" "$NEW" <<'PY'
import json, sys, statistics, datetime, os
tmp, rounds, flags, out, base, new = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6]
runs = {s: [json.load(open(f"{tmp}/{s}-{i}.json")) for i in range(1, rounds + 1)] for s in ("base", "new")}
pps = {s: [{d["layers"]: d["paragraphs_per_s"] for d in r["depths"]} for r in runs[s]] for s in runs}
report = {"date": datetime.datetime.utcnow().isoformat(timespec="minutes") + "Z", "cpu_flags": flags,
          "max_isa": os.environ.get("RAG_MAX_ISA", ""), "kernels": {s: runs[s][0].get("kernels") for s in runs},
          "base": base, "new": new, "rounds": rounds, "paragraphs": runs["base"][0]["depths"][0]["paragraphs"],
          "paragraphs_per_s": pps, "median": {}, "ratio_new_over_base": {}}
for depth in (6, 3):
    report["median"][str(depth)] = {s: statistics.median(p[depth] for p in pps[s]) for s in pps}
    report["ratio_new_over_base"][str(depth)] = statistics.median(n[depth] / b[depth] for n, b in zip(pps["new"], pps["base"]))
report["new_depth_scaling_3_vs_6"] = statistics.median(p[3] / p[6] for p in pps["new"])
json.dump(report, open(out, "w"), indent=1)
print(json.dumps({k: report[k] for k in ("median", "ratio_new_over_base", "new_depth_scaling_3_vs_6", "cpu_flags", "kernels")}))
PY
