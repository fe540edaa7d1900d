"""The encoder's projections through OpenBLAS (numpy's bundled build) on this CPU: the yardstick
for rag's packed GEMM. One batch of `--rows` tokens (6,878: the batch `profile.sh` times) through
MiniLM-L6's four projections per layer (QKV 384 -> 1152, attention output 384 -> 384, feed-forward
384 -> 1536 -> 384), `--threads` threads, best and median of `--rounds` rounds of all six layers.
The bias, GELU and residual that rag fuses into its GEMM are left out here, so OpenBLAS does less.

    OPENBLAS_NUM_THREADS=2 eval/.venv/bin/python eval/encode/blas_gemm.py [--rows 6878] [--rounds 9]

Prints JSON (GFLOP/s per shape and for the batch) with the CPU's flags and numpy's BLAS.
"""
import argparse, json, os, statistics, time

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, default=6878)
parser.add_argument("--rounds", type=int, default=9)
parser.add_argument("--layers", type=int, default=6)
args = parser.parse_args()
import numpy as np  # after argparse, so --help needs no numpy

SHAPES = {"qkv": (384, 1152), "attention_output": (384, 384), "intermediate": (384, 1536), "output": (1536, 384)}
rng = np.random.default_rng(0)
inputs = {k: rng.standard_normal((args.rows, i), dtype=np.float32) for k, (i, _) in SHAPES.items()}
weights = {k: rng.standard_normal((i, o), dtype=np.float32) for k, (i, o) in SHAPES.items()}
outs = {k: np.empty((args.rows, o), dtype=np.float32) for k, (_, o) in SHAPES.items()}
flops = {k: 2.0 * args.rows * i * o for k, (i, o) in SHAPES.items()}
for k in SHAPES:  # warm-up
    np.matmul(inputs[k], weights[k], out=outs[k])
times = {k: [] for k in SHAPES}
batch = []
for _ in range(args.rounds):
    started = time.perf_counter()
    for _ in range(args.layers):
        for k in SHAPES:
            t = time.perf_counter()
            np.matmul(inputs[k], weights[k], out=outs[k])
            times[k].append(time.perf_counter() - t)
    batch.append(time.perf_counter() - started)
total = args.layers * sum(flops.values())
config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":", 1)[1].split()
print(json.dumps({
    "rows": args.rows, "layers": args.layers, "rounds": args.rounds,
    "threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
    "blas": f"{config.get('name')} {config.get('version')} ({config.get('openblas configuration', '').strip()})",
    "cpu_flags": sorted(f for f in flags if f in ("avx2", "fma") or f.startswith(("avx512", "amx", "avx_vnni"))),
    "batch_gflop": round(total / 1e9, 2),
    "batch_seconds": {"best": min(batch), "median": statistics.median(batch)},
    "batch_gflops": {"best": round(total / min(batch) / 1e9, 1), "median": round(total / statistics.median(batch) / 1e9, 1)},
    "per_shape_gflops_median": {k: round(flops[k] / statistics.median(v) / 1e9, 1) for k, v in times.items()},
}, indent=1))
