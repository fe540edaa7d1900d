#!/usr/bin/env bash
# Encoding throughput against the peers, alternating in one run: sentence-transformers (PyTorch),
# ONNX Runtime f32 and dynamic int8 (eval/reference/encode_throughput.py) and `rag bench encode`
# in f32 and int8, on the same LIMIT distractor paragraphs (`{title}: {text}`, max length 256,
# batch 64, 2 threads) at depths 6, 3 and 1, ROUNDS rounds (default 3), medians: on a shared
# virtual machine every backend drifts by up to 10% from one minute to the next. Run on a quiet
# machine: all of them use every core. The CPU's flags are recorded beside the numbers, so an
# AVX2 row can be told from an AVX-512 one; a `rag` precision this CPU cannot run is recorded as
# refused, not timed. RAG_BIN=PATH times that binary instead of building this tree's;
# RAG_MAX_ISA=avx2 caps rag's kernels at AVX2 (the peers keep their own detection).
#   [ROUNDS=3] [RAG_BIN=PATH] eval/encode/throughput.sh [LIMIT=2000]
# Writes eval/encode/throughput.{json,md} (each round's raw output under eval/encode/throughput/).
set -euo pipefail
cd "$(dirname "$0")/../.."
GIVEN_BIN=${RAG_BIN:-}
source scripts/common.sh
LIMIT=${1:-2000}
DATA=${RAG_DATA:-../shared/data}
CORPUS=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
TEMPLATE="{title}: {text}"
OUT=eval/encode/throughput
mkdir -p "$OUT"
eval/reference/setup.sh >/dev/null
[ -n "$GIVEN_BIN" ] || cargo build --release -q
[ -x "$RAG_BIN" ] || { echo "no rag binary at $RAG_BIN" >&2; exit 1; }
ROUNDS=${ROUNDS:-3}
for round in $(seq 1 "$ROUNDS"); do
  for backend in st ort ort-int8; do
    echo "round $round/$ROUNDS: $backend ..." >&2
    eval/.venv/bin/python eval/reference/encode_throughput.py --backend "$backend" --corpus "$CORPUS" \
      --limit "$LIMIT" --layers 6,3,1 --batch-size 64 --max-length 256 --threads 2 --template "$TEMPLATE" \
      --json > "$OUT/$backend-$round.json"
  done
  for precision in f32 int8; do
    echo "round $round/$ROUNDS: rag $precision ..." >&2
    if ! "$RAG_BIN" bench encode --corpus "$CORPUS" --limit "$LIMIT" --layers 6,3,1 --batch-size 64 \
      --max-length 256 --template "$TEMPLATE" --precision "$precision" --json \
      > "$OUT/rag-$precision-$round.json" 2> "$OUT/rag-$precision-$round.err"; then
      echo "{\"refused\": $(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read().strip()))' "$OUT/rag-$precision-$round.err")}" \
        > "$OUT/rag-$precision-$round.json"
    fi
    rm -f "$OUT/rag-$precision-$round.err"
  done
done
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | sort | tr '\n' ' ')
python3 - "$OUT" "$ROUNDS" "$FLAGS" "$RAG_BIN" <<'PY'
import json, sys, statistics, datetime, os
out, rounds, flags, rag_bin = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
sides = ["st", "ort", "ort-int8", "rag-f32", "rag-int8"]
raw = {s: [json.load(open(f"{out}/{s}-{i}.json")) for i in range(1, rounds + 1)] for s in sides}
def pps(run, depth):
    if "refused" in run:
        return None
    if "depths" in run:  # rag
        return next(d["paragraphs_per_s"] for d in run["depths"] if d["layers"] == depth)
    return run["layers"][str(depth)]["paragraphs_per_s"]
report = {"date": datetime.datetime.utcnow().isoformat(timespec="minutes") + "Z", "cpu_flags": flags,
          "max_isa": os.environ.get("RAG_MAX_ISA", ""),
          "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
          "load_average_after": os.getloadavg()[0], "rag_bin": rag_bin,
          "rounds": rounds, "median_paragraphs_per_s": {}, "ratio": {}}
rows = []
for depth in (6, 3, 1):
    per = {s: [pps(r, depth) for r in raw[s]] for s in sides}
    med = {s: (statistics.median(v) if None not in v else None) for s, v in per.items()}
    report["median_paragraphs_per_s"][str(depth)] = med
    def ratio(a, b):
        if None in per[a] or None in per[b]:
            return None
        return round(statistics.median(x / y for x, y in zip(per[a], per[b])), 3)
    report["ratio"][str(depth)] = {"rag_f32/st": ratio("rag-f32", "st"), "rag_f32/ort": ratio("rag-f32", "ort"),
                                   "rag_int8/ort_int8": ratio("rag-int8", "ort-int8")}
    fmt = lambda x: "refused" if x is None else f"{x:.1f}"
    rows.append(f"| {depth} | " + " | ".join(fmt(med[s]) for s in sides) + " | "
                + " | ".join(fmt(x) + ("x" if x else "") for x in report["ratio"][str(depth)].values()) + " |")
f32 = [[pps(r, d) for d in (3, 6)] for r in raw["rag-f32"]]
report["rag_f32_depth_scaling_3_vs_6"] = round(statistics.median(a / b for a, b in f32), 3)
json.dump(report, open("eval/encode/throughput.json", "w"), indent=1)
md = ["# Encoding throughput against the peers", "",
      f"{report['cpu']}, flags {' '.join(flags)}{', RAG_MAX_ISA=' + report['max_isa'] + ' (rag only)' if report['max_isa'] else ''}; {raw['st'][0]['paragraphs']} distractor paragraphs, max length 256, "
      f"batch 64, 2 threads; all five alternating for {rounds} rounds, medians (paragraphs/s); "
      f"load average {report['load_average_after']:.1f} at the end.", "",
      "| layers | ST | ORT f32 | ORT int8 | rag f32 | rag int8 | rag f32 / ST | rag f32 / ORT | rag int8 / ORT int8 |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", *rows, "",
      f"rag f32 depth scaling, layers 3 vs 6: {report['rag_f32_depth_scaling_3_vs_6']:.2f}x (target >= 1.9x)."]
open("eval/encode/throughput.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
