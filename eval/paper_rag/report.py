#!/usr/bin/env python3
"""Table 3 of the ESE paper, on this project's runs: exact match (with a 95% bootstrap interval)
and Recall@5 per model x depth x size, F1, the paper's numbers beneath, retrieval per cell, and a
paired test of each ESE model against each baseline at each cell (exact McNemar on the
questions one answers right and the other wrong, and a paired bootstrap interval of the EM
difference; for the retrieval-only runs the same on Recall@5 and both@5), and where each EM
difference comes from (the questions split by whose retrieval holds more supporting paragraphs).
Also the learning rate of each -paper model chosen on the fullwiki questions (the `tuning` runs),
and those chosen models beside the rest.

    python3 eval/paper_rag/report.py [--runs eval/paper_rag/runs] [--out eval/paper_rag/results.md]
    python3 eval/paper_rag/report.py --chosen   # prints the chosen -paper models (for run.sh)

Reads runs/<model>-<setting>/predictions.jsonl as `rag eval` writes them (eval/paper_rag/run.sh);
a missing or unfinished run shows as such, so the report can be made at any point.
"""
import argparse
import json
import math
import random
import re
import sys
from pathlib import Path

MODELS = ["untrained", "raw", "mrl", "2dmse", "ese", "ese-sw1", "raw-paper", "mrl-paper", "2dmse-paper",
          "ese-paper"]
# Each ESE model against the baselines trained alike: with the teacher terms (ese, and ese-sw1
# without the ESE-only shallow weight), and without them; ese against ese-sw1, what the shallow
# weight does; and each trained model against the untrained base model, what its training buys.
BASELINES = ("raw", "mrl", "2dmse")
PAIRS = ([(e, b) for e in ("ese", "ese-sw1") for b in BASELINES] + [("ese", "ese-sw1")]
         + [("ese-paper", f"{b}-paper") for b in BASELINES]
         + [(m, "untrained") for m in MODELS if m != "untrained"])
# The models trained without a teacher at the shared learning rate, whose rate the `tuning` runs
# (on the fullwiki questions) choose: runs <model>-tuning and <model>-lr<RATE>-tuning.
TUNED = [m for m in MODELS if m.endswith("-paper")]
SETTINGS = {
    "retrieval": "the paper's dense retrieval without the generator (in before the answers)",
    "dense": "dense retrieval, the top 5 paragraphs whole (the paper's setting)",
    "default": "rag's ask pipeline: fusion, two hops, 200 context tokens",
}
# Settings measured without a generator: recall only.
RETRIEVAL_ONLY = {"retrieval"}
CELLS = [(6, 384), (6, 64), (3, 384), (3, 64)]
# The paper's Table 3 (bge-base, LLaMA2-7B, HotpotQA EM), full depth: full size and 64 dims.
PAPER = {"raw": {(6, 384): 45.06, (6, 64): 29.86}, "mrl": {(6, 384): 45.09, (6, 64): 30.48},
         "ese": {(6, 384): 45.31, (6, 64): 32.28}}
RESAMPLES = 2000
HEAD = "| model | " + " | ".join(f"{l} layers / {d} dims" for l, d in CELLS) + " |"
RULE = "| --- |" + " ---: |" * len(CELLS)
RECALL_TITLE = "Retrieval: R@1 / R@2 / R@5 / R@10, both@5"


