"""Issue 54, cases 1-10: each case run with `--rag` (and `--baseline`, if given) on fresh small
indexes; a case is OK when nothing that is not the tool's was touched and the index ends up
whole (or the refusal is one line saying why). Writes adversarial_index.json and .md."""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Case:
    def __init__(self, rag, work, corpora):
        self.rag, self.work, self.corpora = rag, work, corpora

    def index(self, target, corpus="small", *extra):
        return run([self.rag, "index", "--corpus", self.corpora[corpus], "--index", target, *extra])

    def search(self, target):
        return run([self.rag, "search", "Which film was directed by the director of another film?",
                    "--index", target, "--k", "3"])

    def dir(self, name):
        path = os.path.join(self.work, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path


def one_line(r):
    lines = r.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def notes(path):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "notes.txt"), "w") as f:
        f.write("mine")


def intact(path):
    try:
        return open(os.path.join(path, "notes.txt")).read() == "mine" and os.listdir(path) == ["notes.txt"]
    except OSError:
        return False


def case_1(c):
    d = c.dir("c1")
    folder = os.path.join(d, "notes")
    notes(folder)
    r = c.index(folder)
    ok = r.returncode != 0 and intact(folder) and len(r.stderr.strip().splitlines()) == 1
    empty = os.path.join(d, "empty")
    os.makedirs(empty)
    e = c.index(empty)
    ok = ok and e.returncode == 0 and c.search(empty).returncode == 0
    return ok, f"notes folder: exit {r.returncode}, notes {'intact' if intact(folder) else 'GONE'}: {one_line(r)}; empty folder: exit {e.returncode}"


def case_2(c):
    d = c.dir("c2")
    target = os.path.join(d, "index")
    old, building = target + ".old", target + ".building"
    notes(old)
    r1 = c.index(target)
    kept_old = intact(old)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    c.index(target)
    notes(building)
    r2 = c.index(target, "small", "--fresh")
    kept_building = intact(building)
    ok = kept_old and kept_building and c.search(target).returncode == 0
    return ok, (f"unrelated index.old with no index: exit {r1.returncode}, {'left alone' if kept_old else 'MOVED IN/DELETED'} ({one_line(r1)}); "
                f"unrelated index.building: exit {r2.returncode}, {'left alone' if kept_building else 'DELETED'} ({one_line(r2)})")


def case_3(c):
    d = c.dir("c3")
    path = os.path.join(d, "report.txt")
    with open(path, "w") as f:
        f.write("keep me")
    r = c.index(path)
    content = open(path).read() if os.path.isfile(path) else None
    ok = r.returncode != 0 and content == "keep me" and sorted(os.listdir(d)) == ["report.txt"]
    return ok, f"exit {r.returncode}, file {'intact' if content == 'keep me' else 'REPLACED'}, folder now {sorted(os.listdir(d))}: {one_line(r)}"


def generation(index):
    with open(os.path.join(index, "manifest.json")) as f:
        return json.load(f).get("generation")


def case_4(c):
    d = c.dir("c4")
    real, link = os.path.join(d, "real"), os.path.join(d, "link")
    c.index(real)
    before = generation(real)
    os.symlink("real", link)
    r = c.index(link, "other")
    still_link = os.path.islink(link)
    after = generation(real) if os.path.exists(os.path.join(real, "manifest.json")) else None
    ok = r.returncode == 0 and still_link and after is not None and after != before and c.search(link).returncode == 0
    return ok, f"exit {r.returncode}, link {'kept' if still_link else 'REPLACED by a folder'}, target's generation {before} -> {after}"


