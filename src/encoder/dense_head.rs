//! A sentence-transformers `Dense` module after pooling (`N_Dense/` in the checkpoint): how a
//! model trained with `rag train --mode pooler` maps the `D`-wide CLS state to `d` dimensions
//! (Wang et al., "On the Dimensionality of Sentence Embeddings").

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use serde::{Deserialize, Serialize};

use crate::files;

pub const TANH: &str = "torch.nn.modules.activation.Tanh";
pub const IDENTITY: &str = "torch.nn.modules.linear.Identity";

/// `N_Dense/config.json` as sentence-transformers writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseConfig {
    pub in_features: usize,
    pub out_features: usize,
    #[serde(default = "default_bias")]
    pub bias: bool,
    #[serde(default = "default_activation")]
    pub activation_function: String,
}

fn default_bias() -> bool {
    true
}
fn default_activation() -> String {
    TANH.to_string()
}

pub struct DenseHead {
    pub config: DenseConfig,
    linear: Linear,
    tanh: bool,
}

#[derive(Deserialize)]
struct ModuleEntry {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// The `Dense` module directory a checkpoint declares in `modules.json`, if any.
pub fn find(model_dir: &Path) -> Result<Option<PathBuf>> {
    let modules = model_dir.join("modules.json");
    if !modules.exists() {
        return Ok(None);
    }
    let entries: Vec<ModuleEntry> = files::read_json(&modules)?;
    Ok(entries
        .into_iter()
        .find(|m| m.kind.ends_with(".Dense"))
        .map(|m| model_dir.join(m.path)))
}

impl DenseHead {
    /// Builds the head from `vb` (`linear.weight`, `linear.bias`).
    pub fn load(vb: VarBuilder, config: &DenseConfig) -> candle_core::Result<Self> {
        let tanh = match config.activation_function.as_str() {
            TANH => true,
            IDENTITY => false,
            other => {
                candle_core::bail!("Dense activation {other} is not supported (Tanh or Identity)")
            }
        };
        let vb = vb.pp("linear");
        let weight = vb.get((config.out_features, config.in_features), "weight")?;
        let bias = if config.bias {
            Some(vb.get(config.out_features, "bias")?)
        } else {
            None
        };
        Ok(Self {
            config: config.clone(),
            linear: Linear::new(weight, bias),
            tanh,
        })
    }

    /// Reads a saved `N_Dense/` directory.
    pub fn read(dir: &Path, device: &Device) -> Result<Self> {
        let config: DenseConfig = files::read_json(&dir.join("config.json"))?;
        let weights = dir.join("model.safetensors");
        if !weights.exists() {
            bail!(
                "{}: missing (only safetensors Dense modules are supported)",
                weights.display()
            );
        }
        let tensors = candle_core::safetensors::load(&weights, device)
            .with_context(|| format!("reading {}", weights.display()))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, device);
        Self::load(vb, &config).with_context(|| format!("loading {}", dir.display()))
    }

    pub fn forward(&self, pooled: &Tensor) -> candle_core::Result<Tensor> {
        let out = self.linear.forward(pooled)?;
        if self.tanh {
            out.tanh()
        } else {
            Ok(out)
        }
    }
}
