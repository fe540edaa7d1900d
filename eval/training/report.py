#!/usr/bin/env python3
"""Issue 4: gathers what eval/issue4_train.sh, issue4_sts.sh, issue4_hotpot.sh and
issue4_train_speed.sh wrote under eval/issue4/ into one report, eval/issue4/README.md, with every target
of the issue next to the measured value. Reads only; run it after the scripts.

    python3 eval/issue4_report.py
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "eval" / "issue4"
UNTRAINED_STS = ROOT / "eval" / "sts" / "all-MiniLM-L6-v2-pca" / "summary.json"
UNTRAINED_HOTPOT = ROOT / "eval" / "issue2" / "rag_recall.json"
MODELS = ["ese-nli", "ese-sw2-nli", "raw-nli", "mrl-nli", "2dmse-nli", "pooler64-nli", "pooler32-nli",
          "ese-nli-pairs"]
# The HotpotQA recipe experiments of eval/issue4_train.sh, with what each one changes.
EXPERIMENTS = {
    "ese-pairs-c64": "NLI + the corpus pairs of `--pairs-from-corpus` (both files, 17,688 pairs), k = 64",
    "ese-pairs-c64-lr3e4": "the same, learning rate 3e-4",
    "ese-pairs-c64-sw5": "the same as ese-pairs-c64, `--shallow-weight 5`",
    "ese-titled-c64": "NLI + corpus pairs whose positive carries the title (as `--pairs-from-corpus` now makes them), k = 64",
    "ese-titled-c64-sw5-600": "titled pairs, `--shallow-weight 5`, 600 steps (three times as many)",
    "ese-titled-c64-distill": "titled pairs, `--shallow-weight 5`, `--distill-weight 2` (the base model's full-depth similarities distilled into every trained layer), 300 steps",
    "ese-titled-c64-distill10": "the same, `--distill-weight 10`",
    "ese-titled-c64-embed": "ese-titled-c64-distill plus `--embedding-distill-weight 20` (the base model's full-depth embeddings distilled into every trained layer, full width)",
    "ese-titled-c64-embed-500": "the same, 500 steps at learning rate 1e-4",
    "ese-titled-c64-embed-600": "the same, 600 steps at learning rate 2e-4",
}


def load(path):
    """The JSON at `path`, or None while it is missing or still being written."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def sts_cell(summary, layer, dim, method="truncate", dataset="STS-B"):
    for cell in summary["cells"]:
        if (cell["layer"], cell["dim"], cell["method"]) == (layer, dim, method):
            return cell["per_dataset"].get(dataset) if dataset else cell["average"]
    return None


def shallow(summary, dim, method="truncate", dataset="STS-B"):
    for row in summary.get("shallow", []):
        if (row["dim"], row["method"]) == (dim, method):
            return row["per_dataset"].get(dataset) if dataset else row["average"]
    return None


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def hotpot_recall(summary, layers, dim):
    for cell in summary["cells"]:
        if (cell["layers"], cell["dim"]) == (layers, dim):
            return cell["recall"]["5"]
    return None


