#!/usr/bin/env python3
"""Corruption suite: damage each file of a built index in four ways and see what
`rag search`, `rag ask` and `rag serve` make of it.

For every file of the pristine index (A) and every damage -- truncate to half, zero 4 KiB in
its middle, flip one bit in its middle, swap in the same file of another index (B) -- a copy of
A is damaged and then:

  search  `rag search --json` for each question in three modes (dense at 3 layers / 64 dims,
          BM25, hybrid at 6 layers);
  ask     `rag ask --json` for one question with the small generator (skipped without it);
  serve   `rag serve --precision f32`, then the same searches (and the question on /ask) over
          HTTP.

Each run is classed as:
  correct   the same hits (and answer) as on the pristine index;
  refused   a non-zero exit (or a server that would not start) with one `error:` line that
            names the damaged file or says the index is damaged, or a 4xx over HTTP;
  UNCLEAR   refused some other way (several lines, a panic, no file named);
  WRONG     success with other hits or another answer;
  5XX       an HTTP 5xx (WITH-PATHS when its body names a file of the index).

Writes corruption.json (every case) and corruption.md (the table and the counts) to --out.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

QUESTIONS = [
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
]
SEARCHES = [
    {"mode": "dense", "layers": 3, "dim": 64},
    {"mode": "bm25"},
    {"mode": "hybrid", "layers": 6},
]
DAMAGES = ["truncate", "zero", "flip", "swap"]


def damage(path: Path, how: str, other: Path | None) -> str | None:
    """Damages `path`; returns why it could not be (the case is then skipped)."""
    size = path.stat().st_size
    if how == "swap":
        if other is None:
            return "no file of that name in the other index"
        shutil.copyfile(other, path)
        return None
    if size == 0:
        return "empty file"
    data = bytearray(path.read_bytes())
    if how == "truncate":
        del data[size // 2 :]
    elif how == "zero":
        start = max(0, size // 2 - 2048)
        end = min(size, start + 4096)
        if all(b == 0 for b in data[start:end]):
            return "already zeros there"
        data[start:end] = bytes(end - start)
    elif how == "flip":
        data[size // 2] ^= 0x10
    path.write_bytes(bytes(data))
    return None


def counterpart(pristine_b: Path, relative: Path) -> Path | None:
    """The same file in index B: by name, else (tantivy's segment files are named by a random
    id) the first file with the same extension in the same directory."""
    exact = pristine_b / relative
    if exact.is_file():
        return exact
    folder = pristine_b / relative.parent
    same = sorted(p for p in folder.glob(f"*{relative.suffix}") if p.is_file())
    return same[0] if same else None


def run(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def classify_refusal(stderr: str, relative: str) -> str:
    lines = [l for l in stderr.strip().splitlines() if l.strip() and not l.startswith("note:")]
    name = Path(relative).name
    clear = (
        len(lines) == 1
        and lines[0].startswith("error: ")
        and "panicked" not in stderr
        and (name in lines[0] or "damaged" in lines[0] or "manifest" in lines[0] or "index" in lines[0])
    )
    return "refused" if clear else "UNCLEAR"


def search_cli(rag: str, index: Path, question: str, spec: dict) -> subprocess.CompletedProcess:
    cmd = [rag, "search", question, "--index", str(index), "--json", "--k", "5", "--mode", spec["mode"]]
    if "layers" in spec:
        cmd += ["--layers", str(spec["layers"])]
    if "dim" in spec:
        cmd += ["--dim", str(spec["dim"])]
    return run(cmd)


def hits(response: dict) -> list:
    return [(h["id"], h["title"], h["text"]) for h in response["hits"]]


def ask_cli(rag: str, index: Path, llm: Path) -> subprocess.CompletedProcess:
    return run([rag, "ask", QUESTIONS[0], "--index", str(index), "--llm", str(llm), "--json", "--top-k", "3"])


def ask_key(response: dict) -> tuple:
    """The answer and its sources' titles (all that `rag ask --json` prints of them; /ask
    prints the same titles)."""
    return (response["answer"], [s["title"] for s in response["sources"]])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port: int, method: str, path: str, body: dict | None = None, timeout: float = 120):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def serve_case(rag: str, index: Path, llm: Path | None, relative: str, expected: dict) -> str:
    """Starts a server on `index`; returns the outcome of its searches (and /ask)."""
    port = free_port()
    cmd = [rag, "serve", "--index", str(index), "--addr", f"127.0.0.1:{port}", "--precision", "f32"]
    cmd += ["--llm", str(llm)] if llm else ["--no-llm"]
    log = index.parent / f"serve-{port}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                stderr = log.read_text()
                # The listener line comes first; the refusal is the last line.
                lines = [l for l in stderr.strip().splitlines() if not l.startswith(("listening", "note:"))]
                return classify_refusal("\n".join(lines), relative) + " at startup"
            try:
                status, _ = http(port, "GET", "/health", timeout=2)
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            return "UNCLEAR: never ready"
        outcomes = []
        for question in QUESTIONS:
            for spec in SEARCHES:
                status, body = http(port, "POST", "/search", {"query": question, "k": 5, **spec})
                key = f"{question}|{json.dumps(spec, sort_keys=True)}"
                outcomes.append(http_outcome(status, body, index, lambda b: hits(b) == expected[key]))
        if llm:
            status, body = http(port, "POST", "/ask", {"question": QUESTIONS[0], "top_k": 3})
            want = expected["ask"]
            outcomes.append(
                http_outcome(
                    status,
                    body,
                    index,
                    lambda b: ask_key(b) == want,
                )
            )
        return worst(outcomes)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def http_outcome(status: int, body: str, index: Path, same) -> str:
    if status >= 500:
        return "5XX WITH-PATHS" if str(index) in body or ".faiss" in body or ".jsonl" in body else "5XX"
    if status >= 400:
        return "refused"
    return "correct" if same(json.loads(body)) else "WRONG"


RANK = {"correct": 0, "refused": 1, "refused at startup": 1, "skipped": 0}


def worst(outcomes: list[str]) -> str:
    """The most serious of several outcomes (anything unexpected outranks a refusal)."""
    return max(outcomes, key=lambda o: RANK.get(o, 5))


def cli_outcome(results: list[tuple[subprocess.CompletedProcess, object]], relative: str) -> str:
    outcomes = []
    for proc, same in results:
        if proc.returncode != 0:
            outcomes.append(classify_refusal(proc.stderr, relative))
        else:
            outcomes.append("correct" if same(json.loads(proc.stdout)) else "WRONG")
    return worst(outcomes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rag", required=True)
    parser.add_argument("--pristine", type=Path, required=True, help="index A")
    parser.add_argument("--other", type=Path, required=True, help="index B (for swaps)")
    parser.add_argument("--llm", type=Path, help="small GGUF generator for ask (skipped without)")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-serve", action="store_true")
    args = parser.parse_args()
    llm = args.llm if args.llm and args.llm.is_file() else None

    # What the pristine index answers.
    expected = {}
    for question in QUESTIONS:
        for spec in SEARCHES:
            proc = search_cli(args.rag, args.pristine, question, spec)
            if proc.returncode != 0:
                sys.exit(f"the pristine index fails: {proc.stderr}")
            expected[f"{question}|{json.dumps(spec, sort_keys=True)}"] = hits(json.loads(proc.stdout))
    if llm:
        proc = ask_cli(args.rag, args.pristine, llm)
        if proc.returncode != 0:
            sys.exit(f"the pristine index fails ask: {proc.stderr}")
        expected["ask"] = ask_key(json.loads(proc.stdout))

    documents = json.loads((args.pristine / "manifest.json").read_text())["documents"]
    files = sorted(
        p.relative_to(args.pristine) for p in args.pristine.rglob("*") if p.is_file()
    )
    cases = []
    started = time.time()
    for relative in files:
        for how in DAMAGES:
            copy = args.work / "case"
            if copy.exists():
                shutil.rmtree(copy)
            shutil.copytree(args.pristine, copy)
            other = counterpart(args.other, relative) if how == "swap" else None
            skipped = damage(copy / relative, how, other)
            case = {"file": str(relative), "damage": how}
            if skipped:
                case.update(search="skipped", ask="skipped", serve="skipped", why=skipped)
                cases.append(case)
                continue
            searches = []
            for question in QUESTIONS:
                for spec in SEARCHES:
                    key = f"{question}|{json.dumps(spec, sort_keys=True)}"
                    proc = search_cli(args.rag, copy, question, spec)
                    searches.append((proc, lambda b, key=key: hits(b) == expected[key]))
            case["search"] = cli_outcome(searches, str(relative))
            if llm:
                proc = ask_cli(args.rag, copy, llm)
                case["ask"] = cli_outcome([(proc, lambda b: ask_key(b) == expected["ask"])], str(relative))
            else:
                case["ask"] = "skipped"
            case["serve"] = "skipped" if args.no_serve else serve_case(args.rag, copy, llm, str(relative), expected)
            first_error = next((p.stderr.strip().splitlines()[-1] for p, _ in searches if p.returncode), "")
            case["message"] = first_error
            cases.append(case)
            print(f"{relative} {how}: search {case['search']}, ask {case['ask']}, serve {case['serve']}", flush=True)

    counts: dict[str, int] = {}
    for case in cases:
        for command in ("search", "ask", "serve"):
            outcome = case[command].replace(" at startup", "")
            counts[outcome] = counts.get(outcome, 0) + 1
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "index_files": len(files),
        "cases": len(cases),
        "counts": counts,
        "ask": "run with " + llm.name if llm else "skipped: no small generator",
        "seconds": round(time.time() - started, 1),
        "cases_detail": cases,
    }
    (args.out / "corruption.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [
        "# Corruption suite",
        "",
        f"`eval/reliability/corruption.sh`: {len(files)} files of an index of {documents} paragraphs x 4 damages;"
        f" search, ask and serve on each ({summary['ask']}). {summary['seconds']} s.",
        "",
        "Counts over every (case, command): " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        "",
        "| file | damage | search | ask | serve | first error line (search) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case in cases:
        note = case.get("why") or case.get("message", "")
        note = note.replace(str(args.work), "$WORK").replace("|", "\\|")
        lines.append(
            f"| {case['file']} | {case['damage']} | {case['search']} | {case['ask']} | {case['serve']} | {note} |"
        )
    (args.out / "corruption.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
