#!/usr/bin/env bash
# What a search process pays to check the model's weights: a small index (the first 300
# documents of CORPUS, depth 6, f32) built by AFTER_BIN (which records the weights' seal), then
# the same warm-cache `rag search` by BEFORE_BIN (hashes the weights at every start) and by
# AFTER_BIN (skips the hash while the seal matches), alternated, ROUNDS each; wall times by
# /usr/bin/time. Result: eval/scale/results/model_seal/<NAME>.{json,md}.
#   [MODEL=DIR] eval/scale/model_seal.sh CORPUS.jsonl[.gz] BEFORE_BIN AFTER_BIN NAME [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
corpus=$1 before=$2 after=$3 name=$4 rounds=${5:-7}
model=${MODEL:-data/models/all-MiniLM-L6-v2}
out=eval/scale/results/model_seal
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $corpus in
  *.gz) zcat "$corpus" | head -300 >"$work/corpus.jsonl" || true ;;
  *) head -300 "$corpus" >"$work/corpus.jsonl" ;;
esac
"$after" index --corpus "$work/corpus.jsonl" --index "$work/index" --model "$model" --layers 6 \
  --precision f32 --json >"$work/build.json"
question="Between Harvey Pekar and Denise Levertov who was born earlier?"
for round in $(seq "$rounds"); do
  for which in before after; do
    bin=$before
    [ "$which" = after ] && bin=$after
    /usr/bin/time -o "$work/time" -f "%e" "$bin" search "$question" --index "$work/index" --mode dense \
      --json >/dev/null
    echo "{\"binary\": \"$which\", \"round\": $round, \"wall_s\": $(cat "$work/time")}" >>"$work/runs.jsonl"
  done
done
python3 - "$work" "$out/$name" "$before" "$after" "$model" <<'PY'
import json, os, statistics, sys
work, dest, before, after, model = sys.argv[1:]
runs = [json.loads(l) for l in open(os.path.join(work, "runs.jsonl"))]
manifest = json.load(open(os.path.join(work, "index", "manifest.json")))
flags = sorted({f for l in open("/proc/cpuinfo") if l.startswith("flags") for f in l.split(":", 1)[1].split()
                if f.startswith(("avx", "amx", "fma", "sha"))})
weights = os.path.join(model, "model.safetensors")
med = {w: statistics.median(r["wall_s"] for r in runs if r["binary"] == w) for w in ("before", "after")}
result = {"before": before, "after": after, "model": model, "weights_bytes": os.path.getsize(weights),
          "weights_sealed": manifest["model"].get("weights_seal") is not None, "cpu_flags": flags,
          "load_average": os.getloadavg(), "median_wall_s": med, "runs": runs}
json.dump(result, open(dest + ".json", "w"), indent=1)
with open(dest + ".md", "w") as f:
    f.write(f"# Warm `rag search` (dense, 300-document index): the model's weights hashed or sealed\n\n"
            f"before `{before}`, after `{after}`; model {model} ({result['weights_bytes']:,} bytes of weights, "
            f"sealed in the manifest: {result['weights_sealed']}); CPU flags {' '.join(flags)}; "
            f"load average at the end {' '.join(f'{x:.2f}' for x in result['load_average'])}.\n\n"
            f"| binary | median wall s | rounds |\n| --- | ---: | --- |\n")
    for w in ("before", "after"):
        walls = ", ".join(str(r["wall_s"]) for r in runs if r["binary"] == w)
        f.write(f"| {w} | {med[w]:.2f} | {walls} |\n")
print(open(dest + ".md").read())
PY
