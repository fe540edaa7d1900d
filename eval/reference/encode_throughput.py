"""Encoding throughput of the sentence-transformers reference at several depths, on the
first N distinct paragraphs of a HotpotQA file. The Rust benchmark runs this side by
side with `rag`, so keep the interface stable.

    eval/.venv/bin/python eval/reference/encode_throughput.py \
        --corpus ../shared/data/hotpotqa/hotpot_dev_distractor_sample.json \
        --limit 2000 --layers 6,3,1 --batch-size 64 --max-length 256 --threads 2 \
        --template "{title}: {text}" [--json]

tokens/s counts the tokens of each text after truncation to --max-length, [CLS] and
[SEP] included (padding excluded). One warm-up batch per depth is not timed.
"""

import argparse
import json
import time

import common


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="HotpotQA JSON file")
    ap.add_argument("--limit", type=int, default=2000, help="number of distinct paragraphs")
    ap.add_argument("--layers", type=common.parse_int_list, default=[6, 3, 1], help="depths, e.g. 6,3,1")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--template", default=common.DEFAULT_TEMPLATE)
    ap.add_argument("--model", default=str(common.DEFAULT_MODEL))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    return ap.parse_args()


def measure(model, texts, batch_size):
    model.encode(texts[:batch_size], batch_size=batch_size, normalize_embeddings=True)  # warm-up
    start = time.perf_counter()
    model.encode(texts, batch_size=batch_size, normalize_embeddings=True)
    return time.perf_counter() - start


def main():
    args = parse_args()
    common.set_threads(args.threads)
    texts = common.format_paragraphs(common.distinct_paragraphs([args.corpus], args.limit), args.template)
    model = common.load_sentence_transformer(args.model, args.max_length)
    tokens = sum(common.token_counts(model.tokenizer, texts, args.max_length))
    set_depth = common.DepthSetter(model)

    results = {}
    for depth in args.layers:
        set_depth(depth)
        seconds = measure(model, texts, args.batch_size)
        results[str(depth)] = {
            "paragraphs_per_s": round(len(texts) / seconds, 3),
            "tokens_per_s": round(tokens / seconds, 1),
            "seconds": round(seconds, 3),
        }
        if not args.json:
            r = results[str(depth)]
            print(f"depth {depth}: {r['paragraphs_per_s']:9.2f} paragraphs/s {r['tokens_per_s']:11.1f} tokens/s"
                  f" {r['seconds']:9.2f} s", flush=True)

    if args.json:
        print(json.dumps({
            "layers": results,
            "paragraphs": len(texts),
            "tokens": tokens,
            "batch_size": args.batch_size,
            "max_length": args.max_length,
            "threads": args.threads,
            "template": args.template,
            "versions": common.versions(),
        }, indent=1))
    else:
        print(f"{len(texts)} paragraphs, {tokens} tokens, batch {args.batch_size}, max length "
              f"{args.max_length}, {args.threads} thread(s), template {args.template!r}")


if __name__ == "__main__":
    main()
