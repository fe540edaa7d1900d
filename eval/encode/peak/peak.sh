#!/usr/bin/env bash
# The peak AVX2 rates of this CPU (f32 FMA, the int8 vpmaddubsw/vpmaddwd idiom and its variants,
# the GEMM micro-kernel shapes in L1) and its clock, 1 and 2 threads, best and median of TRIALS
# trials of TRIAL_MS each, all kernels alternating (eval/encode/peak/peak.c). The machine is
# shared: the best trial is the quiet slice, the median what load left.
#   [TAG=] eval/encode/peak/peak.sh [TRIALS=200] [TRIAL_MS=20]
# Writes eval/encode/peak/peak[-TAG].{json,md} (TAG keeps another CPU's run beside the first one's,
# a first-generation Zen's).
set -euo pipefail
cd "$(dirname "$0")/../../.."
TRIALS=${1:-200}
TRIAL_MS=${2:-20}
DIR=eval/encode/peak
BIN=$(mktemp -d)/peak
trap 'rm -rf "$(dirname "$BIN")"' EXIT
# clang where present: the micro-kernels are intrinsics, and LLVM (rustc's back end) keeps the int8
# block's accumulators in registers where gcc 12 spills them (18.4 against 14.8 GMAC/s on one
# core); the chains are inline assembly, the same under either.
CC=${CC:-$(command -v clang || echo gcc)}
"$CC" -O2 -mavx2 -mfma -pthread -Wall -Wextra -Werror "$DIR/peak.c" -o "$BIN"
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
nice "$BIN" "$TRIALS" "$TRIAL_MS" > "$DIR/peak.raw.json"
LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
python3 - "$DIR" "$LOAD_BEFORE" "$LOAD_AFTER" "$CC" "peak${TAG:+-$TAG}" <<'PY'
import datetime, json, subprocess, sys
out, load_before, load_after, cc, name = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
raw = json.load(open(f"{out}/peak.raw.json"))
cpuinfo = open("/proc/cpuinfo").read().splitlines()
field = lambda name: next((l.split(":", 1)[1].strip() for l in cpuinfo if l.startswith(name)), "?")
flags = sorted(f for f in field("flags").split() if f in ("avx", "avx2", "fma", "f16c", "avx_vnni") or f.startswith(("avx512", "amx")))
k = {x["name"]: x for x in raw["kernels"]}
best = lambda name, t: k[name][f"threads_{t}"]["best"]
median = lambda name: k[name]["threads_1"]["median"]
# The host's clock moves: most trials run at one clock (the median's), some at a boost (the
# best's), a few are cut by other jobs. Rates per cycle are the medians' ratio (alternating
# trials, so load and clock weigh on both alike); the peaks are those per-cycle rates at the
# median clock and at the best, on two cores (the 2-thread trials seldom get both cores quiet).
clock, boost = median("clock_add_chain"), best("clock_add_chain", 1)
per_cycle = {"f32_flop": median("fma") / clock, "int8_mac": median("int8_maddubs_madd") / clock}
report = {
    "date": datetime.datetime.utcnow().isoformat(timespec="minutes") + "Z",
    "cpu": f"{field('model name')} (family {field('cpu family')}, model {field('model')}, stepping {field('stepping')})",
    "cpu_flags": flags, "compiler": subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0],
    "load_average_before": load_before, "load_average_after": load_after, **raw,
    "derived": {
        "clock_ghz_median": clock, "clock_ghz_best": boost,
        "per_core_per_cycle": per_cycle,
        "two_cores_at_median_clock": {"f32_gflops": 2 * per_cycle["f32_flop"] * clock, "int8_gmacs": 2 * per_cycle["int8_mac"] * clock},
        "two_cores_at_best_clock": {"f32_gflops": 2 * per_cycle["f32_flop"] * boost, "int8_gmacs": 2 * per_cycle["int8_mac"] * boost},
        "two_threads_best": {"f32_gflops": best("fma", 2), "int8_gmacs": best("int8_maddubs_madd", 2)},
    },
}
json.dump(report, open(f"{out}/{name}.json", "w"), indent=1)
d = report["derived"]
rows = [f"| {x['name']} | {x['unit']} | {x['threads_1']['best']:.2f} | {x['threads_1']['median']:.2f} | "
        f"{x['threads_2']['best']:.2f} | {x['threads_2']['median']:.2f} | {x['what']} |" for x in raw["kernels"]]
md = ["# Peak AVX2 rates of this CPU", "",
      f"{report['cpu']}, flags {' '.join(flags)}; {report['compiler']}, -O2 -mavx2 -mfma; {raw['trials']} trials of "
      f"{raw['trial_ms']:g} ms per kernel and thread count, all alternating; load average {load_before:.1f} before, "
      f"{load_after:.1f} after (a shared machine: the best trial is the quiet slice). Rates over all threads together; "
      f"clock rows per thread count, so 2 threads' clock is the sum of both cores'.", "",
      "| kernel | unit | 1 thread best | 1 thread median | 2 threads best | 2 threads median | what |",
      "| --- | --- | ---: | ---: | ---: | ---: | --- |", *rows, "",
      f"Clock {d['clock_ghz_median']:.2f} GHz in the median trial, {d['clock_ghz_best']:.2f} in the best (the host's "
      f"boost; the TSC runs at {raw['tsc_ghz']:.2f}). Per cycle and core (medians' ratio): "
      f"{d['per_core_per_cycle']['f32_flop']:.1f} f32 FLOP ({d['per_core_per_cycle']['f32_flop'] / 16:.1f} 256-bit FMAs) and {d['per_core_per_cycle']['int8_mac']:.1f} "
      f"int8 multiply-adds. Two cores at {d['clock_ghz_median']:.2f} / {d['clock_ghz_best']:.2f} GHz: f32 "
      f"{d['two_cores_at_median_clock']['f32_gflops']:.1f} / {d['two_cores_at_best_clock']['f32_gflops']:.1f} GFLOP/s, int8 "
      f"{d['two_cores_at_median_clock']['int8_gmacs']:.1f} / {d['two_cores_at_best_clock']['int8_gmacs']:.1f} GMAC/s (the "
      f"2-thread trials reached {d['two_threads_best']['f32_gflops']:.1f} GFLOP/s at best: they measure the other jobs' load)."]
open(f"{out}/{name}.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
rm -f "$DIR/peak.raw.json"
