"""Shared by the `rag serve` load and bad-input runs: one keep-alive HTTP/1.1 client per thread,
questions from HotpotQA, sentences from STS-B, and reading the server's /health and /metrics. Standard library only."""

import http.client
import json
import os
import subprocess
import time

DEFAULT_QUESTIONS = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "data", "hotpotqa", "hotpot_dev_distractor_sample.json"
)

DEFAULT_SENTENCES = os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "data", "sts", "stsbenchmark", "sts-test.csv"
)


class Client:
    """One persistent connection; reconnects once if the server closed it between requests."""

    def __init__(self, addr, timeout=60.0):
        host, port = addr.rsplit(":", 1)
        self.host, self.port, self.timeout = host, int(port), timeout
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        """Returns (status, headers dict with lower-case names, body bytes)."""
        payload = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=payload, headers=hdrs)
                resp = self.conn.getresponse()
                data = resp.read()
                headers_out = {k.lower(): v for k, v in resp.getheaders()}
                if headers_out.get("connection", "").lower() == "close":
                    self.close()
                return resp.status, headers_out, data
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest):
                self.close()
                if attempt == 1:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def questions(path, limit=2000):
    with open(path) as f:
        records = json.load(f)
    return [r["question"] for r in records[:limit]]


def sentences(path, limit=2000):
    """Both sentences of each STS-B pair (tab-separated, sentences in columns 6 and 7)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            out.extend(c for c in cols[5:7] if c.strip())
            if len(out) >= limit:
                break
    return out[:limit]


def wait_ready(addr, timeout=600.0):
    """/health once it says ready (the server answers 503 while loading)."""
    deadline = time.time() + timeout
    client = Client(addr, timeout=5)
    while True:
        try:
            status, _, body = client.request("GET", "/health")
            if status == 200:
                return json.loads(body)
        except OSError:
            client.close()
        if time.time() > deadline:
            raise SystemExit(f"{addr} never became ready")
        time.sleep(0.5)


def metrics(addr):
    """The /metrics text as {series: value}."""
    _, _, body = Client(addr, timeout=10).request("GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def server_errors(addr):
    """5xx counts by series, leaving out the intended ones: 503 (queue full, loading)."""
    return {k: v for k, v in metrics(addr).items()
            if k.startswith("rag_http_requests_total") and 'status="5' in k and 'status="503"' not in k}


def stop(proc, timeout=5.0):
    """Stops a server started by a run, by its process: SIGTERM, then SIGKILL after `timeout` s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def percentile(values, q):
    """The q-th percentile (0-100) of values, the nearest rank; None for none."""
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]
