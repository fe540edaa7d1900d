#!/usr/bin/env python3
"""Tabulates eval/answers/: the fullwiki tuning runs (which chose every default), the
distractor runs that report them, and the side-by-side `ask` timing, into results.md.

usage: python3 eval/answers/report.py
"""
import json
from pathlib import Path

HERE = Path(__file__).parent


def runs(folder):
    for summary in sorted((HERE / folder).glob("*/summary.json")):
        yield summary.parent.name, json.loads(summary.read_text())


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}"


def strategy(config):
    t = config.get("tuning") or {}
    parts = [config["mode"]]
    if config["mode"] == "fusion":
        parts.append(f"w={t.get('fusion_weight')}")
    parts.append(f"{config.get('hops', 1)} hop")
    if config.get("hops", 1) > 1:
        parts.append(f"beam {t.get('hop_beam')}, hop w={t.get('hop_weight')}")
        if t.get("link_weight"):
            parts.append(f"link w={t['link_weight']}")
    return ", ".join(parts)


def retrieval_table(folder, title, out, only=lambda name: True):
    out.append(f"\n### {title}\n")
    out.append("| run | retrieval | layers/dim | n | R@2 | R@5 | R@10 | both@2 | both@5 | both@10 |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, s in runs(folder):
        if not only(name):
            continue
        for c in s["cells"]:
            r, b = c["recall"], c["all_supporting"]
            out.append(
                f"| {name} | {strategy(s['config'])} | {c['layers']}/{c['dim']} | {c['questions']} | "
                f"{pct(r['2'])} | {pct(r['5'])} | {pct(r['10'])} | {pct(b['2'])} | {pct(b['5'])} | {pct(b['10'])} |"
            )


def context_table(out):
    out.append("\n### Context budget (fullwiki tuning questions, default retrieval, no generation)\n")
    out.append("| run | context tokens | sentence weights (dense, lexical, rank, first, link) | gold answer in the context | median prompt tokens |")
    out.append("|---|---:|---|---:|---:|")
    rows = [(s["config"]["context_tokens"], name, s) for name, s in runs("tuning") if s["config"].get("context_only")]
    for budget, name, s in sorted(rows, key=lambda r: r[0]):
        c = s["cells"][0]
        label = budget if budget else "whole paragraphs"
        w = s["config"].get("sentence_weights")
        # Runs made before sentence links had none.
        weights = ", ".join(f"{w.get(k, 0):g}" for k in ("dense", "lexical", "rank", "first", "link")) if w else "-"
        out.append(f"| {name} | {label} | {weights} | {pct(c.get('answer_in_context'))} | {c.get('median_prompt_tokens') or 0:.0f} |")


def generated(name, summary):
    # A merged run (changed_contexts.py merge) records its sources, not a config: it is no
    # run of its own.
    cfg = summary.get("config")
    return cfg is not None and cfg.get("generator") is not None and not cfg.get("context_only")


def answers_table(folder, title, out):
    out.append(f"\n### {title}\n")
    out.append("| run | retrieval | context | yes/no bias | option bias | extractive | n | both@5 | R@5 | EM | F1 | answer in context | median prompt tokens | median answer ms |")
    out.append("|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, s in runs(folder):
        if not generated(name, s):
            continue
        cfg = s["config"]
        option_bias = "off" if cfg.get("option_bias") is None else f"{cfg['option_bias']:g}"
        for c in s["cells"]:
            context = f"{cfg.get('context_tokens')} tokens" if cfg.get("context_tokens") else "whole"
            link = (cfg.get("sentence_weights") or {}).get("link", 0)
            if cfg.get("context_tokens") and link:
                context += f", sentence links {link:g}"
            out.append(
                f"| {name} | {strategy(cfg)} | {context} | {cfg.get('yes_no_bias') or 0:g} | {option_bias} | {'on' if cfg.get('extractive') else 'off'} | {c['questions']} | {pct(c['all_supporting']['5'])} | "
                f"{pct(c['recall']['5'])} | {pct(c['exact_match'])} | {pct(c['f1'])} | {pct(c.get('answer_in_context'))} | "
                f"{c.get('median_prompt_tokens') or 0:.0f} | {c.get('median_answer_ms') or 0:.0f} |"
            )


BIASES = [  # (bias.json under tuning/, heading, what a decided answer is, its first side)
    ("yes-no-greedy/bias.json", "`--yes-no-bias` (the fullwiki questions answered yes or no)",
     "opened with yes or no", "yes"),
    ("options-0/bias.json", "`--option-bias` (the fullwiki \"..., A or B?\" questions)",
     "named one option", "the first option"),
    ("options-0-swapped/bias-both-orders.json",
     "`--option-bias`, margins averaged over both orders of the options",
     "named one option", "the first option"),
]


def bias(file, title, decided, first, out):
    path = HERE / "tuning" / file
    if not path.exists():
        return
    b = json.loads(path.read_text())
    out.append(f"\n### {title}\n")
    out.append(f"{b['decided']} of {b['questions']} answers {decided} ({b['right_first']} should be {first}, "
               f"{b['right_second']} the other). Right as greedy decoding answered: {b['greedy']}; best {b['best']}; "
               f"within one of the best from {b['range_within_one_of_best'][0]} to "
               f"{b['range_within_one_of_best'][1]}; chosen: **{b['chosen_bias']}** ({b['accuracy_at_chosen']} right).\n")
    shown = {k: v for k, v in b["accuracy"].items() if (2 * float(k)).is_integer()}  # every 0.5
    out.append("| bias | " + " | ".join(shown) + " |")
    out.append("|---|" + "---:|" * len(shown))
    out.append("| right | " + " | ".join(str(v) for v in shown.values()) + " |")


def timing(out):
    path = HERE / "timing" / "summary.json"
    if not path.exists():
        return
    t = json.loads(path.read_text())
    out.append("\n### `ask` side by side (warm servers, alternating, distractor questions)\n")
    out.append("| questions | today's median ms | new median ms | ratio | median per-question ratio | EM today | EM new | new prompt tokens (median) | of them evaluated |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    out.append(
        f"| {t['questions']} | {t['median_ms_old']:.0f} | {t['median_ms_new']:.0f} | {t['ratio_new_to_old']:.3f} | "
        f"{t['median_ratio_per_question']:.3f} | {t['em_old']:.1f} | {t['em_new']:.1f} | {t['median_prompt_tokens_new']:.0f} | "
        f"{t['median_evaluated_prompt_tokens_new']:.0f} |"
    )


def main():
    out = ["# eval/answers results (generated by report.py)"]
    out.append("\n## Chosen on the fullwiki questions (the 240 whose two supporting paragraphs are in the corpus)")
    retrieval_table("tuning", "Retrieval (full depth and size)", out,
                    lambda n: not n.startswith(("context-", "em-", "yes-no", "options", "rest-", "sentence-links-")))
    context_table(out)
    answers_table("tuning", "Answers (default 1.5B generator)", out)
    for args in BIASES:
        bias(*args, out)
    out.append("\n## Reported on the distractor questions (they chose nothing)")
    retrieval_table("runs", "Retrieval, all 1,186 questions", out, lambda n: n.startswith("retrieval-"))
    answers_table("runs", "Answers (default 1.5B generator)", out)
    timing(out)
    (HERE / "results.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
