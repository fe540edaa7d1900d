"""Writes the sharding benchmark's table (eval/scale/bench.sh) from its result files."""

import json
import os
import sys

out = sys.argv[1]


def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


single_time = load("single-time.json")
single = load("single-build.json")
print(f"# Sharded builds, {out.rsplit('/', 1)[-1]}\n")
print(f"{single['documents']} paragraphs, layers {single['layers']}.\n")
print("| build | wall s | shards: node, s, peak MB | retries |")
print("| --- | --- | --- | --- |")
print(f"| single, local | {single_time['seconds']:.1f} | one process, {single_time['peak_rss_mb']:.0f} MB | - |")
for n in (1, 2, 4):
    build = load(f"sharded-{n}-build.json")
    shards = "; ".join(
        f"{s['shard']}: {s['node']}, {s['seconds']:.1f}, {s['peak_rss_mb']:.0f}" for s in build["shards"]
    )
    print(f"| {n} shard(s), rag-ray | {build['seconds']:.1f} | {shards} | {build['retries']} |")

print("\n| index | mode | p50 ms | p99 ms | Recall@5 |")
print("| --- | --- | --- | --- | --- |")
for index in ("single", "sharded-4"):
    query = load(f"{index}-query.json")
    recall = {
        "dense": load(f"{index}-eval-dense.json")["cells"][0]["recall"]["5"],
        "bm25": load(f"{index}-eval-bm25.json")["cells"][0]["recall"]["5"],
    }
    for row in query["latencies"]:
        r = recall.get(row["mode"])
        print(
            f"| {index} | {row['mode']} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{'' if r is None else f'{r:.4f}'} |"
        )
ray_eval = load("ray-sharded-4-eval-dense.json")
print(
    f"\nrag-ray eval of the 4 shards (dense, one hop): Recall@5 "
    f"{ray_eval['rag']['cells'][0]['recall']['5']:.4f} in {ray_eval['seconds']:.1f} s."
)