def main():
    sts = {name: load(OUT / "sts" / name / "summary.json") for name in MODELS}
    sts["raw-nli-pca"] = load(OUT / "sts" / "raw-nli-pca" / "summary.json")
    sts["untrained"] = load(UNTRAINED_STS)
    train = {name: load(OUT / f"train-{name}.json") for name in MODELS}
    hotpot = {name: load(OUT / f"hotpot-{name}.json") for name in MODELS}
    hotpot["untrained"] = load(UNTRAINED_HOTPOT)
    speed = load(OUT / "train_speed.json")
    lines = ["# Issue 4: `rag train` measurements", "",
             "All models start from the default all-MiniLM-L6-v2 and train one epoch on the NLI",
             "triplets (8,094 SNLI + MultiNLI dev premises; 252 steps of 32), seed 42, lr 5e-5, max",
             "length 64, mean pooling, on 2 cores. Scripts: `eval/issue4_train.sh` (training),",
             "`eval/issue4_sts.sh` (STS), `eval/issue4_hotpot.sh` (HotpotQA), `eval/issue4_train_speed.sh`.",
             "Re-generate this page with `python3 eval/issue4_report.py`.", ""]

    ese_sts, sw2, raw_sts, mrl = (sts.get(n) for n in ["ese-nli", "ese-sw2-nli", "raw-nli", "mrl-nli"])
    best = load(OUT / "hotpot-ese-titled-c64-embed-600.json")
    if all([ese_sts, sw2, raw_sts, mrl, best, hotpot.get("raw-nli"), hotpot.get("ese-nli")]):
        gap = lambda model, other, dim: shallow(model, dim) - shallow(other, dim)
        lines += ["## The issue's targets", "",
                  "| target | measured |", "| --- | --- |",
                  f"| shallow STS-B (< Avg) at 384 / 64, ESE >= 5 above RAW and MRL | ese-sw2-nli: "
                  f"+{gap(sw2, raw_sts, 384):.2f} / +{gap(sw2, raw_sts, 64):.2f} over RAW, "
                  f"+{gap(sw2, mrl, 384):.2f} / +{gap(sw2, mrl, 64):.2f} over MRL; paper weighting "
                  f"(ese-nli): +{gap(ese_sts, mrl, 384):.2f} / +{gap(ese_sts, mrl, 64):.2f} over MRL |",
                  f"| last layer: within 0.5 of RAW at 384, above RAW at 64 | ese-sw2-nli "
                  f"{sts_cell(sw2, 6, 384):.2f} vs {sts_cell(raw_sts, 6, 384):.2f}; "
                  f"{sts_cell(sw2, 6, 64):.2f} vs {sts_cell(raw_sts, 6, 64):.2f} |",
                  f"| HotpotQA R@5 at 3 layers / 64 dims >= 0.30 and above RAW; 6 / 384 within 2 points of "
                  f"0.686 | ese-titled-c64-embed-600 (NLI + corpus pairs): {hotpot_recall(best, 3, 64):.3f} "
                  f"(raw-nli {hotpot_recall(hotpot['raw-nli'], 3, 64):.3f}), full depth "
                  f"{hotpot_recall(best, 6, 384):.3f}; NLI only (ese-nli): "
                  f"{hotpot_recall(hotpot['ese-nli'], 3, 64):.3f} |", ""]

    lines += ["## STS-B test Spearman x100, shallow layers (< Avg = mean of layers 1-5)", "",
              "| model | < Avg @384 | < Avg @64 | layer 6 @384 | layer 6 @64 | layer 6 @32 |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name in ["untrained"] + MODELS:
        s = sts.get(name)
        if not s:
            continue
        width = s["hidden_size"]
        lines.append(f"| {name} | {fmt(shallow(s, width))} | {fmt(shallow(s, 64))} | "
                     f"{fmt(sts_cell(s, 6, width))} | {fmt(sts_cell(s, 6, 64))} | {fmt(sts_cell(s, 6, 32))} |")
    lines += ["", "ese-nli is the paper's weighting; ese-sw2-nli the same run with `--shallow-weight 2` (the",
              "shallow layers' terms doubled). The pooler models output 64 or 32 dimensions: their @384",
              "cells show that whole output, and pooler64-nli's @32 cells the first 32 of its 64."]
    lines.append("")

    lines += ["## Small sizes, last layer: ESE truncation vs post-hoc PCA of RAW vs the pooler", "",
              "STS-B and the mean over all 7 STS sets. PCA is fitted on the evaluated sentences",
              "themselves (its best case).", "",
              "| size | ESE (first k) | ESE sw2 (first k) | RAW (first k) | RAW + PCA | pooler-k | ESE avg7 | ESE sw2 avg7 | RAW+PCA avg7 | pooler-k avg7 |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    ese, ese_sw2, raw, pca = (sts.get(n) for n in ["ese-nli", "ese-sw2-nli", "raw-nli", "raw-nli-pca"])
    for k in (64, 32):
        # A pooler trained to output exactly k dimensions, read at its full output.
        pooler = sts.get(f"pooler{k}-nli")
        pooler_b = sts_cell(pooler, 6, k) if pooler else None
        pooler_a = sts_cell(pooler, 6, k, dataset=None) if pooler else None
        lines.append(
            f"| {k} | {fmt(ese and sts_cell(ese, 6, k))} | {fmt(ese_sw2 and sts_cell(ese_sw2, 6, k))} | "
            f"{fmt(raw and sts_cell(raw, 6, k))} | "
            f"{fmt(pca and sts_cell(pca, 6, k, 'pca'))} | {fmt(pooler_b)} | "
            f"{fmt(ese and sts_cell(ese, 6, k, dataset=None))} | "
            f"{fmt(ese_sw2 and sts_cell(ese_sw2, 6, k, dataset=None))} | "
            f"{fmt(pca and sts_cell(pca, 6, k, 'pca', dataset=None))} | {fmt(pooler_a)} |")
    lines.append("")

    lines += ["## HotpotQA dense Recall@5 (19k paragraphs, 1,186 distractor questions)", "",
              "| model | 3 layers / 64 dims | 3 / 384 | 6 / 64 | 6 layers / 384 dims |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for name in ["untrained"] + MODELS:
        h = hotpot.get(name)
        if h:
            lines.append(f"| {name} | " + " | ".join(
                fmt(hotpot_recall(h, l, d), 3) for l, d in [(3, 64), (3, 384), (6, 64), (6, 384)]) + " |")
    lines.append("")

    experiments = {name: load(OUT / f"hotpot-{name}.json") for name in EXPERIMENTS}
    if any(experiments.values()):
        lines += ["## HotpotQA recipe experiments (ESE, 200 steps unless said, `eval/issue4_train.sh NAME`)", "",
                  "Cells left `-` were not indexed at that depth.", "",
                  "| recipe | what changes | 3 layers / 64 dims | 3 / 384 | 6 / 64 | 6 layers / 384 dims |",
                  "| --- | --- | ---: | ---: | ---: | ---: |"]
        for name, what in EXPERIMENTS.items():
            h = experiments[name]
            if h:
                lines.append(f"| {name} | {what} | " + " | ".join(
                    fmt(hotpot_recall(h, l, d), 3) for l, d in [(3, 64), (3, 384), (6, 64), (6, 384)]) + " |")
        lines += ["", "Without a teacher, every in-domain recipe lifts the 3-layer cells a little and costs the",
                  "full-depth ones: the untrained MiniLM's last layer is already a question-to-passage retriever,",
                  "and training it on title/first-sentence pairs pulls it towards another task. Distilling the",
                  "base model's full-depth similarities (`--distill-weight`) helps a little (0.208 at 3 / 64) but",
                  "does not hold full depth (0.610-0.624). Distilling its embeddings themselves",
                  "(`--embedding-distill-weight 20`, 1 - cosine at full width on every trained layer) does both:",
                  "full depth stays at 0.680-0.688 (untrained 0.686) and 6 / 64 rises above the untrained model,",
                  "while the shallow layers learn to compute what the last one computes. The 3-layer cells grow",
                  "with the training budget: 0.216 / 0.342 after 300 steps at 5e-5, 0.266 / 0.376 after 500 at",
                  "1e-4, and 0.313 / 0.419 after 600 at 2e-4 (ese-titled-c64-embed-600), which meets the",
                  "issue's 0.30 at 3 layers / 64 dims with full depth within 0.6 points of the untrained model."]
        lines.append("")

    lines += ["## Training time (one epoch, 252 steps)", "",
              "| model | seconds | s/step | examples/s | final loss |", "| --- | ---: | ---: | ---: | ---: |"]
    for name in MODELS:
        t = train.get(name)
        if t:
            lines.append(f"| {name} | {t['seconds']:.0f} | {t['seconds_per_step']:.2f} | "
                         f"{t['examples_per_second']:.1f} | {t['final_loss']:.3f} |")
    lines.append("")
    if speed:
        lines += ["## Side by side with PyTorch (eval/issue4_train_speed.sh)", "",
                  (OUT / "train_speed.md").read_text().split("\n", 2)[-1].strip(), ""]
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
