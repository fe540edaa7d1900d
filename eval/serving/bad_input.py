#!/usr/bin/env python3
"""Sends `rag serve` a list of malformed requests and checks every answer: the expected 4xx (or
the 503 that says no generator is loaded), a JSON body `{"error": {"message", "type"}}`, a
response on every connection (none dropped), and afterwards a healthy server with no 5xx
counted. Also drops a streaming /ask mid-answer when a generator is loaded. Standard library only.

    eval/serving/bad_input.py --addr 127.0.0.1:8080      # exit status 1 if any check fails
"""

import argparse
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import server_errors, wait_ready  # noqa: E402


def raw_request(addr, method, path, body=b"", timeout=30.0):
    """Sends one request on a fresh connection; returns (status, head, body) or raises if the
    server closed the connection without answering."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        s.sendall(head)
        try:
            s.sendall(body)
        except OSError:
            pass  # refused before reading it all (413); the answer is still there to read
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    if b"\r\n\r\n" not in raw:
        raise ConnectionError(f"no answer (got {len(raw)} bytes)")
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, head.decode("latin-1"), payload


def cases(health):
    """(name, method, path, body bytes, expected status, expected error type)."""
    index, encoder = health["index"], health["models"]["encoder"]
    too_many_tokens = " ".join(["river"] * (encoder["max_tokens"] + 10))
    j = lambda v: json.dumps(v).encode()  # noqa: E731
    bad, inv = 400, "invalid_request_error"
    ask_status, ask_type = (400, inv)
    out = [
        ("search: not JSON", "POST", "/search", b"{", bad, inv),
        ("search: empty body", "POST", "/search", b"", bad, inv),
        ("search: invalid UTF-8", "POST", "/search", b'{"query": "\xff\xfe"}', bad, inv),
        ("search: JSON array", "POST", "/search", b"[1, 2]", bad, inv),
        ("search: missing query", "POST", "/search", j({"k": 3}), bad, inv),
        ("search: query not a string", "POST", "/search", j({"query": 5}), bad, inv),
        ("search: query null", "POST", "/search", j({"query": None}), bad, inv),
        ("search: empty query", "POST", "/search", j({"query": ""}), bad, inv),
        ("search: blank query", "POST", "/search", j({"query": " \n\t "}), bad, inv),
        ("search: query over the byte limit", "POST", "/search", j({"query": "x" * 5000}), bad, inv),
        ("search: query over the token limit", "POST", "/search", j({"query": too_many_tokens}), bad, inv),
        ("search: k = 0", "POST", "/search", j({"query": "who?", "k": 0}), bad, inv),
        ("search: k negative", "POST", "/search", j({"query": "who?", "k": -1}), bad, inv),
        ("search: k huge", "POST", "/search", j({"query": "who?", "k": 10**9}), bad, inv),
        ("search: k a string", "POST", "/search", j({"query": "who?", "k": "5"}), bad, inv),
        ("search: k a float", "POST", "/search", j({"query": "who?", "k": 2.5}), bad, inv),
        ("search: dim 0", "POST", "/search", j({"query": "who?", "dim": 0}), bad, inv),
        ("search: dim negative", "POST", "/search", j({"query": "who?", "dim": -8}), bad, inv),
        ("search: dim over the index", "POST", "/search", j({"query": "who?", "dim": index["stored_dim"] + 1}), bad, inv),
        ("search: layers not stored", "POST", "/search", j({"query": "who?", "layers": max(index["layers"]) + 1}), bad, inv),
        ("search: layers 0", "POST", "/search", j({"query": "who?", "layers": 0}), bad, inv),
        ("search: unknown mode", "POST", "/search", j({"query": "who?", "mode": "fuzzy"}), bad, inv),
        ("search: mode wrong type", "POST", "/search", j({"query": "who?", "mode": 1}), bad, inv),
        ("search: unknown field", "POST", "/search", j({"query": "who?", "top": 3}), bad, inv),
        ("search: body over the size limit", "POST", "/search", j({"query": "x" * (2 << 20)}), 413, "request_too_large"),
        ("embeddings: missing input", "POST", "/v1/embeddings", j({"model": "x"}), bad, inv),
        ("embeddings: empty list", "POST", "/v1/embeddings", j({"input": []}), bad, inv),
        ("embeddings: token ids", "POST", "/v1/embeddings", j({"input": [101, 2023]}), bad, inv),
        ("embeddings: nested list", "POST", "/v1/embeddings", j({"input": [["a"]]}), bad, inv),
        ("embeddings: number", "POST", "/v1/embeddings", j({"input": 3}), bad, inv),
        ("embeddings: empty string", "POST", "/v1/embeddings", j({"input": ""}), bad, inv),
        ("embeddings: one empty of two", "POST", "/v1/embeddings", j({"input": ["ok", ""]}), bad, inv),
        ("embeddings: text over the byte limit", "POST", "/v1/embeddings", j({"input": "x" * 9000}), bad, inv),
        ("embeddings: text over the token limit", "POST", "/v1/embeddings", j({"input": too_many_tokens}), bad, inv),
        ("embeddings: too many inputs", "POST", "/v1/embeddings", j({"input": ["a"] * 300}), bad, inv),
        ("embeddings: dimensions 0", "POST", "/v1/embeddings", j({"input": "a", "dimensions": 0}), bad, inv),
        ("embeddings: dimensions over the width", "POST", "/v1/embeddings", j({"input": "a", "dimensions": encoder["hidden_size"] + 1}), bad, inv),
        ("embeddings: dimensions a string", "POST", "/v1/embeddings", j({"input": "a", "dimensions": "64"}), bad, inv),
        ("embeddings: layers over the depth", "POST", "/v1/embeddings", j({"input": "a", "layers": encoder["layers"] + 1}), bad, inv),
        ("embeddings: base64", "POST", "/v1/embeddings", j({"input": "a", "encoding_format": "base64"}), bad, inv),
        ("ask: missing question", "POST", "/ask", j({}), ask_status, ask_type),
        ("ask: empty question", "POST", "/ask", j({"question": ""}), ask_status, ask_type),
        ("ask: top_k 0", "POST", "/ask", j({"question": "who?", "top_k": 0}), ask_status, ask_type),
        ("ask: stream not a bool", "POST", "/ask", j({"question": "who?", "stream": "yes"}), ask_status, ask_type),
        ("ask: unknown mode", "POST", "/ask", j({"question": "who?", "mode": "x"}), ask_status, ask_type),
        ("unknown route", "GET", "/v2/everything", b"", 404, "not_found"),
        ("wrong method", "GET", "/search", b"", 405, "method_not_allowed"),
        ("wrong method on health", "POST", "/health", b"{}", 405, "method_not_allowed"),
    ]
    if not health["models"]["generator"]:
        out.append(("ask without a generator", "POST", "/ask", j({"question": "who?"}), 503, "unavailable"))
    return out


def check(addr, case):
    name, method, path, body, want_status, want_type = case
    try:
        status, head, payload = raw_request(addr, method, path, body)
    except (OSError, ConnectionError) as e:
        return f"connection dropped: {e}"
    if status != want_status:
        return f"status {status}, expected {want_status}: {payload[:200]!r}"
    try:
        error = json.loads(payload)["error"]
    except (ValueError, KeyError, TypeError):
        return f"not a JSON error body: {payload[:200]!r}"
    if error.get("type") != want_type or not isinstance(error.get("message"), str) or not error["message"]:
        return f"error body {error}, expected type {want_type}"
    return None


def disconnect_mid_stream(addr):
    """Starts a streamed answer, reads one token, hangs up; the server must stay healthy and its
    token counter must stop growing (generation stopped)."""
    host, port = addr.rsplit(":", 1)
    body = json.dumps({"question": "Who wrote the longest novel ever published?", "stream": True}).encode()
    with socket.create_connection((host, int(port)), timeout=120) as s:
        s.sendall((f"POST /ask HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        seen = b""
        while b"event: token" not in seen:
            chunk = s.recv(4096)
            if not chunk:
                return "the stream ended before its first token"
            seen += chunk
    from common import metrics
    time.sleep(1.0)
    before = metrics(addr).get("rag_tokens_generated_total", 0)
    time.sleep(2.0)
    after = metrics(addr).get("rag_tokens_generated_total", 0)
    return None if after == before else f"tokens kept coming after the client left ({before} -> {after})"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="127.0.0.1:8080")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "default", "bad_input.json"))
    args = p.parse_args()
    health = wait_ready(args.addr)
    results = []
    for case in cases(health):
        problem = check(args.addr, case)
        results.append({"case": case[0], "expected": case[4], "ok": problem is None, "problem": problem})
        print(f"{'ok  ' if problem is None else 'FAIL'} {case[0]}" + (f": {problem}" if problem else ""))
    if health["models"]["generator"]:
        problem = disconnect_mid_stream(args.addr)
        results.append({"case": "ask: client leaves mid-stream", "ok": problem is None, "problem": problem})
        print(f"{'ok  ' if problem is None else 'FAIL'} ask: client leaves mid-stream" + (f": {problem}" if problem else ""))
    healthy = raw_request(args.addr, "GET", "/health")[0] == 200
    errors = server_errors(args.addr)
    failed = [r for r in results if not r["ok"]]
    report = {"addr": args.addr, "cases": len(results), "failed": len(failed), "healthy_after": healthy,
              "server_5xx": errors, "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{len(results) - len(failed)}/{len(results)} cases as expected; healthy after: {healthy}; "
          f"5xx other than 503: {errors or 'none'}; report in {args.out}")
    sys.exit(0 if not failed and healthy and not errors else 1)


if __name__ == "__main__":
    main()
