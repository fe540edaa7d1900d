"""FLOPs per paragraph of the encoder on the texts eval/encode/throughput.sh times, and the rates
the measured throughputs come to as shares of this CPU's peak (eval/encode/peak/peak.json).

Counted: the four projections of each layer (QKV, attention output, FFN up and down: 2 x tokens x
in x out each) and attention's two products (Q.K^T and scores.V: 2 x 2 x tokens^2 x hidden per
sequence); embeddings, layer norms, softmax, GELU and pooling are left out (a few percent of the
operations, none of them multiply-adds). "real" counts each paragraph's own tokens, as `rag`
computes; "padded" counts what a padded batch computes, as sentence-transformers and ONNX Runtime
run them: batches of 64 texts taken longest first by characters, each padded to its longest.

    eval/.venv/bin/python eval/encode/peak/flops.py [--limit 500] [--throughput eval/encode/throughput.json]
Writes eval/encode/peak/flops.{json,md}.
"""
import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "eval" / "reference"))
import common  # noqa: E402

OUT = ROOT / "eval" / "encode" / "peak"
DEPTHS = (6, 3)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared/data/hotpotqa/hotpot_dev_distractor_sample.json"))
    ap.add_argument("--limit", type=int, default=500, help="paragraphs, as eval/encode/throughput.sh LIMIT")
    ap.add_argument("--template", default="{title}: {text}")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--model", default=str(common.DEFAULT_MODEL))
    ap.add_argument("--throughput", default=str(ROOT / "eval/encode/throughput.json"))
    ap.add_argument("--peak", default=str(OUT / "peak.json"))
    ap.add_argument("--profile", default=str(ROOT / "eval/encode/profile-avx2-after.json"),
                    help="an f32 profile.sh result: its GEMM share of the time splits rag f32's")
    return ap.parse_args()


def per_layer(lengths, hidden, ffn):
    """(projection FLOPs, attention FLOPs) of one layer over sequences of these lengths."""
    projection_macs_per_token = hidden * (3 * hidden + hidden + 2 * ffn)
    tokens = sum(lengths)
    return 2 * tokens * projection_macs_per_token, sum(2 * 2 * n * n * hidden for n in lengths)


def main():
    args = parse_args()
    from transformers import AutoTokenizer

    config = json.load(open(pathlib.Path(args.model) / "config.json"))
    hidden, ffn = config["hidden_size"], config["intermediate_size"]
    texts = common.format_paragraphs(common.distinct_paragraphs([args.corpus], args.limit), args.template)
    lengths = common.token_counts(AutoTokenizer.from_pretrained(args.model), texts, args.max_length)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    padded = []
    for start in range(0, len(order), args.batch_size):
        batch = [lengths[i] for i in order[start:start + args.batch_size]]
        padded += [max(batch)] * len(batch)
    n = len(texts)
    layer = {"real": per_layer(lengths, hidden, ffn), "padded": per_layer(padded, hidden, ffn)}

    # `rag bench encode` encodes the first batch once, untimed, at the deepest depth it times.
    warm_up = per_layer(lengths[:args.batch_size], hidden, ffn)
    peaks = machine_peaks(json.load(open(args.peak)), sorted(OUT.glob("achieved/clock-*.json")))
    throughput = json.load(open(args.throughput))
    report = {"paragraphs": n, "tokens": sum(lengths), "padded_tokens": sum(padded),
              "mean_tokens": sum(lengths) / n, "hidden": hidden, "ffn": ffn, "batch_size": args.batch_size,
              "max_length": args.max_length, "peaks": peaks,
              "throughput_file": str(pathlib.Path(args.throughput).resolve().relative_to(ROOT)),
              "throughput_date": throughput.get("date"), "depths": {}}
    for depth in DEPTHS:
        gflop = {kind: {"projections": depth * p / n / 1e9, "attention": depth * a / n / 1e9}
                 for kind, (p, a) in layer.items()}
        for g in gflop.values():
            g["total"] = g["projections"] + g["attention"]
        real = gflop["real"]
        pps = throughput["median_paragraphs_per_s"][str(depth)]
        at = {}
        for clock, pk in peaks.items():
            # Seconds a paragraph at peak: f32 all at the FMA rate; int8's projections at the int8
            # rate (multiply-adds), its attention in f32, as `rag` runs them.
            f32_s = real["total"] / pk["f32_gflops"]
            int8_s = real["projections"] / 2 / pk["int8_gmacs"] + real["attention"] / pk["f32_gflops"]
            at[clock] = {
                "paragraphs_per_s_at_f32_peak": 1 / f32_s, "paragraphs_per_s_at_int8_peak": 1 / int8_s,
                "share_of_f32_peak": {side: pps[side] * f32_s for side in ("st", "ort", "rag-f32")},
                "share_of_f32_peak_executed": {side: pps[side] * gflop["padded"]["total"] / pk["f32_gflops"]
                                               for side in ("st", "ort")},
                "share_of_int8_peak": {side: pps[side] * int8_s for side in ("ort-int8", "rag-int8")},
                "targets": {"f32 2.0x ST": 2 * pps["st"] * f32_s, "f32 1.6x ORT": 1.6 * pps["ort"] * f32_s,
                            "int8 1.5x ORT int8": 1.5 * pps["ort-int8"] * int8_s},
            }
        report["depths"][str(depth)] = {
            "gflop_per_paragraph": gflop, "warm_up_batch_gflop": depth * sum(warm_up) / 1e9,
            "paragraphs_per_s": pps, "gflops_useful": {side: pps[side] * real["total"] for side in ("st", "ort", "rag-f32")},
            "targets_paragraphs_per_s": {"f32 2.0x ST": 2 * pps["st"], "f32 1.6x ORT": 1.6 * pps["ort"],
                                         "int8 1.5x ORT int8": 1.5 * pps["ort-int8"]},
            "at_peak": at}
    report["ceilings"] = ceilings(report, json.load(open(args.profile)), args.profile)
    json.dump(report, open(OUT / "flops.json", "w"), indent=1)
    write_markdown(report)


