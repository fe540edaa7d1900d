#!/usr/bin/env bash
# A cold `rag search` process (open + encode + query), two `rag` binaries on one index (issue 53's
# cold-search target: <= 5 s at 5.2M): before (main: the HNSW graph read whole into memory) and
# after (the graph memory-mapped, its per-node tables read in order). Per round, mode and binary
# (alternated): every file of the index evicted from the page cache (eval/scale/page_cache.py, as
# synthetic.py does: the model's files stay cached), one cold run, then one warm-cache run.
# Each run: wall s, peak RSS, file-system input blocks and major faults (/usr/bin/time) and the
# `--json` timings. Results (medians of ROUNDS): eval/scale/results/cold_search/<name>.{json,md}.
# MODES picks among default, dense, dense-ef512, fusion-two-hop and exact (the last two need a
# graph); peak RSS counts the pages of a mapped file a run touched as well as its own memory.
#   [MODEL=DIR] [MODES="default dense-ef512 fusion-two-hop exact"] eval/scale/cold_search.sh INDEX BEFORE_BIN AFTER_BIN NAME [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
index=$1 before=$2 after=$3 name=$4 rounds=${5:-3}
model=${MODEL:-data/models/all-MiniLM-L6-v2}
out=eval/scale/results/cold_search
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The harness's cold-search question (the first distractor question).
question="Between Harvey Pekar and Denise Levertov who was born earlier?"
declare -A modes=(
  [default]=""
  [dense]="--mode dense"
  [dense-ef512]="--mode dense --ef-search 512"
  [fusion-two-hop]="--mode fusion --hops 2"
  [exact]="--mode dense --ef-search 0"
)
evict() { python3 eval/scale/page_cache.py "$index"; }
run() { # binary which mode cache round -> one JSON line
  local bin=$1 which=$2 mode=$3 cache=$4 round=$5
  # shellcheck disable=SC2086
  nice /usr/bin/time -o "$work/time" -f "%e %M %I %F" "$bin" search "$question" --index "$index" \
    --model "$model" ${modes[$mode]} --json >"$work/search.json"
  read -r wall rss inblocks majflt <"$work/time"
  python3 - "$work/search.json" "$which" "$mode" "$cache" "$round" "$wall" "$rss" "$inblocks" "$majflt" <<'PY' >>"$work/runs.jsonl"
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"binary": sys.argv[2], "mode": sys.argv[3], "cache": sys.argv[4], "round": int(sys.argv[5]),
                  "wall_s": float(sys.argv[6]), "peak_rss_mib": round(int(sys.argv[7]) / 1024, 1),
                  "read_mib": round(int(sys.argv[8]) * 512 / 2**20, 1), "major_faults": int(sys.argv[9]),
                  "timings": r["timings"], "top": [h["id"] for h in r["hits"]]}))
PY
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$rounds"); do
  for mode in ${MODES:-default dense-ef512 fusion-two-hop exact}; do
    for which in before after; do
      bin=$before; [ "$which" = after ] && bin=$after
      evict
      run "$bin" "$which" "$mode" cold "$round"
      run "$bin" "$which" "$mode" warm "$round"
    done
  done
done
flags=$(grep -o -w -E 'avx2|fma|avx512f|avx512_vnni|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
python3 - "$work/runs.jsonl" "$out/$name" "$index" "$flags" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" "$before" "$after" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
base, index, flags, load0, load1, before, after = sys.argv[2:9]
modes = list(dict.fromkeys(r["mode"] for r in runs))
med = lambda xs: round(statistics.median(xs), 2)
summary = {}
for mode in modes:
    for cache in ("cold", "warm"):
        for which in ("before", "after"):
            rs = [r for r in runs if (r["mode"], r["cache"], r["binary"]) == (mode, cache, which)]
            summary[f"{mode} {cache} {which}"] = {
                "wall_s": med([r["wall_s"] for r in rs]), "peak_rss_mib": med([r["peak_rss_mib"] for r in rs]),
                "read_mib": med([r["read_mib"] for r in rs]), "major_faults": med([r["major_faults"] for r in rs]),
                "search_ms": med([r["timings"]["search_ms"] for r in rs]), "runs": len(rs)}
# Same answers from both binaries (the top ids of each mode).
same = {m: len({tuple(r["top"]) for r in runs if r["mode"] == m}) == 1 for m in modes}
res = {"index": index, "before": before, "after": after, "cpu_flags": flags.strip(),
       "load_average_before": load0, "load_average_after": load1, "same_top_hits": same,
       "summary": summary, "runs": runs}
json.dump(res, open(base + ".json", "w"), indent=1)
lines = [f"# Cold `rag search`: {index}", "",
         f"before `{before}`, after `{after}`; CPU flags {flags.strip()}; load average {load0} before, {load1} after",
         "(a shared 2-core machine: times are inflated by other sessions' work; cold numbers are",
         "dominated by disk reads, which the load slows less). Medians of the rounds; read MiB is",
         "file-system input (/usr/bin/time %I: read(2) and page faults that went to the disk).", "",
         "| mode | cache | before wall s | after wall s | before read MiB | after read MiB | before peak MiB | after peak MiB | before search ms | after search ms |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for mode in modes:
    for cache in ("cold", "warm"):
        b, a = summary[f"{mode} {cache} before"], summary[f"{mode} {cache} after"]
        lines.append(f"| {mode} | {cache} | {b['wall_s']} | {a['wall_s']} | {b['read_mib']} | {a['read_mib']} | {b['peak_rss_mib']} | {a['peak_rss_mib']} | {b['search_ms']} | {a['search_ms']} |")
lines += ["", f"Same top hits from both binaries in every run: {same}"]
open(base + ".md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
