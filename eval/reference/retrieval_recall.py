"""Recall@k of HotpotQA supporting-fact titles with the sentence-transformers reference
and an exact faiss index, at several depths and truncated dimensions.

    eval/.venv/bin/python eval/reference/retrieval_recall.py \
        --corpus ../shared/data/hotpotqa/hotpot_dev_distractor_sample.json \
        --corpus ../shared/data/hotpotqa/hotpot_dev_fullwiki_sample.json \
        --questions ../shared/data/hotpotqa/hotpot_dev_distractor_sample.json \
        --layers 6,3 --dims 384,64 --template "{title}: {text}" --k 5 [--json]

The corpus is every distinct paragraph (by title, first occurrence wins) of the --corpus
files. Corpus and questions (no prefix) are encoded once per depth with normalised
embeddings; for each dim the first dim components are kept and re-normalised, and
searched with faiss.IndexFlatL2. Per question, recall = |gold titles in top k| / |gold
titles|; all_in_top_k is the fraction of questions with every gold title in the top k.
"""

import argparse
import json

import common


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", required=True, help="HotpotQA JSON file (repeatable)")
    ap.add_argument("--questions", required=True, help="HotpotQA JSON file of questions")
    ap.add_argument("--layers", type=common.parse_int_list, default=[6], help="depths, e.g. 6,3")
    ap.add_argument("--dims", type=common.parse_int_list, default=[384], help="dims, e.g. 384,64")
    ap.add_argument("--template", default=common.DEFAULT_TEMPLATE)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--model", default=str(common.DEFAULT_MODEL))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    return ap.parse_args()


def read_questions(path):
    """[(question, set of supporting-fact titles)]"""
    return [(r["question"], {title for title, _ in r["supporting_facts"]}) for r in common.read_hotpot(path)]


def truncate_dims(vectors, dim):
    import numpy as np

    v = np.ascontiguousarray(vectors[:, :dim], dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def recall_at_k(corpus_vecs, question_vecs, titles, golds, k):
    import faiss

    index = faiss.IndexFlatL2(corpus_vecs.shape[1])
    index.add(corpus_vecs)
    _, hits = index.search(question_vecs, k)
    recalls, complete = [], 0
    for row, gold in zip(hits, golds):
        found = len(gold & {titles[i] for i in row if i >= 0})
        recalls.append(found / len(gold))
        complete += found == len(gold)
    return {"recall_at_k": round(sum(recalls) / len(recalls), 4), "all_in_top_k": round(complete / len(golds), 4)}


def main():
    args = parse_args()
    common.set_threads(args.threads)
    paragraphs = common.distinct_paragraphs(args.corpus)
    titles = [title for title, _ in paragraphs]
    texts = common.format_paragraphs(paragraphs, args.template)
    questions = read_questions(args.questions)
    golds = [gold for _, gold in questions]
    known = set(titles)
    missing = sum(len(gold - known) for gold in golds)

    model = common.load_sentence_transformer(args.model, args.max_length)
    set_depth = common.DepthSetter(model)

    def encode(items):
        return model.encode(items, batch_size=args.batch_size, normalize_embeddings=True)

    results = {}
    for depth in args.layers:
        set_depth(depth)
        corpus_vecs, question_vecs = encode(texts), encode([q for q, _ in questions])
        results[str(depth)] = {
            str(dim): recall_at_k(truncate_dims(corpus_vecs, dim), truncate_dims(question_vecs, dim), titles, golds, args.k)
            for dim in args.dims
        }
        if not args.json:
            for dim, r in results[str(depth)].items():
                print(f"depth {depth} dim {dim:>4}: recall@{args.k} {r['recall_at_k']:.4f}"
                      f"  all gold in top {args.k} {r['all_in_top_k']:.4f}", flush=True)

    if args.json:
        print(json.dumps({
            "layers": results,
            "k": args.k,
            "corpus_size": len(texts),
            "questions": len(questions),
            "gold_titles_missing_from_corpus": missing,
            "template": args.template,
            "corpus_files": args.corpus,
            "questions_file": args.questions,
            "versions": common.versions(),
        }, indent=1))
    else:
        print(f"corpus {len(texts)} paragraphs, {len(questions)} questions, {missing} gold titles not in the "
              f"corpus, template {args.template!r}")


if __name__ == "__main__":
    main()