def load(run_dir):
    """{cell: {question id: prediction}} of a run, or None when it has not started."""
    path = run_dir / "predictions.jsonl"
    if not path.exists():
        return None
    cells = {}
    for line in path.read_text().splitlines():
        p = json.loads(line)
        cell = (p["cell"]["layers"], p["cell"]["dim"])
        cells.setdefault(cell, {})[p["id"]] = p
    return cells


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def bootstrap(values):
    """95% percentile interval of the mean of `values` (0/1 or real) over resampled questions.
    Seeded per call, so that an interval depends on its own values only, not on which other
    cells the report holds at the time."""
    rng = random.Random(0)
    n = len(values)
    means = sorted(mean([values[rng.randrange(n)] for _ in range(n)]) for _ in range(RESAMPLES))
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def mcnemar(b, c):
    """Exact two-sided McNemar p: the discordant pairs as a fair coin's b + c tosses."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def em_values(cell):
    return [1.0 if p["em"] else 0.0 for p in cell.values() if p.get("em") is not None]


def recall(cell, k):
    return mean([p["retrieval"]["recall"][str(k)] for p in cell.values()])


def both(cell, k):
    return mean([1.0 if p["retrieval"]["all_supporting"][str(k)] else 0.0 for p in cell.values()])


def unfinished(questions, limit):
    """` (n/N)` for fewer than `limit` questions measured, else nothing."""
    return "" if len(questions) >= limit else f" ({len(questions)}/{limit})"


def table(title, data, show, missing=None, setting=None):
    """A model x cell table of `show(cell)` (a cell: its predictions by question id), `-` where a
    run has no such cell yet; those are added to `missing` if given."""
    out = [f"### {title}", "", HEAD, RULE]
    for m in data:
        row = []
        for c in CELLS:
            cell = (data[m] or {}).get(c)
            if cell:
                row.append(show(cell))
            else:
                row.append("-")
                if missing is not None:
                    missing.append(f"{m}-{setting} {c[0]}/{c[1]}")
        out.append(f"| {m} | " + " | ".join(row) + " |")
    return out


def with_interval(values):
    """The mean of `values` (0/1 or real) in percent with its bootstrap interval, or `-`."""
    if not values:
        return "-"
    lo, hi = bootstrap(values)
    return f"{100 * mean(values):.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def show_recall(cell):
    return " / ".join(f"{recall(cell, k):.3f}" for k in (1, 2, 5, 10)) + f", {100 * both(cell, 5):.1f}%"


def pair_rows(data, pairs, title, value, show, note=None):
    """A table of each (ESE model, baseline) of `pairs` at each cell: `show(x, y, shared)` of the
    two cells' predictions by question id and the questions where `value` (a prediction's
    number, None if not measured) is measured in both, `-` where there are none."""
    out = [f"### {title}", ""] + ([note, ""] if note else []) + [
        "| pair | " + " | ".join(f"{l}/{d}" for l, d in CELLS) + " |", "| --- |" + " ---: |" * len(CELLS)]
    for e, b in pairs:
        row = []
        for c in CELLS:
            x, y = (data[e] or {}).get(c) or {}, (data[b] or {}).get(c) or {}
            shared = [q for q in sorted(set(x) & set(y))
                      if value(x[q]) is not None and value(y[q]) is not None]
            row.append(show(x, y, shared) if shared else "-")
        out.append(f"| {e} - {b} | " + " | ".join(row) + " |")
    return out


def pair_table(data, pairs, what, value, hit, limit):
    """Each pair's first model against its second at each cell, on the questions both have measured
    (`(n/N)` when fewer than `limit`): the mean paired difference of `value` with a bootstrap
    interval, and McNemar's exact p on the questions where `hit` holds for one only."""
    def show(x, y, shared):
        diffs = [float(value(x[q])) - float(value(y[q])) for q in shared]
        lo, hi = bootstrap(diffs)
        wins = sum(1 for q in shared if hit(x[q]) and not hit(y[q]))
        losses = sum(1 for q in shared if hit(y[q]) and not hit(x[q]))
        p = mcnemar(wins, losses)
        return (f"{100 * mean(diffs):+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}], "
                + ("p<0.001" if p < 0.001 else f"p={p:.3f}") + unfinished(shared, limit))
    return pair_rows(data, pairs, "Each pair (ESE against each baseline, each model against the untrained "
                     f"one): {what}", value, show)


def split_by_retrieval(data, pairs):
    """Where each EM difference comes from: the questions both answered, split by whose top five
    hold more supporting paragraphs (the first model's, as many, the second's), each group as
    `n: the first's right answers - the second's`. A retrieval gain that reaches the answers shows
    in the first group; the generator's spread on equal contexts in the second."""
    def show(x, y, shared):
        groups = [[0, 0, 0] for _ in range(3)]
        for q in shared:
            gap = x[q]["retrieval"]["recall"]["5"] - y[q]["retrieval"]["recall"]["5"]
            g = groups[0 if gap > 0 else 1 if gap == 0 else 2]
            g[0] += 1
            g[1] += x[q]["em"]
            g[2] += y[q]["em"]
        return " / ".join(f"{n}: {r}-{s}" for n, r, s in groups)
    return pair_rows(data, pairs, "Where the EM differences come from", lambda p: p.get("em"), show,
                     "Questions split by whose top five hold more supporting paragraphs: the first model's "
                     "/ as many / the second's; each group `n: first right - second right`.")


