#!/usr/bin/env bash
# `--precision bf16` against f32 (and int8) on a CPU with AVX-512 BF16, in stages:
#   throughput  the same 2,000 distractor paragraphs (max length 256, batch 64, 2 threads,
#               depths 6/3/1) encoded by rag f32, bf16 and int8, sentence-transformers, and
#               ONNX Runtime f32 and dynamic int8, each in its own process, alternating for
#               ROUNDS rounds (default 3); medians. On a machine of more than two cores every
#               process is pinned to cores 0-1 (taskset), like the 2-core machine of the issue.
#   fidelity    each paragraph's bf16 vector against its f32 one (`rag bench encode --fidelity`),
#               mean and lowest cosine per depth.
#   recall      HotpotQA dense Recall@1/2/5/10 on the 19k-paragraph corpus (both sample files),
#               index and questions in f32, then index and questions in bf16, 3/6 layers x 64/384.
# Writes OUT (default eval/precision/bf16/: each run's JSON, summary.json, summary.md), with the
# CPU's model and flags.
#   [STAGES="throughput fidelity recall"] [ROUNDS=3] [LIMIT=2000] [LAYERS=6,3,1] eval/precision/bf16.sh
# RAG_BIN: the rag binary (default: built here); PYTHON: a python with torch,
# sentence-transformers and onnxruntime (default eval/.venv's); RAG_MODEL: the encoder
# (default data/models/all-MiniLM-L6-v2); RAG_DATA: ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/../.."
STAGES=${STAGES-throughput fidelity recall}
ROUNDS=${ROUNDS:-3}
LIMIT=${LIMIT:-2000}
LAYERS=${LAYERS:-6,3,1}
DATA=${RAG_DATA:-../shared/data}
MODEL=${RAG_MODEL:-data/models/all-MiniLM-L6-v2}
PYTHON=${PYTHON:-eval/.venv/bin/python}
OUT=${OUT:-eval/precision/bf16}
CORPUS=$DATA/hotpotqa/hotpot_dev_distractor_sample.json
TEMPLATE="{title}: {text}"
mkdir -p "$OUT"
if [ -n "$STAGES" ] && [ -z "${RAG_BIN:-}" ]; then
  source scripts/common.sh
  cargo build --release -q
  RAG_BIN=$CARGO_TARGET_DIR/release/rag
fi
[ -z "$STAGES" ] || grep -qw avx512_bf16 /proc/cpuinfo || { echo "this CPU has no AVX-512 BF16: bf16 would run as f32" >&2; exit 1; }
pin=()
[ "$(nproc)" -gt 2 ] && pin=(taskset -c 0,1)
has() { [[ " $STAGES " == *" $1 "* ]]; }

if has throughput; then
  for round in $(seq 1 "$ROUNDS"); do
    for precision in f32 bf16 int8; do
      echo "round $round/$ROUNDS: rag $precision" >&2
      RAYON_NUM_THREADS=2 "${pin[@]}" "$RAG_BIN" bench encode --model "$MODEL" --corpus "$CORPUS" \
        --limit "$LIMIT" --layers "$LAYERS" --batch-size 64 --max-length 256 --template "$TEMPLATE" \
        --precision "$precision" --json > "$OUT/rag-$precision-$round.json"
    done
    for backend in st ort ort-int8; do
      echo "round $round/$ROUNDS: $backend" >&2
      "${pin[@]}" "$PYTHON" eval/reference/encode_throughput.py --backend "$backend" --model "$MODEL" \
        --corpus "$CORPUS" --limit "$LIMIT" --layers "$LAYERS" --batch-size 64 --max-length 256 \
        --threads 2 --template "$TEMPLATE" --json > "$OUT/$backend-$round.json"
    done
  done
fi
if has fidelity; then
  "$RAG_BIN" bench encode --model "$MODEL" --corpus "$CORPUS" --limit 2000 --layers 6,3,1 \
    --template "$TEMPLATE" --precision bf16 --fidelity --json > "$OUT/fidelity.json"
fi
if has recall; then
  for precision in f32 bf16; do
    index=$OUT/index-$precision
    rm -rf "$index"
    "$RAG_BIN" index --index "$index" --model "$MODEL" --layers 3,6 --template "$TEMPLATE" \
      --precision "$precision" --corpus "$CORPUS" --corpus "$DATA/hotpotqa/hotpot_dev_fullwiki_sample.json" \
      > /dev/null
    "$RAG_BIN" eval --no-generate --sweep --mode dense --hops 1 --index "$index" --layers 3,6 \
      --dims 64,384 --precision "$precision" --runs-dir "$OUT/runs" --name "recall-$precision" \
      --fresh --json > "$OUT/recall-$precision.json"
    rm -rf "$index"
  done
