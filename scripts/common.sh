# Shared by the project's scripts: sourced, not run.
# Installs the Debian packages the native parts need (faiss and llama.cpp are built from source)
# when any is missing, and points cargo at a target directory.

DEB_PACKAGES=(cmake clang libclang-dev libopenblas-dev liblapack-dev pkg-config)

# The packages of "$@" that are not installed, installed with apt-get ($what says what for).
ensure_debs() { # what, package...
  local what=$1 missing=()
  shift
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing $what: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "could not install ${missing[*]} with apt-get (offline, or no root?)" >&2
    return 1
  fi
}

ensure_build_deps() { ensure_debs "build dependencies" "${DEB_PACKAGES[@]}"; }

# The headless browser and its WebDriver that tests/web.rs drives the page of `rag serve` with.
ensure_browser() { ensure_debs "the browser for the web page test" chromium chromium-driver; }

# llama.cpp's CPU backend cannot pick its kernels at run time: it is compiled for AVX2 unless told
# more. Build it for what this machine has (on the machine of this repository, AVX-512 with VNNI
# evaluates prompts 1.46x faster). A plain `cargo build` without these variables rebuilds
# llama.cpp for AVX2 only, so build through these scripts, or export the same variables.
llama_cpu_flag() { # GGML option, /proc/cpuinfo flag
  if grep -qw "$2" /proc/cpuinfo 2>/dev/null; then export "$1=${!1:-ON}"; fi
}
llama_cpu_flag GGML_AVX512 avx512f
llama_cpu_flag GGML_AVX512_VBMI avx512vbmi
llama_cpu_flag GGML_AVX512_VNNI avx512_vnni
llama_cpu_flag GGML_AVX512_BF16 avx512_bf16
llama_cpu_flag GGML_AVX_VNNI avx_vnni

# Release everywhere: tests run the real encoder, which is far too slow unoptimised, and one
# profile means one build of the native dependencies.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
RAG_BIN=${RAG_BIN:-$CARGO_TARGET_DIR/release/rag}

# The release build, copied to $1/rag (sets RAG): a script's runs keep one binary even if the
# tree is rebuilt while they go on.
private_rag() { # work folder
  cargo build --release --quiet
  mkdir -p "$1"
  RAG=$1/rag
  cp "$CARGO_TARGET_DIR/release/rag" "$RAG"
}
