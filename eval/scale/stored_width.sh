#!/usr/bin/env bash
# Storing at the chosen size (issue 53 item 1): the same corpus subset indexed at 3 layers x 64
# dims (`rag index --layers 3 --dim 64`) and 3 x 384 (`--layers 3`, the full width): build time,
# peak memory, size on disk (vectors and whole index), and whether dense rankings at 64 dims
# agree between the two. Writes results/stored_width/.
#
#   eval/scale/stored_width.sh            RECORDS=100 distractor records (~1,000 paragraphs)
set -euo pipefail
cd "$(dirname "$0")/../.."
rag="$(pwd)/rag"; [ -x "$rag" ] || rag="${RAG_BIN:?build rag first (scripts/setup.sh makes ./rag) or set RAG_BIN}"
records="${RECORDS:-100}"
model="$(pwd)/data/models/all-MiniLM-L6-v2"
data="$(cd "${RAG_DATA:-../shared/data}" && pwd)"
work="$(mktemp -d /tmp/rag-stored-width.XXXXXX)"
out="eval/scale/results/stored_width"
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT

python3 - "$data/hotpotqa/hotpot_dev_distractor_sample.json" "$work/corpus.json" "$records" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))[: int(sys.argv[3])]
json.dump(records, open(sys.argv[2], "w"))
PY

for dim in 64 384; do
  echo "3 x $dim" >&2
  /usr/bin/time -f '{"seconds": %e, "peak_rss_kb": %M}' -o "$work/time-$dim.json" \
    "$rag" index --index "$work/index-$dim" --model "$model" --corpus "$work/corpus.json" \
    --layers 3 --dim "$dim" --precision f32 --json > "$work/build-$dim.json"
  n=0
  for q in "Which magazine was started first, Arthur's Magazine or First for Women?" \
           "Who directed the film that won the Palme d'Or?" "What river flows through the city?"; do
    n=$((n + 1))
    "$rag" search "$q" --index "$work/index-$dim" --mode dense --layers 3 --dim 64 --k 10 --json > "$work/search-$dim-$n.json"
  done
done

python3 - "$work" "$out" "$records" <<'PY'
import json, os, sys
work, out, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
rows = {}
for dim in (64, 384):
    build = json.load(open(f"{work}/build-{dim}.json"))
    t = json.load(open(f"{work}/time-{dim}.json"))
    ids = [[h["id"] for h in json.load(open(f"{work}/search-{dim}-{n}.json"))["hits"]] for n in (1, 2, 3)]
    rows[dim] = {
        "documents": build["documents"], "stored_dim": build["stored_dim"],
        "build_seconds": t["seconds"], "encode_seconds": round(build["encode_seconds"], 2),
        "peak_rss_mb": round(t["peak_rss_kb"] / 1024, 1),
        "vector_bytes": du(f"{work}/index-{dim}/dense"), "index_bytes": du(f"{work}/index-{dim}"),
        "dense_top10_at_64": ids,
    }
result = {"records": records, "cpu": "2 cores, AVX2 only (no AVX-512/AMX), shared and loaded", "runs": rows}
result["same_rankings_at_64"] = rows[64]["dense_top10_at_64"] == rows[384]["dense_top10_at_64"]
json.dump(result, open(f"{out}/result.json", "w"), indent=2)
with open(f"{out}/result.md", "w") as f:
    f.write(f"{rows[64]['documents']} paragraphs ({records} distractor records), depth 3, f32; {result['cpu']}.\n\n")
    f.write("| stored | build s | encode s | peak MB | vectors bytes | index bytes |\n| --- | --- | --- | --- | --- | --- |\n")
    for dim, r in rows.items():
        f.write(f"| 3 x {dim} | {r['build_seconds']} | {r['encode_seconds']} | {r['peak_rss_mb']} | {r['vector_bytes']:,} | {r['index_bytes']:,} |\n")
    f.write(f"\nvectors 3 x 64 / 3 x 384: {rows[64]['vector_bytes'] / rows[384]['vector_bytes']:.4f}; "
            f"dense top 10 at 64 dims identical for 3 questions: {result['same_rankings_at_64']}\n")
print(open(f"{out}/result.md").read())
PY
