"""Write tests/fixtures/minilm_reference.json: reference embeddings of all-MiniLM-L6-v2
for a dozen mixed texts, from sentence-transformers (full model) and from the Hugging
Face model's hidden states at each depth 1..6 (mean- and CLS-pooled, L2-normalised).

    eval/.venv/bin/python eval/reference/make_fixtures.py
"""

import argparse
import json
import sys

import common

SHORT_TEXTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France?",
    "State-of-the-art WordPiece: BERT's tokenizer splits unaffable and HOTPOTQA into sub-words.",
    "In 1998, 3,000 people paid $12.50 each for 2.5 hours of music.",
    "Café naïve façade: Zürich, São Paulo, Ærøskøbing, Kraków; 東京 and Москва 🙂",
    "Wait... what?!? (yes) -- [no] {maybe}; e.g. U.S.A. & co. #1 @home 50% 'single' "
    "\"double\" a/b\\c ~tilde~ `tick` ^_^ <tag>",
    "  leading and trailing spaces,\ttabs\tand\nnew lines  ",
]
HOTPOT_FILE = common.REPO_ROOT.parent / "shared" / "data" / "hotpotqa" / "hotpot_dev_distractor_sample.json"
N_PARAGRAPHS = 4  # the first 3 paragraphs in file order plus the first one over LONG_TOKENS
LONG_TOKENS = 300


def hotpot_texts(path, tokenizer):
    texts = common.format_paragraphs(common.distinct_paragraphs([path]), "{title}: {text}")
    chosen = texts[: N_PARAGRAPHS - 1]
    counts = common.token_counts(tokenizer, texts, max_length=100_000)
    chosen.append(next(t for t, n in zip(texts, counts) if n > LONG_TOKENS))
    return chosen


def rounded(vectors):
    return [[round(float(x), 6) for x in v] for v in vectors]


def hf_pooled(model, tokenizer, texts, max_length):
    """{"mean": {L: [vec]}, "cls": {L: [vec]}} from hidden_states[L], one text at a time."""
    import torch
    import torch.nn.functional as F

    depths = range(1, model.config.num_hidden_layers + 1)
    pooled = {"mean": {d: [] for d in depths}, "cls": {d: [] for d in depths}}
    with torch.inference_mode():
        for text in texts:
            enc = tokenizer(text, truncation=True, max_length=max_length, return_tensors="pt")
            hidden = model(**enc, output_hidden_states=True).hidden_states
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden[0].dtype)
            for d in depths:
                mean = (hidden[d] * mask).sum(1) / mask.sum(1)
                pooled["mean"][d].append(F.normalize(mean, dim=-1)[0].numpy())
                pooled["cls"][d].append(F.normalize(hidden[d][:, 0], dim=-1)[0].numpy())
    return pooled


def min_cosine(a, b):
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return float(min((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(common.DEFAULT_MODEL))
    ap.add_argument("--hotpot", default=str(HOTPOT_FILE))
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(common.REPO_ROOT / "tests" / "fixtures" / "minilm_reference.json"))
    args = ap.parse_args()

    from transformers import AutoModel, AutoTokenizer

    common.set_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    hf_model = AutoModel.from_pretrained(args.model, local_files_only=True).eval()
    texts = SHORT_TEXTS + hotpot_texts(args.hotpot, tokenizer)

    st_model = common.load_sentence_transformer(args.model, args.max_length)
    st_full = st_model.encode(texts, normalize_embeddings=True, batch_size=len(texts))
    pooled = hf_pooled(hf_model, tokenizer, texts, args.max_length)
    ids = tokenizer(texts, truncation=True, max_length=args.max_length)["input_ids"]

    # Checks: ST == HF mean pooling at full depth, and ST with its encoder truncated to
    # L layers == HF mean pooling of hidden_states[L] (the truncation the other scripts use).
    ok = True
    depth = common.DepthSetter(st_model)
    full = depth.full_depth
    cos = min_cosine(st_full, pooled["mean"][full])
    print(f"sentence-transformers vs mean-pooled hidden_states[{full}]: min cosine {cos:.8f}")
    ok &= cos > 0.99999
    for d in range(1, full + 1):
        depth(d)
        cos = min_cosine(st_model.encode(texts, normalize_embeddings=True), pooled["mean"][d])
        print(f"sentence-transformers truncated to {d} layer(s) vs hidden_states[{d}]: min cosine {cos:.8f}")
        ok &= cos > 0.99999

    fixture = {
        "model": "all-MiniLM-L6-v2",
        "max_length": args.max_length,
        "texts": texts,
        "sentence_transformers": rounded(st_full),
        "mean": {str(d): rounded(v) for d, v in pooled["mean"].items()},
        "cls": {str(d): rounded(v) for d, v in pooled["cls"].items()},
        "token_counts": [len(x) for x in ids],
        "input_ids": ids,
        "versions": common.versions(),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}: {len(texts)} texts, token counts {fixture['token_counts']}")
    if not ok:
        sys.exit("make_fixtures: a consistency check failed (cosine <= 0.99999)")


if __name__ == "__main__":
    main()
