#!/usr/bin/env python3
"""The scale harness (issue 53, item 5): an index of N documents, the real HotpotQA sample
paragraphs plus synthetic distractors, written through rag's own index writer (document store,
BM25, faiss, manifest, checksums) without the encoder, then searched with the real distractor
questions.

- Real rows: the setup's index (`--real-index`, both sample files, depths 1/3/6 at 384) holds the
  encoder's vectors of the real paragraphs; a depth's first `--dim` dims, renormalised, are what
  `rag index --layers L --dim K` stores (ESE truncation), so nothing is encoded again.
- Synthetic rows: drawn from a Gaussian fitted to the real rows of that depth (mean and full
  covariance of the truncated vectors), then normalised.
- Synthetic texts: words drawn from the sample's word frequencies, sentence lengths and sentences
  per paragraph drawn from the sample's; titles "Synthetic paragraph <i>", unique.
- `rag index --vectors-from` writes them all; the build's time and peak memory are measured with
  `/usr/bin/time -v`, the index's disk size with `du`.
- Then: a cold `rag search` (every index file evicted from the page cache with
  posix_fadvise(DONTNEED), since dropping caches needs privileges) and one with a warm cache;
  `rag serve` time to ready and resident memory; warm /search latency p50 / p99 per mode over
  the first `--latency-questions` distractor questions; Recall@5 and both@5 of the distractor
  questions with `rag eval --no-generate` (dense one hop, and the default pipeline).

Synthetic distractors are easier than real ones (no near-duplicate topics, no shared entities),
so recall here is an upper bound of what the real corpus would give at that N.

Every step resumes: the generated files, the index (rag index resumes and says up to date) and
each result file are kept, so a cut-off run continues. Big files go under --work (default
/work/scale-data, outside the clone); results under eval/scale/results/synthetic/.

    nice eval/scale/synthetic.py --n 1000000 --layers 3 --dim 64
"""

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "eval", "serving"))
import serve_probe  # noqa: E402  (this folder, which Python puts first on the path)
from page_cache import evict  # noqa: E402

HEADER = 45  # bytes before the rows of a faiss IndexFlatL2 file
WORD = re.compile(r"[A-Za-z0-9']+")
BLOCK = 200_000


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "sse4")))
    return []


def sample_files(data):
    return [os.path.join(data, "hotpotqa", f"hotpot_dev_{q}_sample.json") for q in ("distractor", "fullwiki")]


def real_rows(real_index, depth, dim):
    """The real paragraphs' stored rows at `depth`, cut to `dim` and renormalised."""
    manifest = json.load(open(os.path.join(real_index, "manifest.json")))
    width = manifest["stored_dim"]
    if depth not in manifest["layers"] or dim > width:
        sys.exit(f"--real-index {real_index} has no layer {depth} at {dim} dims (layers {manifest['layers']}, {width} dims)")
    path = os.path.join(real_index, "dense", f"L{depth}-d{width}.faiss")
    rows = np.memmap(path, dtype="<f4", mode="r", offset=HEADER).reshape(-1, width)
    if rows.shape[0] != manifest["documents"]:
        sys.exit(f"{path}: {rows.shape[0]} rows for {manifest['documents']} documents")
    cut = np.array(rows[:, :dim], dtype=np.float64)
    cut /= np.linalg.norm(cut, axis=1, keepdims=True)
    return cut, manifest


def write_rows(path, real, n, rng):
    """Real rows, then n - len(real) Gaussian rows, normalised; skipped when already whole."""
    dim = real.shape[1]
    want = n * dim * 4
    if os.path.exists(path) and os.path.getsize(path) == want:
        return
    mean = real.mean(axis=0)
    chol = np.linalg.cholesky(np.cov(real, rowvar=False) + 1e-9 * np.eye(dim))
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(real.astype("<f4").tobytes())
        left = n - real.shape[0]
        while left > 0:
            b = min(BLOCK, left)
            rows = mean + rng.standard_normal((b, dim)) @ chol.T
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            f.write(rows.astype("<f4").tobytes())
            left -= b
    os.replace(tmp, path)


