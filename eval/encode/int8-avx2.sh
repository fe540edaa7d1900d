#!/usr/bin/env bash
# `--precision int8` against f32 where the CPU has AVX2 but not AVX-512 VNNI (issue 57 item 3):
# encoding throughput (`rag bench encode`, LIMIT distractor paragraphs, `{title}: {text}`,
# max length 256, 6 layers) alternating f32 / int8 for ROUNDS rounds, each in its own warm
# process, with the load average before each run; each paragraph's cosine between its int8
# and f32 vectors (examples/precision_cosine.rs); HotpotQA dense Recall@5 with int8 questions
# against an f32 index (QUESTIONS questions; a copy of INDEX, default the 19k one); the CPU's
# flags with it all. Run on a quiet machine; on a shared one compare within a round.
#   [ROUNDS=3] [LIMIT=500] [QUESTIONS=1000] [INDEX=/work/main/index/default] [TAG=] eval/encode/int8-avx2.sh
# Writes eval/encode/int8-avx2[-TAG].{json,md} and the raw runs under eval/encode/int8-avx2[-TAG]/
# (TAG keeps another CPU's run beside the first one's, measured on a first-generation Zen).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
ROUNDS=${ROUNDS:-3}
LIMIT=${LIMIT:-500}
QUESTIONS=${QUESTIONS:-1000}
INDEX=${INDEX:-/work/main/index/default}
DATA=${RAG_DATA:-../shared/data}
CORPUS=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
MODEL=${RAG_MODEL:-data/models/all-MiniLM-L6-v2}
OUT=eval/encode/int8-avx2${TAG:+-$TAG}
mkdir -p "$OUT"
cargo build --release -q
cargo build --release -q --example precision_cosine
EXAMPLES=$(dirname "$RAG_BIN")/examples

load() { cut -d' ' -f1 /proc/loadavg; }
for round in $(seq 1 "$ROUNDS"); do
  for precision in f32 int8; do
    echo "round $round/$ROUNDS: $precision ..." >&2
    before=$(load)
    nice "$RAG_BIN" bench encode --corpus "$CORPUS" --limit "$LIMIT" --layers 6 --batch-size 64 \
      --max-length 256 --template "{title}: {text}" --precision "$precision" --json \
      > "$OUT/encode-$precision-$round.raw.json"
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["load_before"]=float(sys.argv[2]); r["load_after"]=float(sys.argv[3]); json.dump(r, open(sys.argv[4],"w"), indent=1)' \
      "$OUT/encode-$precision-$round.raw.json" "$before" "$(load)" "$OUT/encode-$precision-$round.json"
    rm "$OUT/encode-$precision-$round.raw.json"
  done
done

echo "cosine int8 / f32 ..." >&2
nice "$EXAMPLES/precision_cosine" "$CORPUS" "$MODEL" "$LIMIT" int8 6,3,1 > "$OUT/cosine.json"

echo "recall ..." >&2
COPY=$(mktemp -d)
trap 'rm -rf "$COPY"' EXIT
cp -r "$INDEX" "$COPY/index"
for precision in f32 int8; do
  nice "$RAG_BIN" eval --index "$COPY/index" --limit "$QUESTIONS" --layers 6 --dims 384 \
    --no-generate --mode dense --hops 1 --precision "$precision" --runs-dir "$OUT/runs" \
    --name "recall-$precision" --fresh > /dev/null
done

FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|bmi2|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | sort | tr '\n' ' ')
python3 - "$OUT" "$ROUNDS" "$FLAGS" "$LIMIT" "$QUESTIONS" <<'PY'
import json, statistics, sys, datetime
out, rounds, flags, limit, questions = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], sys.argv[5]
load = lambda name: json.load(open(f"{out}/{name}"))
runs = {p: [load(f"encode-{p}-{r}.json") for r in range(1, rounds + 1)] for p in ("f32", "int8")}
pps = {p: [r["depths"][0]["paragraphs_per_s"] for r in runs[p]] for p in runs}
ratios = [i / f for i, f in zip(pps["int8"], pps["f32"])]
cos = load("cosine.json")
recall = {p: load(f"runs/recall-{p}/summary.json")["cells"][0]["recall"]["5"] for p in ("f32", "int8")}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
report = {"date": datetime.datetime.utcnow().isoformat(timespec="minutes") + "Z", "cpu": cpu, "cpu_flags": flags,
          "paragraphs": int(limit), "rounds": rounds, "paragraphs_per_s": pps,
          "load_before": {p: [r["load_before"] for r in runs[p]] for p in runs},
          "median_paragraphs_per_s": {p: statistics.median(v) for p, v in pps.items()},
          "int8_over_f32_per_round": ratios, "int8_over_f32_median": statistics.median(ratios),
          "cosine_int8_to_f32": cos["depths"], "questions": int(questions), "recall_at_5": recall,
          "recall_at_5_difference": recall["int8"] - recall["f32"]}
json.dump(report, open(f"{out}.json", "w"), indent=1)
md = [f"# int8 against f32 on AVX2 ({cpu}; flags {' '.join(flags)})", "",
      f"{limit} distractor paragraphs, 6 layers, batch 64, max length 256, 2 threads; f32 and int8 alternating for "
      f"{rounds} rounds; load average before each run in brackets.", "",
      "| round | f32 p/s | int8 p/s | int8 / f32 |", "| --- | ---: | ---: | ---: |"]
for r in range(rounds):
    md.append(f"| {r + 1} | {pps['f32'][r]:.1f} ({report['load_before']['f32'][r]:.1f}) | "
              f"{pps['int8'][r]:.1f} ({report['load_before']['int8'][r]:.1f}) | {ratios[r]:.2f}x |")
md.append(f"| median | {report['median_paragraphs_per_s']['f32']:.1f} | {report['median_paragraphs_per_s']['int8']:.1f} | "
          f"{report['int8_over_f32_median']:.2f}x |")
md += ["", "| layers | lowest cosine int8 / f32 | 1st percentile | median | paragraphs under 0.99 |",
       "| --- | ---: | ---: | ---: | ---: |"]
md += [f"| {d['layers']} | {d['lowest']:.4f} | {d['p01']:.4f} | {d['median']:.5f} | {d['under_0_99']} of {cos['paragraphs']} |"
       for d in cos["depths"]]
md += ["", f"HotpotQA dense Recall@5 ({questions} questions, 6 layers, 384 dims, f32 index): f32 {recall['f32']:.4f}, "
       f"int8 questions {recall['int8']:.4f} ({recall['int8'] - recall['f32']:+.4f})."]
open(f"{out}.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
