//! Sentence encoder: a BERT checkpoint in the Hugging Face layout, run to a chosen depth,
//! pooled, and truncated to a chosen number of dimensions (the ESE way).

mod batching;
pub mod bert;
mod checkpoint;
pub mod cpu;
pub mod dense_head;
mod gemm;
mod head;
mod kernels;
pub mod pooling;
pub mod profile;
mod simd;
pub mod tiny;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use rayon::prelude::*;
use tokenizers::Tokenizer;

pub use batching::{length_batches, BatchInputs};
pub use bert::{BertModel, Config};
pub use checkpoint::{load_tokenizer, read_config, weights_file};
use checkpoint::{read_optional_json, SentenceBertConfig, SentenceTransformersConfig};
pub use dense_head::DenseHead;
pub use gemm::Precision;
pub use pooling::Pooling;

use crate::files;
use crate::vectors::Matrix;

/// Choices that override what the checkpoint itself declares.
#[derive(Debug, Clone, Default)]
pub struct EncoderOptions {
    pub pooling: Option<Pooling>,
    pub max_length: Option<usize>,
    /// Prepended to questions (never to documents), e.g. bge's retrieval instruction.
    pub query_prefix: Option<String>,
    /// Load only this many transformer layers; deeper ones are never read.
    pub max_layers: Option<usize>,
    /// Largest number of sequences in one forward pass.
    pub batch_size: Option<usize>,
    pub precision: Precision,
}

pub const DEFAULT_BATCH_SIZE: usize = 64;

pub struct Encoder {
    model: BertModel,
    /// A trained projection after pooling (`rag train --mode pooler`), when the checkpoint has one.
    head: Option<DenseHead>,
    tokenizer: Tokenizer,
    pub pooling: Pooling,
    pub max_length: usize,
    pub query_prefix: String,
    pub batch_size: usize,
    pub precision: Precision,
    pub model_dir: PathBuf,
    weights_path: PathBuf,
}

impl Encoder {
    pub fn load(model_dir: &Path, options: &EncoderOptions) -> Result<Self> {
        // Model directories are installed whole (`files::install_dir`, as `rag train` writes
        // them); one cut off between its two renames left the previous model as `<dir>.old`.
        files::recover_interrupted_install(model_dir)?;
        if !model_dir.is_dir() {
            bail!(
                "model directory {} does not exist (run scripts/fetch-models.sh encoder, or pass --model DIR)",
                model_dir.display()
            );
        }
        let config = read_config(model_dir)?;
        let st_config: SentenceBertConfig =
            read_optional_json(&model_dir.join("sentence_bert_config.json"))?;
        let prompts: SentenceTransformersConfig =
            read_optional_json(&model_dir.join("config_sentence_transformers.json"))?;
        let pooling = match options.pooling {
            Some(p) => p,
            None => Pooling::from_checkpoint(model_dir)?.unwrap_or(Pooling::Cls),
        };
        let positions = config.max_position_embeddings;
        let max_length = match options.max_length {
            // 0 would turn the tokenizer's truncation off, and texts beyond the model's
            // positions would then fail to encode.
            Some(n) if n == 0 || n > positions => bail!(
                "--max-length must be between 1 and {positions}, the positions {} has (got {n})",
                model_dir.display()
            ),
            Some(n) => n,
            None => st_config
                .max_seq_length
                .unwrap_or(512)
                .min(positions)
                .max(1),
        };
        let query_prefix = options
            .query_prefix
            .clone()
            .or_else(|| prompts.prompts.get("query").cloned())
            .unwrap_or_default();

        let tokenizer = load_tokenizer(model_dir, max_length)?;

        let weights_path = weights_file(model_dir)?;
        let device = Device::Cpu;
        let vb = if weights_path.extension().is_some_and(|e| e == "safetensors") {
            // SAFETY: the file is memory-mapped read-only; rag never writes model files while
            // an encoder holds them.
            unsafe { VarBuilder::from_mmaped_safetensors(&[&weights_path], DType::F32, &device) }
        } else {
            VarBuilder::from_pth(&weights_path, DType::F32, &device)
        }
        .with_context(|| format!("opening {}", weights_path.display()))?;
        let mut model = BertModel::load(vb, &config, options.max_layers)
            .with_context(|| format!("loading BERT weights from {}", weights_path.display()))?;
        let precision = options.precision.or_fallback();
        model.prepare_inference(precision)?;
        let head = dense_head::find(model_dir)?
            .map(|dir| DenseHead::read(&dir, &device))
            .transpose()?;
        if let Some(head) = &head {
            if head.config.in_features != config.hidden_size {
                bail!(
                    "{}: its Dense module takes {} inputs but the model's hidden size is {}",
                    model_dir.display(),
                    head.config.in_features,
                    config.hidden_size
                );
            }
        }

        Ok(Self {
            model,
            head,
            tokenizer,
            pooling,
            max_length,
            query_prefix,
            batch_size: options.batch_size.unwrap_or(DEFAULT_BATCH_SIZE).max(1),
            precision,
            model_dir: model_dir.to_path_buf(),
            weights_path,
        })
    }