def ceilings(report, profile, profile_path):
    """rag f32 at depth 6 with faster GEMMs: its measured time a paragraph split by the profile's
    GEMM share; the GEMMs (projections) then at a share of the sustained peak, the rest as
    measured or halved."""
    d = report["depths"]["6"]
    gemm_share = next(op["share"] for op in profile["ops"] if op["op"] == "gemm")
    pps, st = d["paragraphs_per_s"]["rag-f32"], d["paragraphs_per_s"]["st"]
    peak = report["peaks"]["sustained"]["f32_gflops"]
    projections = d["gflop_per_paragraph"]["real"]["projections"]
    gemm_s, rest_s = gemm_share / pps, (1 - gemm_share) / pps
    out = {"profile": str(pathlib.Path(profile_path).resolve().relative_to(ROOT)), "gemm_share": gemm_share,
           "gemm_share_of_peak_now": projections / gemm_s / peak, "cases": []}
    for gemm_eff, rest_factor in ((0.95, 1.0), (0.99, 0.5)):
        rate = 1 / (projections / (gemm_eff * peak) + rest_s * rest_factor)
        out["cases"].append({"gemm_share_of_peak": gemm_eff, "rest_factor": rest_factor,
                             "paragraphs_per_s": rate, "over_st": rate / st})
    return out


def machine_peaks(peak, clock_probes):
    """Two cores' peaks at peak.sh's median clock ("sustained") and at the highest clock any
    probe saw ("boost", achieved.sh's probes included), from peak.sh's per-cycle rates."""
    d = peak["derived"]
    best = lambda kernels: next(k for k in kernels if k["name"] == "clock_add_chain")["threads_1"]["best"]
    boost = max([d["clock_ghz_best"]] + [best(json.load(open(p))["kernels"]) for p in clock_probes])
    per_cycle = d["per_core_per_cycle"]
    return {name: {"clock_ghz": ghz, "f32_gflops": 2 * per_cycle["f32_flop"] * ghz,
                   "int8_gmacs": 2 * per_cycle["int8_mac"] * ghz, "per_core_per_cycle": per_cycle}
            for name, ghz in (("sustained", d["clock_ghz_median"]), ("boost", boost))}


