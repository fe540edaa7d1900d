//! Helpers shared by the integration tests: where the real default model and the shared data
//! are, and a loud skip when they are not there.

#![allow(dead_code)]

use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The default encoder, if `scripts/fetch-models.sh encoder` has put it in place.
pub fn default_model() -> Option<PathBuf> {
    let dir = std::env::var_os("RAG_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("data/models/all-MiniLM-L6-v2"));
    dir.join("model.safetensors").exists().then_some(dir)
}

/// The shared datasets (`$RAG_DATA`, else `../shared/data` beside the checkout).
pub fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("RAG_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data"));
    dir.join("hotpotqa").is_dir().then_some(dir)
}

pub fn skip(test: &str, why: &str) {
    eprintln!("SKIPPED {test}: {why}");
}

/// Runs the `rag` binary built for these tests.
pub fn rag() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_rag"))
}

/// The default generator, if `scripts/fetch-models.sh llm` has put it in place.
pub fn default_llm() -> Option<PathBuf> {
    let path = std::env::var_os("RAG_LLM")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"));
    path.is_file().then_some(path)
}
