#!/usr/bin/env bash
# The encoder's rate per CPU-second against one core's peak: `rag bench encode` at depth 6 on
# LIMIT paragraphs, f32 and int8 alternating for ROUNDS rounds, each under /usr/bin/time, less
# the CPU time of the same run on one paragraph (loading the model, tokenising, start-up). CPU
# time counts only the slices the encoder ran in, so on a shared machine this reads the
# encoder's efficiency where paragraphs/s (wall time) reads mostly the load; it over-counts
# (rayon's threads spin a while before they sleep), so the share is a lower bound. The clock
# is read before each round (peak.c's add chain, best of 20 trials).
#   [ROUNDS=3] [RAG_BIN=PATH] eval/encode/peak/achieved.sh [LIMIT=500]
# Needs eval/encode/peak/{peak,flops}.json for the same LIMIT (peak.sh, flops.py);
# writes eval/encode/peak/achieved.{json,md}, each run's output under eval/encode/peak/achieved/.
set -euo pipefail
cd "$(dirname "$0")/../../.."
LIMIT=${1:-500}
ROUNDS=${ROUNDS:-3}
RAG_BIN=${RAG_BIN:-${CARGO_TARGET_DIR:-target}/release/rag}
DATA=${RAG_DATA:-../shared/data}
CORPUS=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
DIR=eval/encode/peak
OUT=$DIR/achieved
[ -x "$RAG_BIN" ] || { echo "no rag binary at $RAG_BIN (cargo build --release, or RAG_BIN=)" >&2; exit 1; }
mkdir -p "$OUT"
PEAK=$(mktemp -d)/peak
trap 'rm -rf "$(dirname "$PEAK")"' EXIT
"${CC:-$(command -v clang || echo gcc)}" -O2 -mavx2 -mfma -pthread "$DIR/peak.c" -o "$PEAK"
bench() { # precision, limit, out
  nice /usr/bin/time -f '{"wall_s": %e, "user_s": %U, "sys_s": %S}' -o "$3.time" "$RAG_BIN" bench encode \
    --corpus "$CORPUS" --limit "$2" --layers 6 --batch-size 64 --max-length 256 \
    --template "{title}: {text}" --precision "$1" --json > "$3.json"
}
for precision in f32 int8; do
  echo "overhead: rag $precision on one paragraph ..." >&2
  bench "$precision" 1 "$OUT/overhead-$precision"
done
for round in $(seq 1 "$ROUNDS"); do
  nice "$PEAK" 20 10 > "$OUT/clock-$round.json"
  for precision in f32 int8; do
    echo "round $round/$ROUNDS: rag $precision ..." >&2
    bench "$precision" "$LIMIT" "$OUT/$precision-$round"
  done
done
python3 - "$DIR" "$OUT" "$ROUNDS" "$LIMIT" <<'PY'
import json, os, statistics, sys
dir_, out, rounds, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
peak, flops = json.load(open(f"{dir_}/peak.json")), json.load(open(f"{dir_}/flops.json"))
if flops["paragraphs"] != limit:
    sys.exit(f"achieved.sh: flops.json counts {flops['paragraphs']} paragraphs, not {limit}: run flops.py --limit {limit}")
# One core at peak.sh's median clock (peak.json's "derived"), the clock most trials ran at.
half = {k: v / 2 for k, v in peak["derived"]["two_cores_at_median_clock"].items()}
core = {"f32": half["f32_gflops"], "int8": half["int8_gmacs"]}
d6 = flops["depths"]["6"]
real = d6["gflop_per_paragraph"]["real"]
share = lambda g: g["projections"] + g["attention"]
def cpu(path):
    t = json.load(open(path + ".time"))
    return t["user_s"] + t["sys_s"], t["wall_s"]
report = {"limit": limit, "rounds": rounds, "load_average_after": os.getloadavg()[0],
          "core_peak": {"f32_gflops": core["f32"], "int8_gmacs": core["int8"]}, "runs": {}}
for precision in ("f32", "int8"):
    overhead, _ = cpu(f"{out}/overhead-{precision}")
    runs = []
    for r in range(1, rounds + 1):
        cpu_s, wall_s = cpu(f"{out}/{precision}-{r}")
        bench = json.load(open(f"{out}/{precision}-{r}.json"))["depths"][0]
        clock = next(k for k in json.load(open(f"{out}/clock-{r}.json"))["kernels"] if k["name"] == "clock_add_chain")
        encode_cpu = cpu_s - overhead
        gflop = limit * real["total"] + d6["warm_up_batch_gflop"]
        # Seconds a core at peak needs: f32 all at the FMA rate; int8's projections at the int8
        # rate (MACs), its attention in f32.
        if precision == "f32":
            ideal = gflop / core["f32"]
        else:
            frac = real["projections"] / real["total"]
            ideal = gflop * frac / 2 / core["int8"] + gflop * (1 - frac) / core["f32"]
        runs.append({"paragraphs_per_s": bench["paragraphs_per_s"], "wall_s": wall_s, "cpu_s": cpu_s,
                     "encode_cpu_s": encode_cpu, "gflop": gflop, "gflop_per_cpu_s": gflop / encode_cpu,
                     "share_of_core_peak": ideal / encode_cpu, "clock_ghz_before": clock["threads_1"]["best"]})
    report["runs"][precision] = {"overhead_cpu_s": overhead, "rounds": runs,
                                 "median_share_of_core_peak": statistics.median(r["share_of_core_peak"] for r in runs),
                                 "best_share_of_core_peak": max(r["share_of_core_peak"] for r in runs)}
json.dump(report, open(f"{dir_}/achieved.json", "w"), indent=1)
md = ["# The encoder's rate per CPU-second against one core's peak", "",
      f"`rag bench encode`, {limit} paragraphs, depth 6, batch 64, 2 threads; f32 and int8 alternating for {rounds} "
      f"rounds; CPU time (user + sys) less a one-paragraph run's (model load, start-up); FLOPs from `flops.json` "
      f"(plus the untimed warm-up batch); one core's peak at the median clock from `peak.json` (f32 {core['f32']:.1f} GFLOP/s, int8 "
      f"{core['int8']:.1f} GMAC/s). Load average {report['load_average_after']:.1f} at the end: the paragraphs/s are "
      f"the load's, the CPU-time shares the encoder's (a lower bound: spinning threads count).", "",
      "| precision | round | clock GHz | paragraphs/s (wall) | encoding CPU s | GFLOP per CPU-second | share of one core's peak |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
for precision, p in report["runs"].items():
    for i, r in enumerate(p["rounds"], 1):
        md.append(f"| {precision} | {i} | {r['clock_ghz_before']:.2f} | {r['paragraphs_per_s']:.1f} | {r['encode_cpu_s']:.1f} | "
                  f"{r['gflop_per_cpu_s']:.1f} | {100 * r['share_of_core_peak']:.0f}% |")
md += ["", "Median share of one core's peak: " + ", ".join(
    f"{p} {100 * v['median_share_of_core_peak']:.0f}% (best {100 * v['best_share_of_core_peak']:.0f}%)"
    for p, v in report["runs"].items()) + "."]
open(f"{dir_}/achieved.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
