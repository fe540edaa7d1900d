#!/usr/bin/env bash
# Issue 55 item 2's targets on the 19k-paragraph sample index, on a copy of it (the original is
# never touched):
#   1. add 100 paragraphs (`rag index --add`), against the time of a full build of the index;
#   2. remove 100 titles (`rag index --remove` x 100);
#   3. the same 100 added again to the updated index (its files now sealed, as a live index's are).
# Writes eval/documents/updates.json. A full build for the comparison is run only with
# FULL_BUILD=1 (7-11 minutes here); otherwise the recorded one is used (REFERENCE_BUILD_S).
#
#   eval/documents/updates.sh        # RAG=./rag SOURCE=/work/main/index/default
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
SOURCE=${SOURCE:-index/default}
OUT=${OUT:-eval/documents/updates.json}
WORK=$(mktemp -d /tmp/rag-updates.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
cp -r "$SOURCE" "$WORK/index"
# 100 paragraphs the index does not hold: the first 100 of its own, retitled and extended, so
# that each is encoded as a new document of the same length as the corpus's.
python3 - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
with open(f"{work}/index/docs.jsonl") as docs, open(f"{work}/new.jsonl", "w") as out:
    for i, line in zip(range(100), docs):
        doc = json.loads(line)
        out.write(json.dumps({"title": doc["title"] + " (revised)", "text": doc["text"] + " Revised."}) + "\n")
with open(f"{work}/index/docs.jsonl") as docs, open(f"{work}/remove.args", "w") as out:
    for i, line in zip(range(1000, 1100), docs):
        out.write("--remove\0" + json.loads(line)["title"] + "\0")
EOF

seconds() { python3 -c 'import sys,time; print(time.time())'; }
run() { # label, args...: runs `rag index` with --json, prints its wall time and summary
  local label=$1; shift
  local start end
  start=$(seconds)
  nice "$RAG" index --index "$WORK/index" --json "$@" >"$WORK/$label.json"
  end=$(seconds)
  python3 -c "print(round($end - $start, 3))" >"$WORK/$label.wall"
}

run add_copied --add "$WORK/new.jsonl"
mapfile -d '' remove_args <"$WORK/remove.args"
run remove "${remove_args[@]}"
python3 - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
with open(f"{work}/new.jsonl") as f, open(f"{work}/again.jsonl", "w") as out:
    for line in f:
        doc = json.loads(line)
        out.write(json.dumps({"title": doc["title"] + " again", "text": doc["text"]}) + "\n")
EOF
run add_sealed --add "$WORK/again.jsonl"

full_build=""
if [ "${FULL_BUILD:-0}" = 1 ]; then
  start=$(seconds)
  nice "$RAG" index --index "$WORK/full" --layers 1,3,6 --json >"$WORK/full.json"
  end=$(seconds)
  full_build=$(python3 -c "print(round($end - $start, 3))")
fi

python3 - "$WORK" "$OUT" "${full_build:-}" "${REFERENCE_BUILD_S:-420}" "$LOAD_BEFORE" <<'EOF'
import json, platform, sys, time
work, out, full, reference, load_before = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
def step(label):
    summary = json.load(open(f"{work}/{label}.json"))
    return {"wall_seconds": float(open(f"{work}/{label}.wall").read()), "summary": summary}
flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
build = float(full) if full else reference
steps = {label: step(label) for label in ["add_copied", "remove", "add_sealed"]}
result = {
    "date": time.strftime("%Y-%m-%d"),
    "machine": f"{platform.machine()}, {len([l for l in open('/proc/cpuinfo') if l.startswith('processor')])} cores, "
               + ("AVX-512" if "avx512f" in flags else "AVX2") + (" + FMA" if "fma" in flags else "")
               + f"; 1-minute load {load_before} before the run, {open('/proc/loadavg').read().split()[0]} after",
    "index": "19,028 paragraphs, layers 1,3,6 x 384 (index/default), copied",
    "full_build_seconds": build,
    "full_build_measured": bool(full),
    "steps": steps,
    "add_100_share_of_full_build": round(steps["add_copied"]["wall_seconds"] / build, 4),
    "add_100_sealed_share_of_full_build": round(steps["add_sealed"]["wall_seconds"] / build, 4),
    "remove_100_seconds": steps["remove"]["wall_seconds"],
}
json.dump(result, open(out, "w"), indent=2)
print(json.dumps({k: v for k, v in result.items() if k != "steps"}, indent=2))
EOF
