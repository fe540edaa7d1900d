#!/usr/bin/env bash
# An index rebuilt under a running server: a 30-record index served, searched at one depth,
# rebuilt in place from 30 other records, searched at another depth; the server's hits must be
# `rag search`'s on the new index, and /health must name the new generation.
# Writes rebuild_under_serve.json here. WORK=/tmp/rag-rebuild by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
OUT=eval/reliability
WORK=${WORK:-/tmp/rag-rebuild}
DATA=${RAG_DATA:-../shared/data}
private_rag "$WORK"
python3 - "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" "$WORK" <<'PY'
import json, sys
records = json.load(open(sys.argv[1]))
json.dump(records[:30], open(f"{sys.argv[2]}/first.json", "w"))
json.dump(records[100:130], open(f"{sys.argv[2]}/second.json", "w"))
PY
INDEX=$WORK/index
rm -rf "$INDEX"
"$RAG" index --corpus "$WORK/first.json" --index "$INDEX" --layers 3,6 >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$RAG" serve --no-llm --index "$INDEX" --addr "127.0.0.1:$PORT" --precision f32 2>"$WORK/serve.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
python3 - "$RAG" "$INDEX" "$PORT" "$WORK/second.json" "$OUT/rebuild_under_serve.json" <<'PY'
import json, subprocess, sys, time, urllib.request
rag, index, port, second, out = sys.argv[1:]
base = f"http://127.0.0.1:{port}"
def get(path):
    with urllib.request.urlopen(base + path, timeout=60) as r:
        return json.load(r)
def search(body):
    req = urllib.request.Request(base + "/search", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
deadline = time.time() + 120
while True:
    try:
        if get("/health")["status"] == "ready":
            break
    except OSError:
        pass
    assert time.time() < deadline, "never ready"
    time.sleep(0.2)
question = "Which film was directed by the director of another film?"
before = get("/health")["index"]["generation"]
status, _ = search({"query": question, "k": 5, "layers": 6})
assert status == 200
subprocess.run([rag, "index", "--corpus", second, "--index", index, "--layers", "3,6"], check=True, capture_output=True)
started = time.time()
while get("/health")["index"]["generation"] == before:
    assert time.time() - started < 60, "the server never switched"
    time.sleep(0.1)
switched = time.time() - started
status, served = search({"query": question, "k": 5, "layers": 3})
cli = json.loads(subprocess.run([rag, "search", question, "--index", index, "--layers", "3", "--k", "5", "--json"], check=True, capture_output=True, text=True).stdout)
same = status == 200 and [(h["id"], h["title"]) for h in served["hits"]] == [(h["id"], h["title"]) for h in cli["hits"]]
result = {
    "generation_before": before,
    "generation_after": get("/health")["index"]["generation"],
    "documents_after": get("/health")["index"]["documents"],
    "seconds_to_switch_after_the_build_returned": round(switched, 2),
    "server_hits_equal_rag_search": same,
    "server_top_hit": served["hits"][0]["title"] if status == 200 else served,
    "cli_top_hit": cli["hits"][0]["title"],
}
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result))
assert same
PY