fi

"$PYTHON" - "$OUT" "$ROUNDS" "$LIMIT" "$LAYERS" <<'PY'
import json, os, statistics, sys
out, rounds, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
layers = [int(l) for l in sys.argv[4].split(",")]
path = lambda name: os.path.join(out, name)
load = lambda name: json.load(open(path(name)))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
flags = sorted(f for f in next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()[2:]
               if f in ("avx2", "fma", "avx_vnni") or f.startswith(("avx512", "amx")))
summary = {"cpu": cpu, "cpu_flags": flags, "cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0]}
md = ["# `--precision bf16` against f32", "", f"{cpu}, {os.cpu_count()} cores, flags {' '.join(flags)}; "
      f"load average {os.getloadavg()[0]:.1f} at the end.", ""]
if os.path.exists(path("rag-f32-1.json")):
    def per_s(name, depth):
        d = load(name)
        if "depths" in d:
            return next(x["paragraphs_per_s"] for x in d["depths"] if x["layers"] == depth)
        return d["layers"][str(depth)]["paragraphs_per_s"]
    runs = {"rag f32": "rag-f32", "rag bf16": "rag-bf16", "rag int8": "rag-int8",
            "sentence-transformers": "st", "ONNX Runtime f32": "ort", "ONNX Runtime int8": "ort-int8"}
    md += [f"Encoding, the first {limit:,} distractor paragraphs, max length 256, batch 64, 2 threads; paragraphs/s, "
           f"medians of {rounds} alternating rounds, and bf16's ratio to each (median of the per-round ratios).", "",
           "| layers | " + " | ".join(runs) + " | bf16 / f32 | bf16 / ST | bf16 / ORT f32 | bf16 / ORT int8 |",
           "|---:|" + "---:|" * (len(runs) + 4)]
    summary["throughput"] = {}
    for depth in layers:
        rates = {k: [per_s(f"{v}-{r}.json", depth) for r in range(1, rounds + 1)] for k, v in runs.items()}
        ratio = lambda other: statistics.median(b / o for b, o in zip(rates["rag bf16"], rates[other]))
        ratios = {o: ratio(o) for o in ("rag f32", "sentence-transformers", "ONNX Runtime f32", "ONNX Runtime int8")}
        summary["throughput"][depth] = {"median_paragraphs_per_s": {k: statistics.median(v) for k, v in rates.items()},
                                        "bf16_ratio": ratios}
        md.append(f"| {depth} | " + " | ".join(f"{statistics.median(v):.1f}" for v in rates.values()) + " | "
                  + " | ".join(f"{x:.2f}x" for x in ratios.values()) + " |")
    md.append("")
if os.path.exists(path("fidelity.json")):
    depths = load("fidelity.json")["depths"]
    summary["fidelity"] = {d["layers"]: d["cosine_to_f32"] for d in depths}
    md += ["bf16 vectors against f32 ones, same 2,000 paragraphs (cosine per paragraph):", "",
           "| layers | mean | lowest |", "|---:|---:|---:|"]
    md += [f"| {d['layers']} | {d['cosine_to_f32']['mean']:.5f} | {d['cosine_to_f32']['min']:.5f} |" for d in depths]
    md.append("")
if os.path.exists(path("recall-bf16.json")):
    cells = {p: {(c["layers"], c["dim"]): c["recall"] for c in load(f"runs/recall-{p}/summary.json")["cells"]} for p in ("f32", "bf16")}
    summary["recall"] = {f"{l}/{d}": {p: cells[p][(l, d)] for p in cells} for (l, d) in sorted(cells["f32"])}
    md += ["HotpotQA dense retrieval, 1,186 distractor questions, 19k-paragraph index; index and questions "
           "in the same precision:", "", "| layers / dims | R@5 f32 | R@5 bf16 | difference (points) | R@1 f32 | R@1 bf16 |",
           "|---|---:|---:|---:|---:|---:|"]
    for (l, d) in sorted(cells["f32"], reverse=True):
        a, b = cells["f32"][(l, d)], cells["bf16"][(l, d)]
        md.append(f"| {l} / {d} | {a['5']:.3f} | {b['5']:.3f} | {100 * (b['5'] - a['5']):+.1f} | {a['1']:.3f} | {b['1']:.3f} |")
json.dump(summary, open(path("summary.json"), "w"), indent=1)
open(path("summary.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
