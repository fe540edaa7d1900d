//! `rag train`: an ESE encoder or one of its baselines.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use rag::encoder::Pooling;
use rag::eval::sts;
use rag::progress::ProgressMode;
use rag::train::loss::{AngleLoss, Method, Objective};
use rag::train::{self, data, TrainOptions};

use super::flags::{DataArgs, DEFAULT_MODEL_DIR};
use super::print_json;

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The checkpoint to start from (Hugging Face layout).
    #[arg(long, env = "RAG_MODEL", default_value = DEFAULT_MODEL_DIR)]
    pub model: PathBuf,
    /// Where the trained model goes.
    #[arg(long)]
    pub out: PathBuf,
    /// Training data: `nli` (every CSV under <data-dir>/nli/), a premise,hypothesis,label CSV,
    /// or JSONL of {"query","positive"[,"negative"]} / {"text1","text2","label"}; may be repeated.
    #[arg(long, default_value = "nli")]
    pub data: Vec<String>,
    /// Also train on in-domain pairs from a HotpotQA corpus (title + first sentence -> title +
    /// the rest of the paragraph); may be repeated.
    #[arg(long)]
    pub pairs_from_corpus: Vec<PathBuf>,
    /// Read at most this many examples from each --data source.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    pub max_examples: usize,
    /// Make at most this many pairs from each --pairs-from-corpus corpus.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    pub max_corpus_pairs: usize,
    #[command(flatten)]
    pub data_dir: DataArgs,
    #[command(flatten)]
    pub objective: ObjectiveArgs,
    /// Output size of the pooler head (--mode pooler).
    #[arg(long, default_value_t = 128)]
    pub pooler_dim: usize,
    /// Second step of pooler training: freeze the encoder of a --mode pooler model (--model)
    /// and fine-tune only its head.
    #[arg(long)]
    pub two_step: bool,
    /// Pooling (default: the checkpoint's, else CLS; the pooler head always reads CLS).
    #[arg(long, value_enum)]
    pub pooling: Option<Pooling>,
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Batches whose gradients are summed before each optimizer step.
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Stop after this many optimizer steps (default: the epochs' worth).
    #[arg(long)]
    pub max_steps: Option<usize>,
    #[arg(long, default_value_t = 5e-5)]
    pub lr: f64,
    /// Fraction of the steps spent warming the learning rate up.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f64,
    /// Clip the gradients' global norm to this (0: no clipping).
    #[arg(long, default_value_t = 1.0)]
    pub max_grad_norm: f64,
    /// Tokens per text.
    #[arg(long, default_value_t = 64)]
    pub max_len: usize,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Optimizer steps between checkpoints.
    #[arg(long, default_value_t = 50)]
    pub checkpoint_every: usize,
    /// Skip the STS-B evaluation whose table goes into the model card.
    #[arg(long)]
    pub no_eval: bool,
    /// Stop after this many steps, with a checkpoint, and go on later with --resume.
    #[arg(long)]
    pub pause_after: Option<usize>,
    /// Continue an interrupted run from its last checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// Discard an interrupted run and start over.
    #[arg(long)]
    pub fresh: bool,
    #[arg(long)]
    pub json: bool,
}

/// What the training minimises.
#[derive(Args, Debug)]
pub struct ObjectiveArgs {
    #[arg(long, value_enum, default_value_t = Method::Ese)]
    pub mode: Method,
    /// ESE's k: the size shallow layers and the compression target are trained at.
    #[arg(long, default_value_t = 128)]
    pub compression_size: usize,
    /// Temperature of the KL term in ESE's alignment and 2DMSE's distillation.
    #[arg(long, default_value_t = 1.0)]
    pub kl_temperature: f64,
    /// Multiplies ESE's shallow-layer terms (1: the paper's weighting); raise it for a model
    /// that will mostly be served at a reduced depth.
    #[arg(long, default_value_t = 1.0)]
    pub shallow_weight: f64,
    /// Weight of distilling the base model's full-depth similarities into every layer trained,
    /// at each size it is trained at (0: the paper's objective; any mode but pooler). Keeps shallow layers close to a
    /// base model that already retrieves well, and its last layer from drifting.
    #[arg(long, default_value_t = 0.0)]
    pub distill_weight: f64,
    /// Weight of distilling the base model's full-depth embeddings themselves (1 - cosine, full
    /// width) into every layer trained (0: off; any mode but pooler). Holds the last layer where
    /// the base model had it and teaches shallow layers to compute it.
    #[arg(long, default_value_t = 0.0)]
    pub embedding_distill_weight: f64,
    #[command(flatten)]
    pub angle: AngleArgs,
}

