#!/usr/bin/env bash
# The sharding benchmark (eval/scale/README.md): the HotpotQA sample (both files, ~19k
# paragraphs) indexed once locally and with 1, 2 and 4 shards on a local 3-node Ray cluster
# (cluster/local-cluster.sh, in a private network namespace), then single vs 4-shard search
# latency and Recall@5 (in process, and through rag-ray eval). Writes results/ here.
#
#   eval/scale/bench.sh            LAYERS=6 by default; LAYERS=1 for a quick pass
set -euo pipefail
cd "$(dirname "$0")/../.."
rag="$(pwd)/rag"; [ -x "$rag" ] || rag="${RAG_BIN:?build rag first (scripts/setup.sh makes ./rag) or set RAG_BIN}"
layers="${LAYERS:-6}"
model="$(pwd)/data/models/all-MiniLM-L6-v2"
data="$(cd "${RAG_DATA:-../shared/data}" && pwd)"
corpus=(--corpus "$data/hotpotqa/hotpot_dev_distractor_sample.json" --corpus "$data/hotpotqa/hotpot_dev_fullwiki_sample.json")
work="$(mktemp -d /tmp/rag-scale.XXXXXX)"
out="eval/scale/results/L$layers"
mkdir -p "$out"
trap 'cluster/local-cluster.sh stop "$work/cluster" >/dev/null; rm -rf "$work"' EXIT

echo "single index, locally" >&2
/usr/bin/time -f '{"seconds": %e, "peak_rss_mb": %M}' -o "$work/single.time" \
  "$rag" index --index "$work/single" --model "$model" "${corpus[@]}" --layers "$layers" --json > "$out/single-build.json"
# %M is in KB.
python3 -c "import json,sys; t=json.load(open(sys.argv[1])); t['peak_rss_mb']/=1024; json.dump(t,open(sys.argv[2],'w'),indent=2)" "$work/single.time" "$out/single-time.json"

cluster/local-cluster.sh start "$work/cluster" >&2
for n in 1 2 4; do
  echo "$n shard(s) on the cluster" >&2
  cluster/local-cluster.sh run "$work/cluster" cluster/rag-ray index --index "$work/sharded-$n" --shards "$n" \
    --rag "$rag" --json -- --model "$model" "${corpus[@]}" --layers "$layers" > "$out/sharded-$n-build.json"
done

for index in single sharded-4; do
  "$rag" bench query --index "$work/$index" --modes dense,bm25,fusion --limit 200 --json > "$out/$index-query.json"
  "$rag" eval --index "$work/$index" --no-generate --mode dense --hops 1 --runs-dir "$work/runs" --name "$index" --json \
    > "$out/$index-eval-dense.json"
  "$rag" eval --index "$work/$index" --no-generate --mode bm25 --hops 1 --runs-dir "$work/runs" --name "$index-bm25" --json \
    > "$out/$index-eval-bm25.json"
done
cluster/local-cluster.sh run "$work/cluster" cluster/rag-ray eval --index "$work/sharded-4" --rag "$rag" --json -- \
  --no-generate --mode dense --hops 1 --runs-dir "$work/runs" --name ray-sharded-4 > "$out/ray-sharded-4-eval-dense.json"
python3 eval/scale/report.py "$out" > "$out/summary.md"
cat "$out/summary.md"
