#!/usr/bin/env python3
"""Where a warm fusion two-hop search spends its time: one `rag serve` of INDEX, one warm-up
search, then `perf record -g` of the server over 40 two-hop searches (distractor questions
200-239), and perf's report by symbol (top 40 lines) on standard output.

    eval/scale/profile_fusion.py RAG INDEX      # needs perf; writes /tmp/perf-fusion.data
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "serving")]
from common import DEFAULT_QUESTIONS, Client, questions, stop, wait_ready  # noqa: E402
from serve_probe import start  # noqa: E402

rag, index = sys.argv[1], sys.argv[2]
proc, addr = start(rag, index)
try:
    wait_ready(addr, timeout=600)
    client = Client(addr, timeout=600)
    asked = questions(DEFAULT_QUESTIONS)[200:240]
    client.request("POST", "/search", {"query": asked[0], "mode": "fusion", "hops": 2})
    perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", str(proc.pid), "-o", "/tmp/perf-fusion.data"],
                            stderr=subprocess.DEVNULL)
    time.sleep(1)
    started = time.time()
    for q in asked:
        client.request("POST", "/search", {"query": q, "k": 5, "mode": "fusion", "hops": 2})
    print(f"{len(asked)} two-hop searches in {time.time() - started:.1f} s")
    perf.send_signal(2)
    perf.wait()
finally:
    stop(proc, timeout=30)
report = subprocess.run(["perf", "report", "-i", "/tmp/perf-fusion.data", "--no-children", "--sort", "symbol", "--stdio"],
                        capture_output=True, text=True).stdout
print("\n".join([l for l in report.splitlines() if "%" in l and not l.lstrip().startswith(("|", "-"))][:40]))