    pub fn config(&self) -> &Config {
        &self.model.config
    }

    /// The width of the vectors this encoder produces: the model's hidden size, or the output
    /// size of its Dense head.
    pub fn hidden_size(&self) -> usize {
        self.head
            .as_ref()
            .map_or(self.model.config.hidden_size, |h| h.config.out_features)
    }

    /// Layers available in this instance (may be fewer than the checkpoint has).
    pub fn depth(&self) -> usize {
        self.model.depth()
    }

    pub fn weights_path(&self) -> &Path {
        &self.weights_path
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn model(&self) -> &BertModel {
        &self.model
    }

    /// Token ids of each text (with special tokens, truncated to `max_length`), tokenised in
    /// parallel; only the head of a long text is read ([`head`]).
    pub fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        profile::time(profile::Op::Tokenise, || {
            head::tokenize_heads(&self.tokenizer, texts, self.max_length)
        })
    }

    pub fn check_depths(&self, depths: &[usize]) -> Result<usize> {
        let deepest = depths.iter().copied().max().unwrap_or(0);
        if depths.contains(&0) || deepest > self.depth() {
            bail!(
                "--layers must be between 1 and {} for {} (asked for {:?})",
                self.depth(),
                self.model_dir.display(),
                depths
            );
        }
        Ok(deepest)
    }

    /// Encodes `texts` once to the deepest of `depths` and returns, for each depth in the order
    /// given, the pooled, L2-normalised full-width vectors (one row per text).
    pub fn encode(&self, texts: &[&str], depths: &[usize]) -> Result<Vec<Matrix>> {
        let deepest = self.check_depths(depths)?;
        let ids = self.tokenize(texts)?;
        let hidden = self.hidden_size();
        let mut out: Vec<Matrix> = depths
            .iter()
            .map(|_| Matrix::zeros(texts.len(), hidden))
            .collect();
        let batches = length_batches(&ids, self.batch_size, self.batch_size * self.max_length);
        // Batches run side by side, a core each (each one's GEMMs still spread over idle
        // cores): a batch's single-threaded steps (embedding look-up, packing, pooling) then
        // overlap with another's GEMMs instead of leaving a core idle.
        let pooled: Vec<Vec<Vec<f32>>> = batches
            .par_iter()
            .map(|batch| self.forward_batch(&ids, batch, depths, deepest))
            .collect::<Result<_>>()?;
        for (batch, pooled) in batches.iter().zip(pooled) {
            for (matrix, rows) in out.iter_mut().zip(pooled) {
                for (&doc, row) in batch.iter().zip(rows.chunks_exact(hidden)) {
                    matrix.row_mut(doc).copy_from_slice(row);
                }
            }
        }
        for matrix in &mut out {
            matrix.normalize_rows();
        }
        Ok(out)
    }

    /// A question as the model expects to see it: behind its query prefix, if it has one.
    pub fn query_text(&self, query: &str) -> String {
        format!("{}{query}", self.query_prefix)
    }

    /// Encodes questions (with the model's query prefix) once, to each of `depths`.
    pub fn encode_queries(&self, queries: &[&str], depths: &[usize]) -> Result<Vec<Matrix>> {
        let prefixed: Vec<String> = queries.iter().map(|q| self.query_text(q)).collect();
        let refs: Vec<&str> = prefixed.iter().map(String::as_str).collect();
        self.encode(&refs, depths)
    }

    /// Pads one batch of sequences to its longest member and returns, per requested depth, the
    /// pooled vectors row-major.
    fn forward_batch(
        &self,
        ids: &[Vec<u32>],
        batch: &[usize],
        depths: &[usize],
        deepest: usize,
    ) -> Result<Vec<Vec<f32>>> {
        let inputs = profile::time(profile::Op::Padding, || {
            BatchInputs::new(
                batch.iter().map(|&i| ids[i].as_slice()),
                self.model.device(),
            )
        })?;
        let (tokens, types, mask) = (
            &inputs.input_ids,
            &inputs.token_type_ids,
            &inputs.attention_mask,
        );
        let pooled: Vec<Tensor> = match self.model.forward_packed(tokens, types, mask, deepest)? {
            Some(packed) => depths
                .iter()
                .map(|&d| {
                    profile::time(profile::Op::Pooling, || {
                        self.pooling.pool_packed(
                            &packed.layers[d - 1],
                            &packed.starts,
                            &packed.lengths,
                        )
                    })
                })
                .collect::<candle_core::Result<_>>()?,
            None => {
                let states = self
                    .model
                    .forward_layers(tokens, types, mask, deepest, false)?;
                depths
                    .iter()
                    .map(|&d| self.pooling.pool(&states[d - 1], mask))
                    .collect::<candle_core::Result<_>>()?
            }
        };
        pooled
            .into_iter()
            .map(|mut pooled| {
                if let Some(head) = &self.head {
                    pooled = head.forward(&pooled)?;
                }
                Ok(pooled.flatten_all()?.to_vec1::<f32>()?)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