def same_retrieval(retrieval, dense):
    """Checks that the dense runs read what the retrieval-only runs retrieved, question by question."""
    checked, differ = 0, []
    for m in retrieval:
        for c, cell in (retrieval[m] or {}).items():
            answered = (dense[m] or {}).get(c, {})
            for q, p in cell.items():
                if q in answered:
                    checked += 1
                    if answered[q]["retrieved"] != p["retrieved"]:
                        differ.append(f"{m} {c[0]}/{c[1]} {q}")
    if differ:
        return (f"**The dense runs retrieved differently** for {len(differ)} of {checked} answers "
                "(one model, cell and question each): " + ", ".join(differ[:10]))
    return (f"The dense runs retrieved exactly these paragraphs for all {checked} answers (one "
            "model, cell and question each) they have given so far.")


def tuning_runs(runs):
    """{-paper model: [(candidate model, its tuning cells, its questions)]}: the runs
    <model>-tuning (the shared learning rate) and <model>-lr<RATE>-tuning."""
    found = {}
    dirs = sorted(d for d in runs.iterdir() if d.is_dir()) if runs.is_dir() else []
    for m in TUNED:
        pattern = re.compile(rf"{re.escape(m)}(-lr[^-].*)?-tuning")
        for d in dirs:
            if pattern.fullmatch(d.name):
                found.setdefault(m, []).append((d.name[:-len("-tuning")], *tuning_run(d)))
    return found


def tuning_run(d):
    """(cells, questions) of the `tuning` run in directory d."""
    return load(d), json.loads((d / "config.json").read_text())["questions"]


def tuning_score(cells, questions):
    """Mean Recall@5 over the grid's cells, or None until every cell has every question."""
    if not cells or any(len(cells.get(c, {})) < questions for c in CELLS):
        return None
    return mean([recall(cells[c], 5) for c in CELLS])


def chosen(found):
    """{-paper model: its candidate with the best mean Recall@5 on the tuning questions} for the
    models whose every candidate is finished (ties: the first by name)."""
    best = {}
    for m, candidates in found.items():
        scores = [(tuning_score(cells, n), name) for name, cells, n in candidates]
        if all(score is not None for score, _ in scores):
            best[m] = max(scores, key=lambda s: s[0])[1]
    return best


def tuning_table(found, best, reference):
    """The candidates' table; `reference` (name, cells, questions) is a row that is no candidate
    (the untrained model: what training adds), or None."""
    out = ["## tuning: the -paper group's learning rate, chosen on the fullwiki questions", "",
           "Recall@5 of dense retrieval on the fullwiki questions whose supporting paragraphs are in the "
           "corpus (`eval/answers/tuning_questions.py`); the mean over the grid chooses: **bold**, the best "
           "of the candidates run so far.", "",
           "| candidate | " + " | ".join(f"{l}/{d}" for l, d in CELLS) + " | mean |",
           "| --- |" + " ---: |" * (len(CELLS) + 1)]

    def row(name, cells, n, mark=""):
        score = tuning_score(cells, n)
        values = [f"{recall(cells[c], 5):.3f}{unfinished(cells[c], n)}" if cells and c in cells else "-"
                  for c in CELLS]
        return (f"| {mark}{name}{mark} | " + " | ".join(values) + " | "
                + (f"{mark}{score:.3f}{mark}" if score is not None else "-") + " |")

    if reference:
        out.append(row(*reference))
    for m, candidates in found.items():
        for name, cells, n in candidates:
            out.append(row(name, cells, n, "**" if best.get(m) == name else ""))
    return out + [""]


def tuning_reference(runs):
    """The untrained model's `tuning` run as (row name, cells, questions), or None."""
    d = runs / "untrained-tuning"
    if not (d / "config.json").exists():
        return None
    return ("untrained (reference, no candidate)", *tuning_run(d))


