#!/usr/bin/env python3
"""The HTTP cases of issue 54 ("safe to expose over HTTP", items 17-21) against a given `rag`
binary: each case sends what a hostile page or client would and checks the answer. Servers
listen on 127.0.0.1 only (OS-picked ports), are stopped by their pid, and every request has a
timeout, so the run is bounded (about a minute). Item 22 (head-of-line blocking) is measured by
eval/serving/hol.py. Item 17's refusal to listen beyond loopback without a key is checked by
tests/serve_access.rs, not here: against a binary without the fix it would open a public port.

    eval/reliability/adversarial_http.py --rag ./rag --index DIR --label after \
        --out eval/reliability/adversarial_http/after.json     # exit status 1 if a case fails
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serving"))
from common import stop  # noqa: E402

KEY = "adversarial-key"
TIMEOUT = 10.0


def start(rag, index, extra):
    """`rag serve` on 127.0.0.1:0; (process, "host:port") or (process, None) when it did not
    come up (an unknown flag on an older binary), with its stderr."""
    proc = subprocess.Popen(
        [rag, "serve", "--index", index, "--addr", "127.0.0.1:0", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    log = []
    deadline = time.time() + 120
    addr = None
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.match(r"listening on http://(\S+)", line)
        if m:
            addr = m.group(1)
            break
    if addr is None:
        stop(proc)
        return proc, None, "".join(log)[-300:]
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if request(addr, "GET", "/health")[0] == 200:
                return proc, addr, ""
        except OSError:
            pass
        time.sleep(0.2)
    stop(proc)
    return proc, None, "never ready"


def request(addr, method, path, body=b"", headers=None, host=None, first_only=False):
    """One request on a fresh connection: (status, lower-cased head, body text)."""
    h, port = addr.rsplit(":", 1)
    head = f"{method} {path} HTTP/1.1\r\nHost: {host or addr}\r\nConnection: close\r\n"
    hdrs = dict(headers or {})
    if "Content-Length" not in hdrs:
        hdrs["Content-Length"] = str(len(body))
    for k, v in hdrs.items():
        if v is not None:
            head += f"{k}: {v}\r\n"
    with socket.create_connection((h, int(port)), timeout=TIMEOUT) as s:
        s.sendall((head + "\r\n").encode() + body)
        raw = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
            if first_only and b"\r\n\r\n" in raw:
                break
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head else 0
    return status, head.decode("latin-1").lower(), payload.decode("utf-8", "replace")


JSON = {"Content-Type": "application/json"}
SEARCH = json.dumps({"query": "which city is the capital", "k": 3}).encode()


def runs_folder(root):
    """A runs folder with links out of it, a FIFO and a file that is not JSON."""
    runs = os.path.join(root, "runs")
    secret = os.path.join(root, "secret.json")
    with open(secret, "w") as f:
        f.write('{"secret": "outside the runs folder"}')
    for name in ("passwd", "outside", "fifo", "notjson", "good"):
        os.makedirs(os.path.join(runs, name))
    os.symlink("/etc/passwd", os.path.join(runs, "passwd", "summary.json"))
    os.symlink(secret, os.path.join(runs, "outside", "summary.json"))
    os.mkfifo(os.path.join(runs, "fifo", "summary.json"))
    with open(os.path.join(runs, "notjson", "summary.json"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(runs, "good", "summary.json"), "w") as f:
        f.write('{"cells": []}')
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rag", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    cases = []

    def case(item, name, expected, check):
        try:
            got, ok = check()
        except Exception as e:  # a timeout or a dropped connection is a failed case
            got, ok = f"{type(e).__name__}: {e}", False
        cases.append({"item": item, "case": name, "expected": expected, "got": got, "ok": ok})
        print(f"{'OK  ' if ok else 'FAIL'} {item:>2} {name}: {got}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        runs = runs_folder(tmp)

        # 17: the API key.
        proc, addr, why = start(args.rag, args.index, ["--api-key", KEY, "--runs", runs])
        if addr is None:
            case(17, "server with --api-key starts", "listening", lambda: (why.strip(), False))
        else:
            bearer = {"Authorization": f"Bearer {KEY}", **JSON}
            for name, method, path, body, hdrs, want in [
                ("POST /search without a key", "POST", "/search", SEARCH, JSON, 401),
                ("POST /search with a wrong key", "POST", "/search", SEARCH,
                 {"Authorization": "Bearer nope", **JSON}, 401),
                ("POST /v1/embeddings without a key", "POST", "/v1/embeddings", b'{"input": "a"}', JSON, 401),
                ("GET /metrics without a key", "GET", "/metrics", b"", {}, 401),
                ("GET /runs without a key", "GET", "/runs", b"", {}, 401),
                ("POST /search with the key", "POST", "/search", SEARCH, bearer, 200),
                ("GET / (the page asks for the key) without one", "GET", "/", b"", {}, 200),
            ]:
                case(17, name, want, lambda m=method, p=path, b=body, h=hdrs, w=want: (
                    lambda r: (r[0], r[0] == w))(request(addr, m, p, b, h)))

            def health_without_paths():
                status, _, body = request(addr, "GET", "/health")
                leaks = tmp in body or os.path.abspath(args.index) in body or '"dir"' in body
                return f"{status}, paths {'shown' if leaks else 'left out'}", status == 200 and not leaks

            case(17, "GET /health without a key: open, no paths", "200, paths left out", health_without_paths)
        stop(proc)

        # 18-21 on a server with default flags.
        proc, addr, why = start(args.rag, args.index, ["--runs", runs])
        if addr is None:
            case(18, "server starts", "listening", lambda: (why.strip(), False))
        else:
            port = addr.rsplit(":", 1)[1]
            for host in (f"evil.example:{port}", "attacker.test", f"localhost.evil.example:{port}"):
                case(18, f"GET /health with Host {host.replace(port, 'PORT')}", 421,
                     lambda h=host: (lambda r: (r[0], r[0] == 421))(request(addr, "GET", "/health", host=h)))
            case(18, "POST /search with Host rebind.example", 421,
                 lambda: (lambda r: (r[0], r[0] == 421))(
                     request(addr, "POST", "/search", SEARCH, JSON, host=f"rebind.example:{port}")))
            case(18, "GET /health with Host localhost", 200,
                 lambda: (lambda r: (r[0], r[0] == 200))(request(addr, "GET", "/health", host=f"localhost:{port}")))

            for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
                case(19, f"POST /search with Content-Type {ctype}", 415,
                     lambda c=ctype: (lambda r: (r[0], r[0] == 415))(
                         request(addr, "POST", "/search", SEARCH, {"Content-Type": c})))
            case(19, "POST /v1/embeddings as text/plain", 415,
                 lambda: (lambda r: (r[0], r[0] == 415))(
                     request(addr, "POST", "/v1/embeddings", b'{"input": "a"}', {"Content-Type": "text/plain"})))

            def no_cors(method, body, hdrs):
                status, head, _ = request(addr, method, "/search", body, hdrs)
                leaks = "access-control-" in head
                return f"{status}, {'CORS headers' if leaks else 'no CORS headers'}", not leaks

            origin = {"Origin": "https://evil.example"}
            case(19, "preflight from another origin", "no CORS headers", lambda: no_cors(
                "OPTIONS", b"", {**origin, "Access-Control-Request-Method": "POST",
                                 "Access-Control-Request-Headers": "content-type"}))
            case(19, "POST with Origin of another site", "no CORS headers",
                 lambda: no_cors("POST", SEARCH, {**origin, **JSON}))

            def refused_run(name):
                status, _, body = request(addr, "GET", f"/runs/{name}/summary.json")
                leaked = "root:" in body or "secret" in body
                return f"{status}{', contents served' if leaked else ''}", status == 404 and not leaked

            for name, what in [("passwd", "symlink to /etc/passwd"),
                               ("outside", "symlink to a JSON file outside"),
                               ("notjson", "a file that is not JSON"),
                               ("fifo", "a FIFO (must not hang)")]:
                case(20, f"runs/{name}/summary.json: {what}", 404, lambda n=name: refused_run(n))
            case(20, "runs/good/summary.json", 200,
                 lambda: (lambda r: (r[0], r[0] == 200))(request(addr, "GET", "/runs/good/summary.json")))

            def expect_continue():
                status, head, _ = request(addr, "POST", "/v1/embeddings", b"",
                                          {**JSON, "Content-Length": "100000000", "Expect": "100-continue"},
                                          first_only=True)
                return status, status == 413

            case(21, "Expect: 100-continue with a 100 MB Content-Length", 413, expect_continue)
        stop(proc)

    failed = [c for c in cases if not c["ok"]]
    result = {
        "label": args.label,
        "rag": args.rag,
        "cases": cases,
        "passed": len(cases) - len(failed),
        "failed": len(failed),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"{args.label}: {result['passed']} of {len(cases)} cases OK")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