def text_model(files):
    """Word frequencies, words per sentence and sentences per paragraph of the sample."""
    counts, sentence_lengths, paragraph_sentences, seen = {}, [], [], set()
    for path in files:
        for record in json.load(open(path)):
            for title, sentences in record["context"]:
                if title in seen:
                    continue
                seen.add(title)
                paragraph_sentences.append(len(sentences))
                for s in sentences:
                    words = WORD.findall(s)
                    if words:
                        sentence_lengths.append(len(words))
                    for w in words:
                        counts[w] = counts.get(w, 0) + 1
    vocab = np.array(list(counts))
    freq = np.array([counts[w] for w in vocab], dtype=np.float64)
    return vocab, freq / freq.sum(), np.array(sentence_lengths), np.array(paragraph_sentences)


def write_texts(path, count, files, rng):
    """`count` synthetic {"title", "text"} lines, gzip'd; skipped when already whole."""
    done = path + ".done"
    if os.path.exists(done):
        return
    vocab, p, lengths, per_paragraph = text_model(files)
    tmp = path + ".part"
    with gzip.open(tmp, "wt", compresslevel=1) as f:
        written = 0
        while written < count:
            b = min(BLOCK // 4, count - written)
            n_sent = rng.choice(per_paragraph, size=b)
            sent_len = rng.choice(lengths, size=int(n_sent.sum()))
            # A list of Python strings: joining numpy string scalars one by one is what was slow.
            words = vocab[rng.choice(len(vocab), size=int(sent_len.sum()), p=p)].tolist()
            w = s = 0
            lines = []
            for i in range(b):
                sentences = []
                for _ in range(n_sent[i]):
                    sentences.append(" ".join(words[w : w + sent_len[s]]).capitalize() + ".")
                    w += sent_len[s]
                    s += 1
                title = f"Synthetic paragraph {written + i}"
                lines.append(json.dumps({"title": title, "text": " ".join(sentences)}))
            f.write("\n".join(lines) + "\n")
            written += b
            log(f"texts {written}/{count}")
    os.replace(tmp, path)
    open(done, "w").close()


def timed(cmd, out_json=None):
    """Runs cmd under /usr/bin/time -v: (wall s, peak RSS MiB, stdout)."""
    started = time.time()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    wall = time.time() - started
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return wall, int(peak.group(1)) / 1024 if peak else None, r.stdout


def du_mib(path):
    return int(subprocess.run(["du", "-sk", path], capture_output=True, text=True).stdout.split()[0]) / 1024


def serve_measure(rag, index, questions, modes, extra):
    """rag serve: seconds to ready, warm /search p50/p99 per mode, resident memory."""
    return serve_probe.measure(rag, index, questions, modes, extra)


def recall(rag, index, questions_file, name, flags, runs):
    summary = os.path.join(runs, name, "summary.json")
    if not os.path.exists(summary):
        subprocess.run(
            ["nice", rag, "eval", "--no-generate", "--index", index, "--questions", questions_file,
             "--runs-dir", runs, "--name", name] + flags,
            check=True, stdout=subprocess.DEVNULL,
        )
    cell = json.load(open(summary))["cells"][0]
    return {"questions": cell["questions"], "recall@5": round(cell["recall"]["5"], 4),
            "both@5": round(cell["all_supporting"]["5"], 4), "flags": flags}


def summarise(results):
    """results/synthetic/summary.md: one row per result file, the issue's numbers side by side."""
    rows = []
    for name in sorted(os.listdir(results), key=lambda n: (len(n), n)):
        if not name.endswith(".json"):
            continue
        r = json.load(open(os.path.join(results, name)))
        g = lambda *path: _dig(r, path)
        modes = g("serve", "modes") or {}
        lat = lambda m: f"{modes[m]['p50_ms']:.0f} / {modes[m]['p99_ms']:.0f}" if m in modes else "-"
        pct = lambda v: f"{100 * v:.1f}" if isinstance(v, (int, float)) else "-"
        rows.append(
            f"| {r['label']} | {g('build', 'wall_s') or '-'} | {g('build', 'peak_rss_mib') or '-'} "
            f"| {g('disk_mib', 'dense') or '-'} / {g('disk_mib', 'index') or '-'} "
            f"| {g('search_process', 'cold_cache_s') or '-'} / {g('search_process', 'warm_cache_s') or '-'} "
            f"| {g('serve', 'ready_s') or '-'} | {g('serve', 'rss_steady_mib') or '-'} "
            f"| {lat('dense')} | {lat('bm25')} | {lat('fusion-two-hop')} "
            f"| {pct(g('recall', 'dense', 'recall@5'))} / {pct(g('recall', 'dense', 'both@5'))} "
            f"| {pct(g('recall', 'default', 'recall@5'))} / {pct(g('recall', 'default', 'both@5'))} "
            f"| {', '.join(g('verify', 'lines') or []) or '-'} | {', '.join(f'{x:.1f}' for x in r.get('load_average_after', [])) or '-'} |"
        )
    with open(os.path.join(results, "summary.md"), "w") as f:
        f.write("# Scale harness results (eval/scale/synthetic.py)\n\n")
        f.write("Times in seconds, memory and disk in MiB, latencies p50 / p99 in ms of warm `/search` "
                "(one client), recall in % of the 1,186 distractor questions (R@5 / both@5).\n\n")
        f.write("| run | build s | build peak | dense / whole index on disk | cold / warm-cache `rag search` s "
                "| serve ready s | serve RSS | dense | BM25 | fusion two-hop | dense R@5 / both@5 "
                "| default pipeline R@5 / both@5 | HNSW recall@10 vs flat | load after |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n")


def _dig(value, path):
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, required=True, help="documents in all, real ones included")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rag", default=os.path.join(ROOT, "rag"))
    ap.add_argument("--real-index", default=os.path.join(ROOT, "index", "default"))
    ap.add_argument("--data", default=os.environ.get("RAG_DATA", os.path.join(ROOT, "..", "shared", "data")))
    ap.add_argument("--work", default="/work/scale-data")
    ap.add_argument("--latency-questions", type=int, default=200)
    ap.add_argument("--index-flag", action="append", default=[], help="extra `rag index` flag (e.g. --ann=hnsw:32)")
    ap.add_argument("--serve-mode", action="append", default=[],
                    help='extra /search body to time, NAME=JSON (e.g. hnsw={"mode":"dense","ef_search":64})')
    ap.add_argument("--eval-flag", action="append", default=[], help="extra flag for every `rag eval`")
    ap.add_argument("--seed", type=int, default=53)
    ap.add_argument("--tag", default="", help="suffix for the index and result names: a re-measurement kept beside the first")
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    files = sample_files(args.data)
    base = f"n{args.n}-L{args.layers}-d{args.dim}"
    # Index flags (e.g. --ann=hnsw:32) name their own index and result; rows and texts are shared.
    suffix = "".join("-" + re.sub(r"[^A-Za-z0-9]+", "", f) for f in args.index_flag + ([args.tag] if args.tag else []))
    label = base + suffix
    work = os.path.join(args.work, base)
    os.makedirs(work, exist_ok=True)
    results = os.path.join(HERE, "results", "synthetic")
    os.makedirs(results, exist_ok=True)
    result_file = os.path.join(results, f"{label}.json")
    result = json.load(open(result_file)) if os.path.exists(result_file) else {}
    result.update({"label": label, "n": args.n, "layers": args.layers, "dim": args.dim,
                   "cpu_flags": cpu_flags(), "cpus": os.cpu_count()})

    def save():
        json.dump(result, open(result_file + ".tmp", "w"), indent=1)
        os.replace(result_file + ".tmp", result_file)

    real, manifest = real_rows(args.real_index, args.layers, args.dim)
    if [os.path.abspath(c["path"]) for c in manifest["corpus"]] != [os.path.abspath(f) for f in files]:
        log("note: the real index was built from", [c["path"] for c in manifest["corpus"]])
    synthetic = args.n - real.shape[0]
    if synthetic < 0:
        sys.exit(f"--n {args.n} is fewer than the {real.shape[0]} real documents")
    result["real_documents"], result["synthetic_documents"] = real.shape[0], synthetic

    rows_dir = os.path.join(work, "rows")
    os.makedirs(rows_dir, exist_ok=True)
    log(f"{label}: rows")
    write_rows(os.path.join(rows_dir, f"layer-{args.layers}.f32"), real, args.n, rng)
    corpus = list(files)
    if synthetic:
        texts = os.path.join(work, "synthetic.jsonl.gz")
        log(f"{label}: texts")
        write_texts(texts, synthetic, files, rng)
        corpus.append(texts)

    index = os.path.join(work, "index" + suffix)
    if "build" not in result:
        log(f"{label}: rag index")
        cmd = ["nice", args.rag, "index", "--index", index, "--layers", str(args.layers), "--dim", str(args.dim),
               "--vectors-from", rows_dir, "--json"] + [a for c in corpus for a in ("--corpus", c)] + args.index_flag
        wall, peak, out = timed(cmd)
        summary = json.loads(out)
        result["build"] = {"wall_s": round(wall, 1), "peak_rss_mib": round(peak, 1), "documents": summary["documents"],
                           "up_to_date": summary["up_to_date"], "flags": args.index_flag}
        save()
    result["disk_mib"] = {"index": round(du_mib(index), 1), "dense": round(du_mib(os.path.join(index, "dense")), 1),
                          "bm25": round(du_mib(os.path.join(index, "bm25")), 1),
                          "docs": round(os.path.getsize(os.path.join(index, "docs.jsonl")) / 2**20, 1)}
    save()

    if any(f.startswith("--ann") for f in args.index_flag) and "verify" not in result:
        # Every file hashed, and each graph's recall@10 against flat at the default efSearch.
        started = time.time()
        out = subprocess.run(["nice", args.rag, "index", "--verify", "--index", index], capture_output=True, text=True)
        result["verify"] = {"wall_s": round(time.time() - started, 1), "exit": out.returncode,
                            "lines": [l for l in (out.stdout + out.stderr).splitlines() if "recall" in l]}
        save()

    questions = [r["question"] for r in json.load(open(files[0]))]
    search = ["nice", args.rag, "search", questions[0], "--index", index]
    evict(index)
    cold, cold_peak, _ = timed(search)
    warm, _, _ = timed(search)
    result["search_process"] = {"cold_cache_s": round(cold, 2), "warm_cache_s": round(warm, 2),
                                "peak_rss_mib": round(cold_peak, 1), "query": questions[0],
                                "what": "a whole `rag search` process (open, encode, default pipeline)"}
    save()

    modes = {"dense": {"mode": "dense", "hops": 1}, "bm25": {"mode": "bm25", "hops": 1},
             "fusion-two-hop": {"mode": "fusion", "hops": 2}}
    for spec in args.serve_mode:
        name, body = spec.split("=", 1)
        modes[name] = json.loads(body)
    log(f"{label}: serve")
    result["serve"] = serve_measure(args.rag, index, questions[: args.latency_questions], modes, [])
    save()

    runs = os.path.join(work, "runs" + suffix)
    log(f"{label}: recall")
    result["recall"] = {
        "dense": recall(args.rag, index, files[0], "dense", ["--mode", "dense", "--hops", "1"] + args.eval_flag, runs),
        "default": recall(args.rag, index, files[0], "default", args.eval_flag, runs),
    }
    result["note"] = ("synthetic distractors (Gaussian rows fitted to the real ones, texts from the sample's word "
                      "frequencies) are easier than real ones: recall is an upper bound for a real corpus of this size")
    result["load_average_after"] = list(os.getloadavg())
    save()
    summarise(results)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
