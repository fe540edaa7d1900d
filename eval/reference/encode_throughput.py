"""Encoding throughput of the sentence-transformers reference at several depths, on the
first N distinct paragraphs of a HotpotQA file, with PyTorch (sentence-transformers) or
ONNX Runtime. The Rust benchmark runs this side by side with `rag`, so keep the
interface stable.

    eval/.venv/bin/python eval/reference/encode_throughput.py \
        --corpus ../shared/data/hotpotqa/hotpot_dev_distractor_sample.json \
        --limit 2000 --layers 6,3,1 --batch-size 64 --max-length 256 --threads 2 \
        --template "{title}: {text}" [--backend st|ort|ort-int8] [--json]

tokens/s counts the tokens of each text after truncation to --max-length, [CLS] and
[SEP] included (padding excluded). One warm-up batch per depth is not timed.

Backends:
  st        (default) SentenceTransformer.encode on PyTorch, torch.set_num_threads(--threads).
  ort       the model's transformer (BertModel, truncated to each depth) exported with
            torch.onnx.export (the TorchScript exporter, dynamo=False, where this torch has
            it, else the default one), f32, one file per depth in a temporary directory, run
            by onnxruntime on CPUExecutionProvider (intra-op threads --threads, inter-op 1,
            ORT_ENABLE_ALL). Each batch is tokenised by the model's own tokenizer (padded
            to its longest text) and mean-pooled over the attention mask and L2-normalised
            in numpy, as sentence-transformers does for all-MiniLM-L6-v2; the texts are put
            in batches by descending length, as SentenceTransformer.encode does.
  ort-int8  the same f32 export passed through onnxruntime.quantization.quantize_dynamic
            (weight_type QInt8): ORT's dynamic int8.
Tokenisation, pooling and normalisation are timed for every backend; export and
quantisation are not. The ONNX Runtime backends also report, per depth, the cosine of
their vectors to sentence-transformers' on the first 64 texts (`cosine_to_st`, mean and
min); `ort` fails below 0.999. The st backend does not import onnxruntime.
"""

import argparse
import contextlib
import inspect
import json
import os
import sys
import tempfile
import time
import warnings

import common

