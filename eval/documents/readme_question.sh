#!/usr/bin/env bash
# Issue 55, item 1's target: a folder of this repository's own Markdown plus HotpotQA sample
# paragraphs as one text file each (named by title) indexes with `rag index --corpus FOLDER`,
# and `rag ask` answers a question about this repository's README from it, citing the file.
# Writes eval/documents/readme_question.md (the commands, the build summary, the answer and
# its sources).
#   [RAG=./rag] [MODEL=data/models/all-MiniLM-L6-v2] [PARAGRAPHS=300] [WORK=dir] eval/documents/readme_question.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RAG=${RAG:-./rag}
MODEL=${MODEL:-data/models/all-MiniLM-L6-v2}
PARAGRAPHS=${PARAGRAPHS:-300}
SAMPLE=${SAMPLE:-../shared/data/hotpotqa/hotpot_dev_distractor_sample.json}
RESULT=eval/documents/readme_question.md
QUESTION=${QUESTION:-"How long does the first run of scripts/setup.sh take on 2 cores?"}
# WORK: a scratch folder (default a fresh one in /tmp, removed at the end).
# REUSE=1 with WORK writes the result from a finished run's files there, without rebuilding.
if [ -n "${WORK:-}" ] && [ -n "${REUSE:-}" ]; then work=$WORK
elif [ -n "${WORK:-}" ]; then work=$WORK; rm -rf "$work"; mkdir -p "$work"; else
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
markdown() { if [ -n "${ALL_MARKDOWN:-}" ]; then git ls-files '*.md'; else git ls-files '*.md' | grep -v '^eval/'; fi; }
folder="$work/corpus"
index="$work/index"
ask_cmd=("$RAG" ask "$QUESTION" --index "$index" --model "$MODEL")
search_cmd=("$RAG" search "$QUESTION" --index "$index" --model "$MODEL" --k 3 --json)
if [ -z "${REUSE:-}" ]; then
mkdir -p "$folder/repo" "$folder/hotpotqa"
# The repository's own Markdown, its folders kept; eval/'s result pages (200 files, 440 KB)
# left out by default for time on this loaded machine (ALL_MARKDOWN=1 takes them too).
markdown | while read -r f; do mkdir -p "$folder/repo/$(dirname "$f")"; cp "$f" "$folder/repo/$f"; done
# The first PARAGRAPHS distinct paragraphs of the sample, one text file each, named by title.
python3 - "$SAMPLE" "$folder/hotpotqa" "$PARAGRAPHS" <<'PY'
import json, os, sys
sample, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = set()
for record in json.load(open(sample)):
    for title, sentences in record["context"]:
        if title in seen or len(seen) >= limit:
            continue
        seen.add(title)
        # A file name cannot hold "/", and a leading "." would hide it.
        name = title.replace("/", "\u2215").lstrip(".") or "untitled"
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write("".join(sentences).strip() + "\n")
PY
build_cmd=("$RAG" index --corpus "$folder" --index "$index" --model "$MODEL" --layers 6 --json)
"${build_cmd[@]}" > "$work/build.json"
"${ask_cmd[@]}" > "$work/ask.txt" 2> "$work/ask.err" || { cat "$work/ask.err"; exit 1; }
"${search_cmd[@]}" > "$work/search.json"
fi
{
  echo "# A folder of this repository's Markdown and HotpotQA paragraphs as text files"
  echo
  echo "Produced by \`eval/documents/readme_question.sh\` on $(date -u +%Y-%m-%d) ($(nproc) cores,"
  echo "$(grep -o -w 'avx2\|avx512f\|avx512_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')CPU flags; a shared, loaded machine: times are indicative)."
  echo "The folder: $(markdown | wc -l) Markdown files of the repository under \`repo/\` ($(markdown | tr '\n' ' ')), and the"
  echo "first $PARAGRAPHS distinct paragraphs of \`$(basename "$SAMPLE")\` as one \`.txt\` each under \`hotpotqa/\`."
  echo
  echo '```sh'
  echo "rag index --corpus CORPUS --index INDEX --model $MODEL --layers 6 --json"
  echo '```'
  echo
  echo "Build summary:"
  echo
  echo '```json'
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(json.dumps({k: s[k] for k in ("documents","files","skipped_files","ignored_files","duplicates","encode_seconds","total_seconds")}, indent=2))' "$work/build.json"
  echo '```'
  echo
  echo '```sh'
  echo "rag ask \"$QUESTION\" --index INDEX --model $MODEL"
  echo '```'
  echo
  echo '```'
  sed "s#$work/##g" "$work/ask.txt"
  echo '```'
  echo
  echo "The top 3 of \`rag search\` for the same question (dense), with their sources:"
  echo
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
for h in r["hits"]:
    s = h.get("source") or {}
    path = s.get("path", "").replace(sys.argv[2] + "/", "")
    print(f"- {h['"'"'rank'"'"']}. {h['"'"'title'"'"']} ({h['"'"'score'"'"']:.3f}): `{path}` characters {s.get('"'"'start'"'"')}-{s.get('"'"'end'"'"')}")
' "$work/search.json" "$work"
} > "$RESULT"
cat "$RESULT"