def write_markdown(report):
    pct = lambda x: f"{100 * x:.0f}%"
    pk = report["peaks"]
    clocks = " / ".join(f"{p['clock_ghz']:.2f}" for p in pk.values())
    both = lambda f: " / ".join(f(name) for name in pk)
    md = ["# The encoder's rate against this CPU's peak", "",
          f"{report['paragraphs']} paragraphs as `eval/encode/throughput.sh {report['paragraphs']}` feeds them "
          f"({report['tokens']} tokens, {report['mean_tokens']:.1f} a paragraph; {report['padded_tokens']} padded in "
          f"batches of {report['batch_size']} as sentence-transformers and ONNX Runtime run them). Two cores' peaks from "
          f"`peak.json`: {pk['sustained']['per_core_per_cycle']['f32_flop']:.1f} f32 FLOP and "
          f"{pk['sustained']['per_core_per_cycle']['int8_mac']:.1f} int8 multiply-adds a cycle and core, at {clocks} GHz "
          f"(peak.sh's median trial / the highest any probe saw): f32 {both(lambda n: format(pk[n]['f32_gflops'], '.1f'))} GFLOP/s, "
          f"int8 {both(lambda n: format(pk[n]['int8_gmacs'], '.1f'))} GMAC/s. Paragraphs/s: medians from "
          f"`{report['throughput_file']}` ({report['throughput_date']}).", "",
          f"| layers | GFLOP a paragraph (projections + attention) | padded | paragraphs/s at the f32 peak ({clocks} GHz) | at the int8 peak |",
          "| ---: | --- | ---: | ---: | ---: |"]
    for depth, d in report["depths"].items():
        r, p, a = d["gflop_per_paragraph"]["real"], d["gflop_per_paragraph"]["padded"], d["at_peak"]
        md.append(f"| {depth} | {r['total']:.3f} ({r['projections']:.3f} + {r['attention']:.3f}) | {p['total']:.3f} | "
                  f"{both(lambda n: format(a[n]['paragraphs_per_s_at_f32_peak'], '.1f'))} | "
                  f"{both(lambda n: format(a[n]['paragraphs_per_s_at_int8_peak'], '.1f'))} |")
    md += ["", f"| layers | side | paragraphs/s | GFLOP/s (real tokens) | share of the peak ({clocks} GHz) |",
           "| ---: | --- | ---: | ---: | --- |"]
    for depth, d in report["depths"].items():
        a = d["at_peak"]
        for side in ("st", "ort", "rag-f32"):
            executed = (f"; padded: {both(lambda n: pct(a[n]['share_of_f32_peak_executed'][side]))}"
                        if side in a["sustained"]["share_of_f32_peak_executed"] else "")
            md.append(f"| {depth} | {side} | {d['paragraphs_per_s'][side]:.1f} | {d['gflops_useful'][side]:.1f} | "
                      f"{both(lambda n: pct(a[n]['share_of_f32_peak'][side]))} of f32{executed} |")
        for side in ("ort-int8", "rag-int8"):
            md.append(f"| {depth} | {side} | {d['paragraphs_per_s'][side]:.1f} | | "
                      f"{both(lambda n: pct(a[n]['share_of_int8_peak'][side]))} of int8 |")
    md += ["", f"| layers | target | paragraphs/s | needs (share of the peak at {clocks} GHz) |", "| ---: | --- | ---: | --- |"]
    for depth, d in report["depths"].items():
        for target, rate in d["targets_paragraphs_per_s"].items():
            kind = "int8" if target.startswith("int8") else "f32"
            md.append(f"| {depth} | {target} | {rate:.1f} | "
                      f"{both(lambda n: pct(d['at_peak'][n]['targets'][target]))} of {kind} |")
    c = report["ceilings"]
    md += ["", f"rag f32 at depth 6 with the time split as in `{c['profile']}` (GEMMs {pct(c['gemm_share'])} of it): "
           f"its GEMMs now run at {pct(c['gemm_share_of_peak_now'])} of the peak at {pk['sustained']['clock_ghz']:.2f} GHz. "
           + "; ".join(f"GEMMs at {pct(x['gemm_share_of_peak'])} and the rest {'as now' if x['rest_factor'] == 1 else 'halved'}: "
                       f"{x['paragraphs_per_s']:.1f} paragraphs/s, {x['over_st']:.2f}x ST" for x in c["cases"]) + "."]
    (OUT / "flops.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