def case_5(c):
    d = c.dir("c5")
    target = os.path.join(d, "index")
    first = subprocess.Popen([c.rag, "index", "--corpus", c.corpora["big"], "--index", target],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 5
    while not os.path.exists(target + ".lock") and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    second = c.index(target, "big")
    first.wait()
    named = f"pid {first.pid}" in second.stderr
    ok = first.returncode == 0 and second.returncode != 0 and named and c.search(target).returncode == 0
    return ok, f"first exit {first.returncode}, second exit {second.returncode}, holder named: {named}: {one_line(second)}"


def case_6(c):
    d = c.dir("c6")
    target = os.path.join(d, "index")
    c.index(target)
    bm25 = os.path.join(target, "bm25")
    segment = next(f for f in sorted(os.listdir(bm25)) if f.endswith(".idx"))
    os.remove(os.path.join(bm25, segment))
    r = c.index(target)
    s = c.search(target)
    up_to_date = "up to date" in r.stdout
    ok = r.returncode == 0 and not up_to_date and s.returncode == 0
    return ok, f"rag index after bm25/{segment} removed: exit {r.returncode}, {'said up to date' if up_to_date else 'rebuilt'}; search exit {s.returncode} {one_line(s) if s.returncode else ''}"


def case_7(c):
    d = c.dir("c7")
    target = os.path.join(d, "index")
    c.index(target)
    bm25 = os.path.join(target, "bm25")
    present = [f for f in [".tantivy-meta.lock", ".tantivy-writer.lock"] if os.path.exists(os.path.join(bm25, f))]
    for f in present:
        os.remove(os.path.join(bm25, f))
    s = c.search(target)
    return s.returncode == 0, f"lock files left by the build: {present or 'none'}; search without them: exit {s.returncode} {one_line(s) if s.returncode else ''}"


def case_8(c):
    d = c.dir("c8")
    target = os.path.join(d, "index")
    c.index(target)
    path = os.path.join(target, "manifest.json")
    manifest = json.load(open(path))
    manifest.pop("files")
    json.dump(manifest, open(path, "w"), indent=1)
    docs = os.path.join(target, "docs.jsonl")
    text = open(docs).read()
    open(docs, "w").write(text.replace("film", "FILM", 1))
    s = c.search(target)
    ok = s.returncode != 0 and "damaged" in s.stderr
    return ok, f"`files` removed, a document altered: search exit {s.returncode}: {one_line(s)}"


def case_9(c):
    d = c.dir("c9")
    target = os.path.join(d, "index")
    old = os.umask(0o022)
    try:
        c.index(target)
    finally:
        os.umask(old)
    wrong = []
    for root, _, names in os.walk(target):
        for name in names:
            mode = os.stat(os.path.join(root, name)).st_mode & 0o777
            if mode != 0o644:
                wrong.append(f"{os.path.relpath(os.path.join(root, name), target)} {mode:o}")
    return not wrong, f"umask 022: files not 644: {wrong or 'none'}"


def case_10(c):
    d = c.dir("c10")
    target = os.path.join(d, "index")
    c.index(target)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(os.path.join(d, "serve.log"), "w")
    server = subprocess.Popen([c.rag, "serve", "--index", target, "--addr", f"127.0.0.1:{port}", "--precision", "f32"],
                              stdout=log, stderr=log)

    def health():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as r:
            return json.load(r)

    def wait(pred, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                h = health()
                if pred(h):
                    return h
            except OSError:
                pass
            time.sleep(0.1)
        return None

    try:
        if not wait(lambda h: h.get("status") == "ready", 120):
            return False, "the server never became ready"
        path = os.path.join(target, "manifest.json")
        original = open(path, "rb").read()

        def replace(data):
            with open(path + ".new", "wb") as f:
                f.write(data)
            os.replace(path + ".new", path)

        replace(b"{ not a manifest")
        damaged = wait(lambda h: h["index"]["reload_error"] is not None, 20)
        replace(original)
        cleared = wait(lambda h: h["index"]["reload_error"] is None, 10)
        ok = damaged is not None and cleared is not None
        return ok, f"damaged manifest reported: {damaged is not None}; after restoring it, reload_error {'cleared' if cleared else 'STILL ' + repr(health()['index']['reload_error'])[:80]}"
    finally:
        server.terminate()
        server.wait()


CASES = [
    (1, "`--index` is a folder of someone's files", case_1),
    (2, "unrelated `DIR.old` / `DIR.building` beside `--index DIR`", case_2),
    (3, "`--index` names an existing file", case_3),
    (4, "`--index` is a symlink to an index", case_4),
    (5, "two `rag index` into one `--index` at once", case_5),
    (6, "a BM25 file deleted, then the same `rag index`", case_6),
    (7, "tantivy's two empty lock files deleted", case_7),
    (8, "`files` removed from `manifest.json` (a document altered)", case_8),
    (9, "file modes of a built index (umask 022)", case_9),
    (10, "`/health` after a damaged manifest is put back", case_10),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rag", required=True)
    p.add_argument("--baseline")
    p.add_argument("--hotpot", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    records = json.load(open(a.hotpot))
    os.makedirs(a.work, exist_ok=True)
    corpora = {}
    for name, part in [("small", records[:4]), ("other", records[4:8]), ("big", records[8:48])]:
        corpora[name] = os.path.join(a.work, f"{name}.json")
        json.dump(part, open(corpora[name], "w"))
    binaries = [("this", a.rag)] + ([("baseline", a.baseline)] if a.baseline else [])
    results = []
    for number, what, case in CASES:
        row = {"case": number, "what": what}
        for label, rag in binaries:
            started = time.time()
            try:
                ok, detail = case(Case(rag, os.path.join(a.work, label), corpora))
            except Exception as e:  # a case that crashed is a failed case, with why
                ok, detail = False, f"{type(e).__name__}: {e}"
            row[label] = {"ok": ok, "detail": detail, "seconds": round(time.time() - started, 1)}
            print(f"case {number} [{label}]: {'OK' if ok else 'FAIL'}: {detail}", flush=True)
        results.append(row)
    json.dump({"binaries": dict(binaries), "cases": results}, open(os.path.join(a.out, "adversarial_index.json"), "w"), indent=1)
    with open(os.path.join(a.out, "adversarial_index.md"), "w") as f:
        f.write("| # | case | this build | " + ("baseline | " if a.baseline else "") + "what happened (this build) |\n")
        f.write("|---|---|---|" + ("---|" if a.baseline else "") + "---|\n")
        for row in results:
            cells = [str(row["case"]), row["what"], "OK" if row["this"]["ok"] else "FAIL"]
            if a.baseline:
                cells.append("OK" if row["baseline"]["ok"] else "FAIL")
            cells.append(row["this"]["detail"].replace("|", "\\|"))
            f.write("| " + " | ".join(cells) + " |\n")
    if not all(r["this"]["ok"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
