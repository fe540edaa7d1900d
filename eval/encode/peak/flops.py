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

    peak = json.load(open(args.peak))
    kernels = {k["name"]: k for k in peak["kernels"]}
    # Two cores' peak as twice one core's best: the 2-thread trials on a shared machine seldom
    # both get a quiet slice at once (peak.json has those too).
    f32_peak = 2 * kernels["fma"]["threads_1"]["best"]  # GFLOP/s
    int8_peak = 2 * kernels["int8_maddubs_madd"]["threads_1"]["best"]  # GMAC/s
    int8_block_peak = 2 * kernels["int8_microkernel"]["threads_1"]["best"]  # GMAC/s, the encoder's block
    throughput = json.load(open(args.throughput))

    report = {"paragraphs": n, "tokens": sum(lengths), "padded_tokens": sum(padded),
              "mean_tokens": sum(lengths) / n, "hidden": hidden, "ffn": ffn, "batch_size": args.batch_size,
              "max_length": args.max_length, "f32_peak_gflops": f32_peak, "int8_peak_gmacs": int8_peak,
              "int8_block_peak_gmacs": int8_block_peak, "throughput_file": str(pathlib.Path(args.throughput).relative_to(ROOT)),
              "throughput_date": throughput.get("date"), "depths": {}}
    for depth in DEPTHS:
        gflop = {kind: {"projections": depth * p / n / 1e9, "attention": depth * a / n / 1e9}
                 for kind, (p, a) in layer.items()}
        for g in gflop.values():
            g["total"] = g["projections"] + g["attention"]
        real = gflop["real"]
        pps = throughput["median_paragraphs_per_s"][str(depth)]
        # Seconds per paragraph at peak: the projections at the int8 rate, attention in f32 (as `rag` runs it).
        int8_floor = real["projections"] / 2 / int8_peak + real["attention"] / f32_peak
        int8_block_floor = real["projections"] / 2 / int8_block_peak + real["attention"] / f32_peak
        rows = {}
        for side, kind in (("st", "padded"), ("ort", "padded"), ("rag-f32", "real")):
            rate = pps[side] * gflop[kind]["total"]
            rows[side] = {"paragraphs_per_s": pps[side], "gflops_useful": pps[side] * real["total"],
                          "gflops_executed": rate, "share_of_f32_peak_useful": pps[side] * real["total"] / f32_peak,
                          "share_of_f32_peak_executed": rate / f32_peak}
        for side in ("ort-int8", "rag-int8"):
            rows[side] = {"paragraphs_per_s": pps[side], "share_of_int8_peak": pps[side] * int8_floor,
                          "share_of_int8_block_peak": pps[side] * int8_block_floor}
        targets = {
            "f32_2x_st": {"paragraphs_per_s": 2 * pps["st"], "gflops": 2 * pps["st"] * real["total"],
                          "share_of_f32_peak": 2 * pps["st"] * real["total"] / f32_peak},
            "f32_1.6x_ort": {"paragraphs_per_s": 1.6 * pps["ort"], "gflops": 1.6 * pps["ort"] * real["total"],
                             "share_of_f32_peak": 1.6 * pps["ort"] * real["total"] / f32_peak},
            "int8_1.5x_ort_int8": {"paragraphs_per_s": 1.5 * pps["ort-int8"],
                                   "share_of_int8_peak": 1.5 * pps["ort-int8"] * int8_floor,
                                   "share_of_int8_block_peak": 1.5 * pps["ort-int8"] * int8_block_floor},
        }
        report["depths"][str(depth)] = {
            "gflop_per_paragraph": gflop, "measured": rows, "targets": targets,
            "paragraphs_per_s_at_f32_peak": f32_peak / real["total"],
            "paragraphs_per_s_at_int8_peak": 1 / int8_floor,
            "paragraphs_per_s_at_int8_block_peak": 1 / int8_block_floor}
    json.dump(report, open(OUT / "flops.json", "w"), indent=1)

    pct = lambda x: f"{100 * x:.0f}%"
    md = ["# The encoder's rate against this CPU's peak", "",
          f"{n} paragraphs as `eval/encode/throughput.sh {n}` feeds them ({report['tokens']} tokens, "
          f"{report['mean_tokens']:.1f} a paragraph; {report['padded_tokens']} padded in batches of {args.batch_size}). "
          f"Peaks from `peak.json` as twice one core's best: f32 {f32_peak:.1f} GFLOP/s, int8 {int8_peak:.1f} GMAC/s "
          f"(the encoder's int8 block in L1: {int8_block_peak:.1f}). Paragraphs/s from `{report['throughput_file']}` "
          f"({report['throughput_date']}).", "",
          "| layers | GFLOP a paragraph (projections + attention) | padded | f32 paragraphs/s at peak | int8 at peak | int8 at the block's peak |",
          "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for depth, d in report["depths"].items():
        r, p = d["gflop_per_paragraph"]["real"], d["gflop_per_paragraph"]["padded"]
        md.append(f"| {depth} | {r['total']:.3f} ({r['projections']:.3f} + {r['attention']:.3f}) | {p['total']:.3f} | "
                  f"{d['paragraphs_per_s_at_f32_peak']:.1f} | {d['paragraphs_per_s_at_int8_peak']:.1f} | "
                  f"{d['paragraphs_per_s_at_int8_block_peak']:.1f} |")
    md += ["", "| layers | side | paragraphs/s | GFLOP/s useful | share of f32 peak (useful / executed) |",
           "| ---: | --- | ---: | ---: | --- |"]
    for depth, d in report["depths"].items():
        for side in ("st", "ort", "rag-f32"):
            m = d["measured"][side]
            md.append(f"| {depth} | {side} | {m['paragraphs_per_s']:.1f} | {m['gflops_useful']:.1f} | "
                      f"{pct(m['share_of_f32_peak_useful'])} / {pct(m['share_of_f32_peak_executed'])} |")
        for side in ("ort-int8", "rag-int8"):
            m = d["measured"][side]
            md.append(f"| {depth} | {side} | {m['paragraphs_per_s']:.1f} | | {pct(m['share_of_int8_peak'])} of the int8 "
                      f"peak, {pct(m['share_of_int8_block_peak'])} of the block's |")
    md += ["", "| layers | target | paragraphs/s | needs |", "| ---: | --- | ---: | --- |"]
    for depth, d in report["depths"].items():
        t = d["targets"]
        md.append(f"| {depth} | f32 2.0x ST | {t['f32_2x_st']['paragraphs_per_s']:.1f} | {t['f32_2x_st']['gflops']:.1f} GFLOP/s, "
                  f"{pct(t['f32_2x_st']['share_of_f32_peak'])} of the f32 peak |")
        md.append(f"| {depth} | f32 1.6x ORT | {t['f32_1.6x_ort']['paragraphs_per_s']:.1f} | {t['f32_1.6x_ort']['gflops']:.1f} "
                  f"GFLOP/s, {pct(t['f32_1.6x_ort']['share_of_f32_peak'])} of the f32 peak |")
        i = t["int8_1.5x_ort_int8"]
        md.append(f"| {depth} | int8 1.5x ORT int8 | {i['paragraphs_per_s']:.1f} | {pct(i['share_of_int8_peak'])} of the int8 "
                  f"peak, {pct(i['share_of_int8_block_peak'])} of the encoder's int8 block's |")
    (OUT / "flops.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
