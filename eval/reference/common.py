"""Shared helpers for the Python reference scripts (HotpotQA reading, model loading,
layer truncation). Models are loaded from local paths only: the Hugging Face hub is
switched off before transformers / sentence-transformers are imported."""

import json
import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = REPO_ROOT / "data" / "models" / "all-MiniLM-L6-v2"
DEFAULT_TEMPLATE = "{title}: {text}"


def read_hotpot(path):
    """A HotpotQA file: a JSON array of records with "context" and "supporting_facts"."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def distinct_paragraphs(paths, limit=None):
    """[(title, text)] of the distinct paragraphs (by title, first occurrence wins) in
    the files in order; text is the sentences concatenated as-is."""
    seen, paragraphs = set(), []
    for path in paths:
        for record in read_hotpot(path):
            for title, sentences in record["context"]:
                if title in seen:
                    continue
                seen.add(title)
                paragraphs.append((title, "".join(sentences)))
                if limit is not None and len(paragraphs) >= limit:
                    return paragraphs
    return paragraphs


def format_paragraphs(paragraphs, template):
    return [template.format(title=title, text=text) for title, text in paragraphs]


def parse_int_list(value):
    """"6,3,1" -> [6, 3, 1] (argparse type)."""
    return [int(v) for v in value.split(",") if v.strip()]


def set_threads(threads):
    import torch

    if threads:
        torch.set_num_threads(threads)


def load_sentence_transformer(model_path=DEFAULT_MODEL, max_length=256):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
    model.max_seq_length = max_length
    # f32 whatever the checkpoint stores: transformers loads half-precision files as they are.
    model.float()
    model.eval()
    return model


class DepthSetter:
    """Runs a SentenceTransformer with only its first L transformer layers
    (model[0].auto_model.encoder.layer truncated; the full list is kept to go back)."""

    def __init__(self, model):
        self.bert = model[0].auto_model
        self.layers = self.bert.encoder.layer
        self.full_depth = len(self.layers)

    def __call__(self, depth):
        import torch

        if not 1 <= depth <= self.full_depth:
            raise SystemExit(f"depth {depth} is outside 1..{self.full_depth}")
        self.bert.encoder.layer = torch.nn.ModuleList(list(self.layers)[:depth])
        self.bert.config.num_hidden_layers = depth


def token_counts(tokenizer, texts, max_length):
    """Tokens per text after truncation to max_length, special tokens included."""
    encoded = tokenizer(texts, truncation=True, max_length=max_length)
    return [len(ids) for ids in encoded["input_ids"]]


def versions():
    import sentence_transformers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }
