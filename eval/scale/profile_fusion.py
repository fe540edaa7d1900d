#!/usr/bin/env python3
"""Where a warm fusion two-hop search spends its time: one `rag serve` of INDEX, one warm-up
search, then `perf record -g` of the server over 40 two-hop searches (distractor questions
200-239), and perf's report by symbol (top 40 lines) on standard output.

    eval/scale/profile_fusion.py RAG INDEX      # needs perf; writes /tmp/perf-fusion.data
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serving"))
from common import DEFAULT_QUESTIONS, Client, questions, stop, wait_ready  # noqa: E402

rag, index = sys.argv[1], sys.argv[2]
proc = subprocess.Popen([rag, "serve", "--index", index, "--addr", "127.0.0.1:0", "--no-llm"],
                        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
try:
    addr = None
    for line in proc.stderr:
        m = re.search(r"listening on http://(\S+)", line)
        if m:
            addr = m.group(1)
            break
    if addr is None:
        sys.exit("rag serve did not start")
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
