//! Reading a Hugging Face / sentence-transformers checkpoint directory: its weights file, its
//! `config.json` (checked to be a BERT-style encoder), its tokenizer, and the optional
//! sentence-transformers settings beside them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationParams};

use super::Config;
use crate::files;

#[derive(Deserialize, Default)]
pub(super) struct SentenceBertConfig {
    pub max_seq_length: Option<usize>,
}

#[derive(Deserialize, Default)]
pub(super) struct SentenceTransformersConfig {
    #[serde(default)]
    pub prompts: std::collections::HashMap<String, String>,
}

pub(super) fn read_optional_json<T: serde::de::DeserializeOwned + Default>(
    path: &Path,
) -> Result<T> {
    if path.exists() {
        files::read_json(path)
    } else {
        Ok(T::default())
    }
}

/// The weights file of a checkpoint directory.
pub fn weights_file(model_dir: &Path) -> Result<PathBuf> {
    ["model.safetensors", "pytorch_model.bin"]
        .iter()
        .map(|name| model_dir.join(name))
        .find(|p| p.exists())
        .ok_or_else(|| {
            anyhow!(
                "{}: no model.safetensors or pytorch_model.bin (is this a Hugging Face model directory?)",
                model_dir.display()
            )
        })
}

/// A checkpoint's `config.json`, checked to describe a BERT-style encoder.
pub fn read_config(model_dir: &Path) -> Result<Config> {
    let config: Config = files::read_json(&model_dir.join("config.json"))?;
    if let Some(kind) = config.model_type.as_deref() {
        if !["bert", "roberta", "xlm-roberta"].contains(&kind) && !kind.contains("bert") {
            bail!(
                "{}: model_type '{kind}' is not a BERT encoder",
                model_dir.display()
            );
        }
    }
    Ok(config)
}

/// The checkpoint's tokenizer, truncating to `max_length` tokens and never padding (batches
/// are padded to their own longest member).
pub fn load_tokenizer(model_dir: &Path, max_length: usize) -> Result<Tokenizer> {
    let tokenizer_path = model_dir.join("tokenizer.json");
    let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
        .map_err(|e| anyhow!("loading {}: {e}", tokenizer_path.display()))?;
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length,
            ..Default::default()
        }))
        .map_err(|e| anyhow!("configuring truncation: {e}"))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}