def lineup(best):
    """The models and pairs of the report: MODELS and PAIRS, and once every -paper model's
    learning rate is chosen, the chosen ones that differ from the shared rate's with their pairs."""
    if set(best) != set(TUNED):
        return MODELS, PAIRS
    extra = [best[m] for m in TUNED if best[m] != m]
    # PAIRS' own -paper pairs, each model at its chosen rate: one list of pairs to keep.
    pairs = [(best.get(e, e), best.get(b, b)) for e, b in PAIRS if e in best]
    return MODELS + extra, PAIRS + [p for p in pairs if p not in PAIRS]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="eval/paper_rag/runs")
    ap.add_argument("--out", default="eval/paper_rag/results.md")
    ap.add_argument("--limit", type=int, default=300, help="questions a finished run answers")
    ap.add_argument("--chosen", action="store_true",
                    help="print the -paper models at their chosen learning rates and write nothing")
    args = ap.parse_args()
    runs = Path(args.runs)
    found = tuning_runs(runs)
    best = chosen(found)
    if args.chosen:
        if set(best) != set(TUNED):
            sys.exit("report.py --chosen: no finished tuning runs for "
                     + ", ".join(m for m in TUNED if m not in best) + f" under {runs}/")
        print(" ".join(best[m] for m in TUNED))
        return
    models, pairs = lineup(best)
    out = ["# The ESE paper's RAG experiment (Table 3), measured", "",
           f"Made by `python3 eval/paper_rag/report.py` from `{runs}/`; the runs by "
           "`eval/paper_rag/run.sh`. First "
           f"{args.limit} distractor questions, default generator. Cells: EM [95% bootstrap "
           "interval] and Recall@5; `-` not run yet, `(n/N)` unfinished.", ""]
    missing = []
    runs_of = {s: {m: load(runs / f"{m}-{s}") for m in models} for s in SETTINGS}
    for setting, what in SETTINGS.items():
        data = runs_of[setting]
        out += [f"## {setting}: {what}", ""]
        if setting in RETRIEVAL_ONLY:
            out += table(RECALL_TITLE, data, show_recall, missing, setting)
            out += [""] + pair_table(
                data, pairs, "Recall@5 difference [paired 95% bootstrap], exact McNemar p on both@5",
                lambda p: p["retrieval"]["recall"]["5"], lambda p: p["retrieval"]["all_supporting"]["5"],
                args.limit)
            out += ["", same_retrieval(data, runs_of["dense"]), ""]
            continue

        out += table("Exact match (Recall@5)", data, lambda cell: with_interval(em_values(cell))
                     + f" ({recall(cell, 5):.3f})" + unfinished(cell, args.limit), missing, setting)
        if setting == "dense":
            for m, cells in PAPER.items():
                out.append(f"| paper: {m.upper()} (bge-base 12 layers / 768 and 64 dims, LLaMA2-7B) | "
                           + " | ".join(f"{cells[c]:.2f}" if c in cells else "" for c in CELLS) + " |")
        out += [""] + table("F1 [95% bootstrap interval]", data, lambda cell: with_interval(
            [p["f1"] for p in cell.values() if p.get("f1") is not None]) + unfinished(cell, args.limit))
        out += [""] + table(RECALL_TITLE, data, show_recall)
        out += [""] + pair_table(data, pairs, "EM difference [paired 95% bootstrap], exact McNemar p",
                                 lambda p: p.get("em"), lambda p: p["em"], args.limit)
        out += [""] + split_by_retrieval(data, pairs)
        # A heatmap of an unfinished run is marked as its cells are, by its fewest questions.
        maps = ", ".join(f"[{m}](runs/{m}-{setting}/heatmap.png)"
                         + unfinished(min(data[m].values(), key=len), args.limit) for m in models
                         if data[m] and (runs / f"{m}-{setting}" / "heatmap.png").exists())
        out += ["", f"Heatmaps (Recall@5 and EM over layers x dims), one per model: {maps or 'none yet'}", ""]
    out += tuning_table(found, best, tuning_reference(runs)) if found else []
    if missing:
        out += ["## Not measured yet", "", ", ".join(missing), ""]
    Path(args.out).write_text("\n".join(out))
    print(f"wrote {args.out} ({len(missing)} cells not measured yet)")


if __name__ == "__main__":
    main()