BACKENDS = ("st", "ort", "ort-int8")
ORT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
COSINE_TEXTS = 64
ORT_MIN_COSINE = 0.999


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=2000, help="number of distinct paragraphs")
    ap.add_argument("--layers", type=common.parse_int_list, default=[6, 3, 1], help="depths, e.g. 6,3,1")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2,
                    help="torch.set_num_threads; for ort/ort-int8 also ONNX Runtime's intra-op threads")
    ap.add_argument("--template", default=common.DEFAULT_TEMPLATE)
    ap.add_argument("--model", default=str(common.DEFAULT_MODEL))
    ap.add_argument("--backend", choices=BACKENDS, default="st",
                    help="st: sentence-transformers (PyTorch); ort: ONNX Runtime f32; ort-int8: ONNX Runtime "
                         "dynamic int8 (default st)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    return ap.parse_args()


def measure(model, texts, batch_size):
    model.encode(texts[:batch_size], batch_size=batch_size, normalize_embeddings=True)  # warm-up
    start = time.perf_counter()
    model.encode(texts, batch_size=batch_size, normalize_embeddings=True)
    return time.perf_counter() - start


def last_hidden_state_module(bert):
    """A torch module returning bert(...).last_hidden_state, called with keywords (tracing
    BertModel.forward with positional inputs trips over its wrappers in transformers 5)."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    return LastHiddenState().eval()


def export_onnx(bert, tokenizer, path):
    """Exports bert (at its current depth) to path as an f32 ONNX model with inputs
    input_ids/attention_mask/token_type_ids and output last_hidden_state, batch and
    sequence axes dynamic. Returns the exporter used ("torchscript" or "dynamo")."""
    import torch

    # Two texts of different lengths, so that the traced graph has the padding-mask path.
    dummy = tokenizer(["a short text", "a somewhat longer text, to have some padding in the batch"],
                      padding=True, truncation=True, max_length=32, return_tensors="pt")
    args = tuple(dummy[name] if name in dummy else torch.zeros_like(dummy["input_ids"]) for name in ORT_INPUTS)
    module = last_hidden_state_module(bert)
    axes = {name: {0: "batch", 1: "sequence"} for name in (*ORT_INPUTS, "last_hidden_state")}
    kwargs = dict(input_names=list(ORT_INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes)
    params = inspect.signature(torch.onnx.export).parameters
    # Exporters print progress: keep stdout for the results (--json).
    with torch.no_grad(), contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "dynamo" in params:
            try:
                torch.onnx.export(module, args, path, opset_version=17, dynamo=False, **kwargs)
                return "torchscript"
            except Exception as e:  # a torch without the TorchScript exporter: the default one
                print(f"encode_throughput: torch.onnx.export(dynamo=False) failed ({type(e).__name__}: {e}); "
                      f"using the default exporter", file=sys.stderr)
            if "external_data" in params:
                kwargs["external_data"] = False
            torch.onnx.export(module, args, path, dynamo=True, **kwargs)
            return "dynamo"
        torch.onnx.export(module, args, path, opset_version=17, **kwargs)
        return "torchscript"


class OrtEncoder:
    """An onnxruntime session on one exported depth, encoding like
    SentenceTransformer.encode(normalize_embeddings=True) for a mean-pooling model."""

    def __init__(self, path, tokenizer, max_length, threads):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.tokenizer = tokenizer
        self.max_length = max_length

    def encode_batch(self, texts):
        import numpy as np

        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="np")
        feed = {}
        for name in self.input_names:
            if name in encoded:
                feed[name] = encoded[name].astype(np.int64)
            else:  # token_type_ids from a tokenizer that does not return them
                feed[name] = np.zeros_like(encoded["input_ids"], dtype=np.int64)
        hidden = self.session.run(["last_hidden_state"], feed)[0]
        mask = encoded["attention_mask"].astype(hidden.dtype)[:, :, None]
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def encode(self, texts, batch_size):
        """Vectors in the order of texts; batches by descending length like sentence-transformers."""
        import numpy as np

        order = np.argsort([-len(t) for t in texts])
        ordered = [texts[i] for i in order]
        vectors = np.concatenate([self.encode_batch(ordered[i:i + batch_size])
                                  for i in range(0, len(ordered), batch_size)])
        return vectors[np.argsort(order)]


def measure_ort(encoder, texts, batch_size):
    encoder.encode(texts[:batch_size], batch_size)  # warm-up
    start = time.perf_counter()
    encoder.encode(texts, batch_size)
    return time.perf_counter() - start


def cosine_to_st(model, encoder, texts, batch_size):
    """Cosine of each ORT vector to sentence-transformers' (model at the same depth)."""
    import numpy as np

    reference = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    ours = encoder.encode(texts, batch_size)
    cosines = (reference.astype(np.float64) * ours.astype(np.float64)).sum(axis=1)
    cosines /= np.linalg.norm(reference, axis=1) * np.linalg.norm(ours, axis=1)
    return {"mean": round(float(cosines.mean()), 7), "min": round(float(cosines.min()), 7)}


def ort_encoder(args, model, bert, tmp, depth):
    """Exports (and for ort-int8 quantises) the model at its current depth; untimed."""
    f32 = os.path.join(tmp, f"depth{depth}.onnx")
    exporter = export_onnx(bert, model.tokenizer, f32)
    path = f32
    if args.backend == "ort-int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        path = os.path.join(tmp, f"depth{depth}-int8.onnx")
        with contextlib.redirect_stdout(sys.stderr):
            quantize_dynamic(f32, path, weight_type=QuantType.QInt8)
    return OrtEncoder(path, model.tokenizer, args.max_length, args.threads), exporter


def main():
    args = parse_args()
    common.set_threads(args.threads)
    texts = common.format_paragraphs(common.distinct_paragraphs([args.corpus], args.limit), args.template)
    model = common.load_sentence_transformer(args.model, args.max_length)
    tokens = sum(common.token_counts(model.tokenizer, texts, args.max_length))
    set_depth = common.DepthSetter(model)
    use_ort = args.backend != "st"

    results, exporter = {}, None
    with (tempfile.TemporaryDirectory(prefix="encode_throughput-") if use_ort
          else contextlib.nullcontext()) as tmp:
        for depth in args.layers:
            set_depth(depth)
            r = {}
            if use_ort:
                encoder, exporter = ort_encoder(args, model, set_depth.bert, tmp, depth)
                cosine = cosine_to_st(model, encoder, texts[:COSINE_TEXTS], args.batch_size)
                if args.backend == "ort" and cosine["min"] < ORT_MIN_COSINE:
                    raise SystemExit(f"encode_throughput: ONNX Runtime f32 at depth {depth} disagrees with "
                                     f"sentence-transformers: cosine mean {cosine['mean']}, min {cosine['min']} "
                                     f"on the first {COSINE_TEXTS} texts (need >= {ORT_MIN_COSINE})")
                seconds = measure_ort(encoder, texts, args.batch_size)
                del encoder
            else:
                seconds = measure(model, texts, args.batch_size)
            r.update({
                "paragraphs_per_s": round(len(texts) / seconds, 3),
                "tokens_per_s": round(tokens / seconds, 1),
                "seconds": round(seconds, 3),
            })
            if use_ort:
                r["cosine_to_st"] = cosine
            results[str(depth)] = r
            if not args.json:
                line = (f"depth {depth}: {r['paragraphs_per_s']:9.2f} paragraphs/s {r['tokens_per_s']:11.1f} tokens/s"
                        f" {r['seconds']:9.2f} s")
                if use_ort:
                    line += f"  cosine to st mean {cosine['mean']:.6f} min {cosine['min']:.6f}"
                print(line, flush=True)

    versions = common.versions()
    if use_ort:
        import onnx
        import onnxruntime

        versions.update(onnxruntime=onnxruntime.__version__, onnx=onnx.__version__)
    if args.json:
        out = {
            "backend": args.backend,
            "layers": results,
            "paragraphs": len(texts),
            "tokens": tokens,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "threads": args.threads,
            "template": args.template,
            "versions": versions,
        }
        if use_ort:
            out["onnx_exporter"] = exporter
        print(json.dumps(out, indent=1))
    else:
        print(f"{len(texts)} paragraphs, {tokens} tokens, batch {args.batch_size}, max length "
              f"{args.max_length}, {args.threads} thread(s), template {args.template!r}"
              + (f", backend {args.backend}" if use_ort else ""))


if __name__ == "__main__":
    main()
