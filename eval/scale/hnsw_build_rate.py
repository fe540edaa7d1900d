#!/usr/bin/env python3
"""How fast faiss builds an HNSW graph on this machine (issue 53: the 5.2M graph's build time):
HNSW32 (efConstruction 40, as `rag index --ann hnsw:32` builds it) over N random unit vectors of
64 dims, one thread, microseconds per vector; with the CPU flags and load beside it.

    eval/.venv/bin/python eval/scale/hnsw_build_rate.py [N] > eval/scale/results/hnsw_build_rate.json

Random Gaussian vectors are a hard case for a graph (no low-dimensional structure); the
synthetic 5.2M rows are drawn from a Gaussian fitted to the real ones, so they are close to it.
"""
import json
import os
import sys
import time

import faiss
import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
faiss.omp_set_num_threads(1)
x = np.random.default_rng(0).standard_normal((n, 64)).astype("float32")
x /= np.linalg.norm(x, axis=1, keepdims=True)
index = faiss.IndexHNSWFlat(64, 32)
index.hnsw.efConstruction = 40
load_before = os.getloadavg()
started = time.time()
index.add(x)
seconds = time.time() - started
flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0].split()
print(json.dumps({
    "vectors": n, "dims": 64, "M": 32, "efConstruction": 40, "threads": 1,
    "seconds": round(seconds, 1), "us_per_vector": round(seconds / n * 1e6, 1),
    "faiss": faiss.__version__, "cpu_flags": [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "amx_tile") if f in flags],
    "load_average_before": load_before, "load_average_after": os.getloadavg(),
}, indent=1))
