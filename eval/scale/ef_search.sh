#!/usr/bin/env bash
# HNSW recall@10 against flat and warm /search latency by efSearch on an index with a graph
# (issue 53: recall@10 >= 0.98 at p50 <= 10 ms), and exact search (efSearch 0) on the same
# index, from one server: eval/scale/results/ef_search/{verify-efN.txt,serve.json} (OUT=DIR for
# another index's results).
#   [OUT=DIR] eval/scale/ef_search.sh INDEX [EF...]     (default EF: 64 128 256)
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
index=$1; shift
efs=("$@")
[ ${#efs[@]} -gt 0 ] || efs=(64 128 256)
out=${OUT:-eval/scale/results/ef_search}
mkdir -p "$out"
modes=()
for ef in "${efs[@]}"; do
  # 1,000 stored vectors as queries, each one's flat top 10 against the graph's.
  [ -s "$out/verify-ef$ef.txt" ] || nice "$RAG" index --verify --index "$index" --ef-search "$ef" > "$out/verify-ef$ef.txt"
  grep recall "$out/verify-ef$ef.txt"
  modes+=(--mode "hnsw-ef$ef={\"mode\":\"dense\",\"ef_search\":$ef}")
done
nice python3 eval/scale/serve_probe.py --rag "$RAG" --index "$index" --out "$out/serve.json" \
  "${modes[@]}" --mode 'exact={"mode":"dense","ef_search":0}' > /dev/null
python3 - "$out" "${efs[@]}" <<'PY'
import json, re, sys
out, efs = sys.argv[1], sys.argv[2:]
serve = json.load(open(f"{out}/serve.json"))
rows = ["| efSearch | recall@10 vs flat | index search p50 / p99 ms | /search wall p50 / p99 ms |", "| ---: | ---: | ---: | ---: |"]
for ef in efs:
    text = open(f"{out}/verify-ef{ef}.txt").read()
    recall = re.search(r"recall@10 against flat (\S+)", text).group(1)
    m = serve["modes"][f"hnsw-ef{ef}"]
    rows.append(f"| {ef} | {recall} | {m['search_p50_ms']} / {m['search_p99_ms']} | {m['p50_ms']} / {m['p99_ms']} |")
m = serve["modes"]["exact"]
rows.append(f"| 0 (exact) | 1 | {m['search_p50_ms']} / {m['search_p99_ms']} | {m['p50_ms']} / {m['p99_ms']} |")
rows.append("")
rows.append(f"CPU flags {serve['cpu_flags']}, {serve['cpus']} cores, load average {serve['load_average_before']} before, "
            f"{serve['load_average_after']} after; serve RSS {serve['memory_end_mib']} MiB at the end.")
open(f"{out}/result.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
