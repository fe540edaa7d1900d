"""Training speed: `rag train` (Rust, candle) and an equivalent PyTorch training step,
side by side, one after the other (never concurrently: the machine has 2 cores), on the same
data and batch shape; reports seconds per step, examples (triplets) per second and the
Rust / PyTorch ratio (target: at least 0.7x).

    eval/training/train_speed.sh [--mode ese,raw] [--steps 20] [--rag-bin PATH] ...

PyTorch side: Hugging Face BertModel from the local checkpoint (no pooler head, as the Rust
encoder), train mode (dropout on), torch.set_num_threads(2), AdamW (lr 5e-5, torch's default
weight decay 0.01), linear warm-up (10%) and decay, gradient clipping at norm 1.0, as the Rust
loop does. Data: NLI triplets (premise, entailment, contradiction) from snli_dev + mnli_dev,
per premise the first entailment and the first contradiction hypothesis in file order
(premises lacking either skipped), as SimCSE's nli_for_simcse; shuffled with --seed. A batch
is 32 triplets = 96 sequences in angle_emb's row order (q0, p0, n0, q1, ...), padded to the
longest in the batch, at most --max-len tokens, one forward pass with all hidden states;
pooling is the checkpoint's (1_Pooling/config.json: mean for all-MiniLM-L6-v2). Loss: ESE
(eval/reference/ese_loss.py: AnglE on the last layer at full width and at the first k dims,
Align to the exact-SVD PCA target, and the weighted student layers 1..n-1), or `raw` (AnglE on
the last layer), or `mrl` (AnglE summed over dims 8, 16, ..., d). Each timed step covers
tokenisation, forward, loss, backward, clipping and the optimiser step; --warmup steps run
first, untimed.

Rust side: `RAG_BIN train --mode MODE --model MODEL --data nli --data-dir DATA --out TMP
--batch-size 32 --max-len 64 --max-steps N --seed 42 --no-eval --json`, whose stdout is a JSON
object with at least examples_per_second, steps and seconds (what it times is up to `rag`). If
the binary or its `train` subcommand is missing, only the PyTorch side is reported.

Writes eval/training/train_speed.json and train_speed.md (--out-dir) and prints the table.
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "eval" / "reference"))

DEFAULT_MODEL = REPO_ROOT / "data" / "models" / "all-MiniLM-L6-v2"
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
MODES = ("ese", "raw", "mrl")
RUST_DEFAULT_COMPRESSION = 128  # `rag train --compression-size` default


# ---- data -------------------------------------------------------------------------------

def nli_triplets(data_dir: Path, files=("snli_dev.csv", "mnli_dev.csv")):
    """[(premise, entailment, contradiction)] in order of each premise's first occurrence;
    the first entailment and first contradiction hypothesis of a premise are kept, premises
    lacking either are skipped (SimCSE's nli_for_simcse construction)."""
    by_premise = {}
    for name in files:
        path = data_dir / "nli" / name
        if not path.is_file():
            raise SystemExit(f"missing NLI file {path}")
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                hyps = by_premise.setdefault(row["premise"], {})
                hyps.setdefault(row["label"].strip(), row["hypothesis"])
    return [(p, h["entailment"], h["contradiction"]) for p, h in by_premise.items()
            if "entailment" in h and "contradiction" in h]


def batches(triplets, batch_size, count, seed):
    """`count` batches of `batch_size` triplets from the seeded shuffle (wrapping around)."""
    order = list(triplets)
    random.Random(seed).shuffle(order)
    needed = batch_size * count
    order = (order * math.ceil(needed / len(order)))[:needed]
    return [order[i:i + batch_size] for i in range(0, needed, batch_size)]


def interleaved_texts(batch):
    """Rows q0, p0, n0, q1, p1, n1, ...: the order angle_emb's collator feeds the model."""
    return [text for triplet in batch for text in triplet]


# ---- PyTorch side -----------------------------------------------------------------------

def checkpoint_pooling(model_dir: Path) -> str:
    """'mean' or 'cls', from the sentence-transformers pooling config (CLS if absent)."""
    config_path = model_dir / "1_Pooling" / "config.json"
    if not config_path.is_file():
        return "cls"
    config = json.loads(config_path.read_text())
    if config.get("pooling_mode_mean_tokens"):
        return "mean"
    if config.get("pooling_mode_cls_token"):
        return "cls"
    raise SystemExit(f"{config_path}: only mean or CLS pooling is supported")


def pool(hidden, mask, strategy):
    if strategy == "cls":
        return hidden[:, 0]
    mask = mask[:, :, None].to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1)


