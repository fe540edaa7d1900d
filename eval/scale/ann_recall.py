#!/usr/bin/env python3
"""Approximate search against the exact flat search rag uses: recall@10 of faiss IVF and HNSW
indexes against IndexFlatL2 on an index's stored vectors, with their build time, size and
single-threaded query latency, at full width and truncated (ESE) sizes.

    eval/scale/ann_recall.sh      (makes the venv, then runs this on index/default)
    python3 eval/scale/ann_recall.py --index index/default --depth 6 --dims 384,64 --out DIR

The queries are 1,000 of the index's own documents (a fixed sample), each searched for its 10
nearest other documents: the neighbourhoods a retriever ranks from. Flat search gives the
truth; recall@10 is the share of those 10 an approximate index returns.
"""
import argparse
import json
import time
from pathlib import Path

import faiss
import numpy as np

K = 10


def truncate(vectors, dim):
    """The first `dim` dimensions, unit length again (ESE's sizes)."""
    x = np.ascontiguousarray(vectors[:, :dim])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def neighbours(index, queries, ids):
    """Top K ids of each query other than itself, and the mean ms per query."""
    started = time.perf_counter()
    _, found = index.search(queries, K + 1)
    ms = 1000 * (time.perf_counter() - started) / len(queries)
    rows = [[j for j in row if j != own and j >= 0][:K] for row, own in zip(found, ids)]
    return rows, ms


def size_mb(index):
    return faiss.serialize_index(index).nbytes / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="index/default")
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--dims", default="384,64")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--out", default="eval/scale/results/ann")
    args = ap.parse_args()
    faiss.omp_set_num_threads(1)
    manifest = json.loads((Path(args.index) / "manifest.json").read_text())
    stored = manifest["stored_dim"]
    flat = faiss.read_index(str(Path(args.index) / "dense" / f"L{args.depth}-d{stored}.faiss"))
    vectors = flat.reconstruct_n(0, flat.ntotal)
    n = len(vectors)
    sample = np.random.default_rng(0).choice(n, size=min(args.queries, n), replace=False)
    rows = []
    for dim in [int(d) for d in args.dims.split(",")]:
        x = truncate(vectors, dim)
        q = np.ascontiguousarray(x[sample])
        exact = faiss.IndexFlatL2(dim)
        exact.add(x)
        truth, flat_ms = neighbours(exact, q, sample)
        rows.append({"dim": dim, "index": "Flat", "setting": "-", "recall_at_10": 1.0,
                     "query_ms": flat_ms, "build_s": 0.0, "size_mb": size_mb(exact)})
        # faiss wants about 39 training points per list; the usual 4-16 sqrt(n) is for millions.
        nlist = max(1, int(np.sqrt(n)))
        candidates = [(f"IVF{nlist},Flat", "nprobe", [1, 4, 16, 64]), ("HNSW32", "efSearch", [16, 64, 256])]
        for spec, knob, values in candidates:
            index = faiss.index_factory(dim, spec)
            started = time.perf_counter()
            index.train(x)
            index.add(x)
            build_s = time.perf_counter() - started
            for value in values:
                faiss.ParameterSpace().set_index_parameter(index, knob, value)
                found, ms = neighbours(index, q, sample)
                recall = np.mean([len(set(f) & set(t)) / K for f, t in zip(found, truth)])
                rows.append({"dim": dim, "index": spec, "setting": f"{knob}={value}",
                             "recall_at_10": float(recall), "query_ms": ms, "build_s": build_s,
                             "size_mb": size_mb(index)})
                print(f"d{dim} {spec} {knob}={value}: recall@10 {recall:.4f}, {ms:.3f} ms/query", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"index": args.index, "documents": n, "depth": args.depth, "queries": len(sample),
              "threads": 1, "faiss": faiss.__version__, "rows": rows}
    (out / "ann_recall.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Approximate vs flat search: {n} documents, depth {args.depth}, {len(sample)} queries, one thread",
             "", "| dims | index | setting | recall@10 vs flat | ms / query | build s | size MB |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['dim']} | {r['index']} | {r['setting']} | {r['recall_at_10']:.4f} | "
                     f"{r['query_ms']:.3f} | {r['build_s']:.1f} | {r['size_mb']:.1f} |")
    (out / "ann_recall.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out}/ann_recall.json and ann_recall.md ({len(rows)} rows)")


if __name__ == "__main__":
    main()
