//! `rag train`: produces the encoders `rag index --model DIR` loads. ESE (learn-to-express +
//! learn-to-compress on the AnglE loss) and, on the same data and loop, the RAW, MRL, 2DMSE and
//! pooler baselines.
//!
//! Examples ([`data`]) go through the model under training ([`model`]), the objective
//! ([`loss`], with the compression target from [`compression`]) gives a loss, and AdamW
//! ([`optim`]) updates the weights, step by step in the [`trainer`]; [`output`] keeps
//! checkpoints and writes the finished model and its card. This module holds what goes in and
//! out of a run: its options, its record and its summary.

pub mod compression;
pub mod data;
pub mod loss;
pub mod model;
pub mod optim;
pub mod output;
mod setup;
pub mod trainer;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::encoder::Pooling;
use crate::progress::ProgressMode;
use data::DataSource;
use loss::{Method, Objective};

pub use output::append_card_section;
pub use trainer::train;

pub struct TrainOptions {
    pub model_dir: PathBuf,
    pub out_dir: PathBuf,
    pub sources: Vec<DataSource>,
    /// Most examples read from each `--data` source.
    pub max_examples: usize,
    /// Most pairs made from each `--pairs-from-corpus` corpus.
    pub max_corpus_pairs: usize,
    pub objective: Objective,
    pub pooling: Option<Pooling>,
    pub pooler_dim: usize,
    pub two_step: bool,
    pub batch_size: usize,
    pub grad_accum: usize,
    pub epochs: usize,
    pub max_steps: Option<usize>,
    pub lr: f64,
    pub warmup_ratio: f64,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub max_len: usize,
    pub seed: u64,
    pub checkpoint_every: usize,
    /// Stop (with a checkpoint) after this many steps of this invocation, to go on later with
    /// `resume`: training in slices on a shared machine.
    pub pause_after: Option<usize>,
    pub resume: bool,
    pub fresh: bool,
    pub progress: ProgressMode,
}

/// Everything that decides what a run computes: kept in checkpoints (a resumed run must match
/// it) and in the trained model's `ese.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub base_model: String,
    pub base_weights_sha256: String,
    pub objective: Objective,
    pub pooling: Pooling,
    pub pooler_dim: Option<usize>,
    pub two_step: bool,
    pub layer_weights: Vec<f64>,
    pub data: Vec<DataRecord>,
    pub batch_size: usize,
    pub grad_accum: usize,
    pub epochs: usize,
    pub steps: usize,
    pub lr: f64,
    pub warmup_steps: usize,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub max_len: usize,
    pub seed: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataRecord {
    pub source: DataSource,
    pub sha256: String,
    pub examples: usize,
}

#[derive(Debug, Serialize)]
pub struct TrainSummary {
    pub out_dir: PathBuf,
    pub mode: Method,
    pub steps: usize,
    /// Steps run by this invocation (fewer than `steps` after `--resume`).
    pub steps_run: usize,
    pub resumed_from: Option<usize>,
    pub examples: usize,
    pub seconds: f64,
    pub seconds_per_step: f64,
    pub examples_per_second: f64,
    /// Mean loss over the last (up to) 20 steps.
    pub final_loss: f64,
    /// False when `pause_after` stopped the run before its last step.
    pub finished: bool,
}