def make_loss(mode, compression_size):
    """loss(pooled_layers [X_1..X_n]) for the mode; rows interleaved q, p, n."""
    import ese_loss

    if mode == "ese":
        return lambda layers: ese_loss.ese_loss(layers, compression_size)
    if mode == "raw":
        return lambda layers: ese_loss.angle_loss_c(layers[-1])
    if mode == "mrl":
        return lambda layers: ese_loss.mrl_loss(layers[-1], ese_loss.mrl_dims(layers[-1].shape[-1]))
    raise SystemExit(f"unknown mode {mode!r} (one of {', '.join(MODES)})")


def torch_run(args, mode, all_batches):
    """Train `args.warmup` untimed + `args.steps` timed steps; returns the result record."""
    import torch
    import transformers
    from transformers import AutoTokenizer, BertModel

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(args.model))
    model = BertModel.from_pretrained(str(args.model), add_pooling_layer=False)
    model.train()  # dropout on
    pooling = checkpoint_pooling(args.model)
    n_layers = model.config.num_hidden_layers
    if mode == "ese" and not 0 < args.compression_size < model.config.hidden_size:
        raise SystemExit(f"--compression-size must be in 1..{model.config.hidden_size - 1}")
    loss_fn = make_loss(mode, args.compression_size)
    total_steps = args.warmup + args.steps
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    warm = max(1, int(0.1 * total_steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warm if s < warm
        else max(0.0, (total_steps - s) / max(1, total_steps - warm)))

    times, losses, padded, tokens = [], [], [], []
    phases = {name: 0.0 for name in ("tokenize", "forward", "loss", "backward", "optimizer")}
    for step, batch in enumerate(all_batches[:total_steps]):
        marks = [time.perf_counter()]
        enc = tokenizer(interleaved_texts(batch), padding="longest", truncation=True,
                        max_length=args.max_len, return_tensors="pt")
        marks.append(time.perf_counter())
        out = model(**enc, output_hidden_states=True)
        layers = [pool(out.hidden_states[i], enc["attention_mask"], pooling)
                  for i in range(1, n_layers + 1)]  # transformer layers 1..n
        marks.append(time.perf_counter())
        loss = loss_fn(layers)
        marks.append(time.perf_counter())
        loss.backward()
        marks.append(time.perf_counter())
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        marks.append(time.perf_counter())
        elapsed = marks[-1] - marks[0]
        if step >= args.warmup:
            times.append(elapsed)
            for name, a, b in zip(phases, marks, marks[1:]):
                phases[name] += b - a
            padded.append(int(enc["input_ids"].shape[1]))
            tokens.append(int(enc["attention_mask"].sum()))
        losses.append(float(loss.detach()))
        print(f"  pytorch {mode} step {step + 1}/{total_steps}: {elapsed:.2f} s, "
              f"loss {losses[-1]:.4f}{' (warm-up)' if step < args.warmup else ''}",
              file=sys.stderr, flush=True)
    seconds = sum(times)
    return {
        "framework": "pytorch", "mode": mode, "steps": len(times), "warmup_steps": args.warmup,
        "seconds": round(seconds, 3),
        "seconds_per_step": round(seconds / len(times), 4),
        "median_seconds_per_step": round(statistics.median(times), 4),
        "examples_per_second": round(len(times) * args.batch_size / seconds, 3),
        "phase_seconds_per_step": {k: round(v / len(times), 4) for k, v in phases.items()},
        "sequences_per_step": 3 * args.batch_size,
        "mean_padded_length": round(statistics.mean(padded), 2),
        "mean_real_tokens_per_step": round(statistics.mean(tokens), 1),
        "loss_first": round(losses[0], 5), "loss_last": round(losses[-1], 5),
        "pooling": pooling, "layers": n_layers,
        "compression_size": args.compression_size if mode == "ese" else None,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "threads": torch.get_num_threads(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


# ---- Rust side --------------------------------------------------------------------------

def default_rag_bin() -> Path:
    """$CARGO_TARGET_DIR/release/rag, else the first of <repo>/target, <repo>/../target
    that has one (the project's scripts default CARGO_TARGET_DIR to ./target; this machine
    builds into /work/target)."""
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "rag"
    for target in (REPO_ROOT / "target", REPO_ROOT.parent / "target"):
        if (target / "release" / "rag").is_file():
            return target / "release" / "rag"
    return REPO_ROOT / "target" / "release" / "rag"


def rust_unavailable(rag_bin: Path):
    """None if `rag train` can run, else the reason it cannot."""
    if not (rag_bin.is_file() and os.access(rag_bin, os.X_OK)):
        return (f"no rag binary at {rag_bin} (build with `cargo build --release`, set "
                f"CARGO_TARGET_DIR or pass --rag-bin)")
    probe = subprocess.run([str(rag_bin), "train", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{rag_bin} has no `train` subcommand yet ({probe.stderr.strip().splitlines()[0]})"
    return None


def rust_run(args, mode):
    """Run `rag train` once; returns its JSON summary (stdout) plus derived fields."""
    with tempfile.TemporaryDirectory(prefix="rag-train-speed-") as out_dir:
        cmd = [str(args.rag_bin), "train", "--mode", mode, "--model", str(args.model),
               "--data", "nli", "--data-dir", str(args.data_dir), "--out", out_dir,
               "--batch-size", str(args.batch_size), "--max-len", str(args.max_len),
               "--max-steps", str(args.steps), "--seed", str(args.seed), "--no-eval", "--json"]
        if mode == "ese" and args.compression_size != RUST_DEFAULT_COMPRESSION:
            cmd += ["--compression-size", str(args.compression_size)]
        print("  " + " ".join(cmd), file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise SystemExit(f"rag train failed (exit {proc.returncode})")
    try:
        report = json.loads(proc.stdout)
        eps, steps, seconds = (report[k] for k in ("examples_per_second", "steps", "seconds"))
    except (ValueError, KeyError) as err:
        raise SystemExit(f"rag train's output is not the expected JSON ({err}): "
                         f"{proc.stdout[:200]}")
    return {"framework": "rust", "mode": mode, "steps": steps, "seconds": seconds,
            "seconds_per_step": round(seconds / steps, 4) if steps else None,
            "examples_per_second": eps, "command": cmd, "rag_report": report}


# ---- report -----------------------------------------------------------------------------

def load_average():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def table(runs, ratios):
    rows = ["| framework | mode | steps | s/step | examples/s | ratio Rust/PyTorch |",
            "| --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        ratio = ratios.get(r["mode"]) if r["framework"] == "rust" else None
        rows.append(f"| {r['framework']} | {r['mode']} | {r['steps']} | "
                    f"{r['seconds_per_step']:.3f} | {r['examples_per_second']:.2f} | "
                    f"{f'{ratio:.2f}x' if ratio is not None else '-'} |")
    return "\n".join(rows)


def write_report(args, report):
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "train_speed.json").write_text(json.dumps(report, indent=1) + "\n")
    torch_runs = [r for r in report["runs"] if r["framework"] == "pytorch"]
    md = ["# Training speed, `rag train` vs PyTorch", "",
          f"{report['date']}, {report['machine']}; {args.batch_size} NLI triplets "
          f"({3 * args.batch_size} sequences) per step, max length {args.max_len}, "
          f"{args.threads} threads, AdamW lr {args.lr}, seed {args.seed}"
          + (f"; PyTorch: {args.warmup} untimed warm-up steps, then {args.steps} timed."
             if torch_runs else "."), "",
          table(report["runs"], report["ratios"]), ""]
    for r in torch_runs:
        split = ", ".join(f"{k} {v:.3f}" for k, v in r["phase_seconds_per_step"].items())
        md.append(f"PyTorch {r['mode']}: median {r['median_seconds_per_step']:.3f} s/step ({split}), mean "
                  f"padded length {r['mean_padded_length']}, {r['mean_real_tokens_per_step']} "
                  f"real tokens/step, loss {r['loss_first']} -> {r['loss_last']}, "
                  f"attention {r['attn_implementation']}, torch {r['versions']['torch']}.")
    if report.get("rust_skipped"):
        md.append(f"Rust side not run: {report['rust_skipped']}.")
    md.append(f"Load average (1/5/15 min) before: {report['load_before']}, after: "
              f"{report['load_after']}.")
    if report["load_before"] and report["load_before"][0] > 1.0:
        md.append(f"**Not a quiet machine**: the 1-minute load average was "
                  f"{report['load_before'][0]} on {os.cpu_count()} cores before the run, so other "
                  f"work shared the cores and these timings are inflated; re-run when idle.")
    (args.out_dir / "train_speed.md").write_text("\n".join(md) + "\n")
    return "\n".join(md)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="ese",
                        help=f"comma-separated modes, of {', '.join(MODES)} (default ese)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed PyTorch steps first")
    parser.add_argument("--batch-size", type=int, default=32, help="triplets per step")
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--clip", type=float, default=1.0, help="max grad norm (0: off)")
    parser.add_argument("--compression-size", type=int, default=RUST_DEFAULT_COMPRESSION)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rag-bin", type=Path, default=None,
                        help="the rag binary (default $CARGO_TARGET_DIR/release/rag)")
    parser.add_argument("--skip-rust", action="store_true")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "eval" / "training")
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    for m in args.modes:
        if m not in MODES:
            parser.error(f"unknown mode {m!r}")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    args.rag_bin = args.rag_bin or default_rag_bin()
    args.model, args.data_dir = args.model.resolve(), args.data_dir.resolve()
    if not (args.model / "config.json").is_file():
        parser.error(f"no model at {args.model}")
    return args


def main(argv=None):
    args = parse_args(argv)
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores",
              "load_before": load_average(),
              "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "runs": [], "ratios": {}}
    rust_skipped = "--skip-rust" if args.skip_rust else rust_unavailable(args.rag_bin)
    if rust_skipped:
        print(f"Rust side skipped: {rust_skipped}; reporting PyTorch only.", file=sys.stderr)
        report["rust_skipped"] = rust_skipped
    if not args.skip_torch:
        triplets = nli_triplets(args.data_dir)
        report["triplets_available"] = len(triplets)
        all_batches = batches(triplets, args.batch_size, args.warmup + args.steps, args.seed)
    for mode in args.modes:  # sequential: PyTorch, then Rust, per mode
        if not args.skip_torch:
            print(f"PyTorch, mode {mode} ...", file=sys.stderr, flush=True)
            report["runs"].append(torch_run(args, mode, all_batches))
        if not rust_skipped:
            print(f"rag train, mode {mode} ...", file=sys.stderr, flush=True)
            report["runs"].append(rust_run(args, mode))
    by = {(r["framework"], r["mode"]): r for r in report["runs"]}
    for mode in args.modes:
        if ("rust", mode) in by and ("pytorch", mode) in by:
            report["ratios"][mode] = round(by["rust", mode]["examples_per_second"]
                                           / by["pytorch", mode]["examples_per_second"], 3)
    report["load_after"] = load_average()
    print(write_report(args, report))


if __name__ == "__main__":
    main()
