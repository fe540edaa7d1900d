//! How a sequence of token states becomes one sentence vector.

use std::path::Path;

use anyhow::{Context, Result};
use candle_core::{DType, Tensor, D};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The state of the first ([CLS]) token: BERT's and the ESE paper's choice.
    Cls,
    /// The mean over real (unpadded) tokens: sentence-transformers' usual choice.
    Mean,
}

#[derive(Deserialize)]
struct SentenceTransformersPooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

impl Pooling {
    /// The pooling a sentence-transformers checkpoint declares in `1_Pooling/config.json`, if any.
    pub fn from_checkpoint(model_dir: &Path) -> Result<Option<Self>> {
        let path = model_dir.join("1_Pooling/config.json");
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let cfg: SentenceTransformersPooling =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(
            match (cfg.pooling_mode_cls_token, cfg.pooling_mode_mean_tokens) {
                (true, _) => Some(Pooling::Cls),
                (false, true) => Some(Pooling::Mean),
                _ => anyhow::bail!(
                    "{}: only CLS and mean pooling are supported",
                    path.display()
                ),
            },
        )
    }

    /// `states` `[batch, seq, hidden]`, `mask` `[batch, seq]` of 0/1 -> `[batch, hidden]`.
    pub fn pool(self, states: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Pooling::Cls => states.narrow(1, 0, 1)?.squeeze(1),
            Pooling::Mean => {
                let mask = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?;
                let summed = states.broadcast_mul(&mask)?.sum(1)?;
                let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
                summed.broadcast_div(&counts)
            }
        }
    }

    /// [`pool`](Self::pool) over packed rows: `state` `[tokens, hidden]` holds sequence `b` in
    /// rows `starts[b]..starts[b] + lengths[b]`. A plain loop: candle's sum over a middle
    /// dimension walks every element through a strided index.
    pub fn pool_packed(
        self,
        state: &Tensor,
        starts: &[u32],
        lengths: &[u32],
    ) -> candle_core::Result<Tensor> {
        let (_, hidden) = state.dims2()?;
        if self == Pooling::Cls {
            let firsts = Tensor::new(starts, state.device())?;
            return state.index_select(&firsts, 0);
        }
        let rows = state.flatten_all()?.to_vec1::<f32>()?;
        let mut pooled = vec![0f32; starts.len() * hidden];
        for ((out, &start), &len) in pooled.chunks_exact_mut(hidden).zip(starts).zip(lengths) {
            let (start, len) = (start as usize, len as usize);
            for row in rows[start * hidden..(start + len) * hidden].chunks_exact(hidden) {
                out.iter_mut().zip(row).for_each(|(o, x)| *o += x);
            }
            let scale = 1.0 / len.max(1) as f32;
            out.iter_mut().for_each(|o| *o *= scale);
        }
        Tensor::from_vec(pooled, (starts.len(), hidden), state.device())
    }
}

impl std::fmt::Display for Pooling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
        })
    }
}
