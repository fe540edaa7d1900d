#!/usr/bin/env bash
# Where one encoding batch's time goes, op by op: 64 distractor paragraphs (`{title}: {text}`,
# max length 256) encoded as one batch ROUNDS times (default 5) after a warm-up, each op's wall
# time summed (examples/encode_profile.rs, src/encoder/profile.rs), with the CPU's flags.
# RAG_MAX_ISA=avx2 profiles the AVX2 path on an AVX-512 machine (recorded as max_isa).
#   [RAG_MAX_ISA=avx2] [ROUNDS=5] [PRECISION=f32] eval/encode/profile.sh LABEL
# Writes eval/encode/profile-LABEL.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
LABEL=${1:?usage: profile.sh LABEL}
DATA=${RAG_DATA:-../shared/data}
MODEL=${RAG_MODEL:-data/models/all-MiniLM-L6-v2}
OUT=eval/encode
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
nice cargo build --release -q --example encode_profile
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512[a-z_0-9]*|avx_vnni|amx[a-z_0-9]*)$' | sort | tr '\n' ' ')
nice "$CARGO_TARGET_DIR/release/examples/encode_profile" "$DATA/hotpotqa/hotpot_dev_distractor_sample.json" \
  "$MODEL" 64 "${ROUNDS:-5}" "${PRECISION:-f32}" 6 > "$OUT/profile-$LABEL.raw.json"
python3 - "$OUT" "$LABEL" "$FLAGS" <<'PY'
import json, sys, datetime, os
out, label, flags = sys.argv[1], sys.argv[2], sys.argv[3].split()
raw = f"{out}/profile-{label}.raw.json"
r = json.load(open(raw))
r["date"] = datetime.datetime.utcnow().isoformat(timespec="minutes") + "Z"
r["cpu_flags"] = flags
r["max_isa"] = os.environ.get("RAG_MAX_ISA", "")
r["cpu"] = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
json.dump(r, open(f"{out}/profile-{label}.json", "w"), indent=1)
import os; os.remove(raw)
rows = [f"| {o['op']} | {o['calls_per_batch']:.0f} | {1000 * o['seconds_per_batch']:.1f} | {100 * o['share']:.1f}% |"
        for o in r["ops"]]
md = [f"# Encoding profile: {label}", "",
      f"{r['cpu']}; flags {' '.join(flags)}{'; RAG_MAX_ISA=' + r['max_isa'] if r['max_isa'] else ''}; {r['threads']} threads; {r['precision']}, {r['layers']} layers; "
      f"one batch of {r['paragraphs']} paragraphs ({r['tokens']} tokens), mean of {r['rounds']} rounds: "
      f"{1000 * r['batch_seconds']:.0f} ms per batch ({r['paragraphs'] / r['batch_seconds']:.1f} paragraphs/s).", "",
      "| op | calls | ms per batch | share |", "| --- | ---: | ---: | ---: |", *rows, "",
      f"Unattributed (rayon hand-offs, tensor allocation, the copy out): "
      f"{100 * (1 - sum(o['share'] for o in r['ops'])):.1f}%."]
open(f"{out}/profile-{label}.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
