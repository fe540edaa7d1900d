#!/usr/bin/env bash
# MaxScore ranks exactly like scoring every match, on a large index: the same retrievals (top 10
# titles, in order) from two `rag` binaries, BM25 one hop over all 1,186 distractor questions and
# the default pipeline (fusion, two hops) over the first LIMIT:
# $OUT/exactness.json (OUT: eval/scale/results/bm25_max_score by default).
#   eval/scale/bm25_exactness.sh INDEX BEFORE_BIN AFTER_BIN [LIMIT]
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 limit=${4:-300}
out=${OUT:-eval/scale/results/bm25_max_score}
mkdir -p "$out"
runs=$(mktemp -d /tmp/bm25-exactness.XXXXXX)
trap 'rm -rf "$runs"' EXIT
for name in before after; do
  bin=$before; [ "$name" = after ] && bin=$after
  nice "$bin" eval --index "$index" --no-generate --mode bm25 --hops 1 --runs-dir "$runs" --name "$name-bm25" --json > /dev/null
  nice "$bin" eval --index "$index" --no-generate --limit "$limit" --runs-dir "$runs" --name "$name-default" --json > /dev/null
done
python3 - "$runs" "$index" "$out" <<'PY'
import json, sys
runs, index, out_dir = sys.argv[1:]
def retrieved(name):
    return [json.loads(l)["retrieved"] for l in open(f"{runs}/{name}/predictions.jsonl")]
out = {"index": index}
for pipeline in ("bm25", "default"):
    a, b = retrieved(f"before-{pipeline}"), retrieved(f"after-{pipeline}")
    same = sum(x == y for x, y in zip(a, b))
    out[pipeline] = {"questions": len(a), "identical_top10": same}
    print(f"{pipeline}: {same} of {len(a)} questions retrieve the same top 10 in the same order")
json.dump(out, open(f"{out_dir}/exactness.json", "w"), indent=1)
PY