/// AnglE's terms: in-batch negatives, contrastive, angle and cosine, weights and temperatures.
#[derive(Args, Debug)]
pub struct AngleArgs {
    #[arg(long, default_value_t = 1.0)]
    pub ibn_weight: f64,
    #[arg(long, default_value_t = 1.0)]
    pub cln_weight: f64,
    #[arg(long, default_value_t = 0.02)]
    pub angle_weight: f64,
    #[arg(long, default_value_t = 0.0)]
    pub cosine_weight: f64,
    #[arg(long, default_value_t = 20.0)]
    pub ibn_tau: f64,
    #[arg(long, default_value_t = 20.0)]
    pub angle_tau: f64,
    #[arg(long, default_value_t = 20.0)]
    pub cosine_tau: f64,
}

impl From<AngleArgs> for AngleLoss {
    fn from(a: AngleArgs) -> Self {
        AngleLoss {
            ibn_weight: a.ibn_weight,
            cln_weight: a.cln_weight,
            angle_weight: a.angle_weight,
            cosine_weight: a.cosine_weight,
            ibn_tau: a.ibn_tau,
            angle_tau: a.angle_tau,
            cosine_tau: a.cosine_tau,
        }
    }
}

impl From<ObjectiveArgs> for Objective {
    fn from(o: ObjectiveArgs) -> Self {
        Objective {
            mode: o.mode,
            angle: o.angle.into(),
            compression_size: o.compression_size,
            kl_temperature: o.kl_temperature,
            shallow_weight: o.shallow_weight,
            distill_weight: o.distill_weight,
            embedding_distill_weight: o.embedding_distill_weight,
        }
    }
}

impl TryFrom<TrainArgs> for TrainOptions {
    type Error = anyhow::Error;

    /// Fails when a `--data` source cannot be resolved.
    fn try_from(args: TrainArgs) -> Result<Self> {
        Ok(TrainOptions {
            sources: data::resolve_sources(
                &args.data,
                &args.pairs_from_corpus,
                &args.data_dir.data_dir,
            )?,
            model_dir: args.model,
            out_dir: args.out,
            max_examples: args.max_examples,
            max_corpus_pairs: args.max_corpus_pairs,
            objective: args.objective.into(),
            pooling: args.pooling,
            pooler_dim: args.pooler_dim,
            two_step: args.two_step,
            batch_size: args.batch_size,
            grad_accum: args.grad_accum,
            epochs: args.epochs,
            max_steps: args.max_steps,
            lr: args.lr,
            warmup_ratio: args.warmup,
            weight_decay: args.weight_decay,
            max_grad_norm: args.max_grad_norm,
            max_len: args.max_len,
            seed: args.seed,
            checkpoint_every: args.checkpoint_every,
            pause_after: args.pause_after,
            resume: args.resume,
            fresh: args.fresh,
            progress: ProgressMode::for_stderr(),
        })
    }
}

pub fn run(args: TrainArgs) -> Result<()> {
    let (no_eval, json) = (args.no_eval, args.json);
    let data_dir = args.data_dir.data_dir.clone();
    let summary = train::train(&args.try_into()?)?;
    if summary.finished && !no_eval {
        sts::evaluate_for_model_card(&summary.out_dir, &data_dir)?;
    }
    if json {
        return print_json(&summary);
    }
    if !summary.finished {
        println!(
            "paused after step {} of {} ({:.1} examples/s); continue with the same command and --resume",
            summary.resumed_from.unwrap_or(0) + summary.steps_run,
            summary.steps,
            summary.examples_per_second
        );
        return Ok(());
    }
    println!(
        "trained {} ({}) in {} steps, {:.0} s ({:.1} examples/s, {:.2} s/step), final loss {:.4}",
        summary.out_dir.display(),
        summary.mode,
        summary.steps,
        summary.seconds,
        summary.examples_per_second,
        summary.seconds_per_step,
        summary.final_loss
    );
    Ok(())
}
