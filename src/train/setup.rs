//! What a run starts from: the options checked, the model and the teacher loaded, the data read
//! and scheduled, the work directory prepared, and the checkpoint a `--resume` continues from.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::data::{self, DataSource, Example};
use super::loss::{layer_weight, Method};
use super::model::{HeadSetup, TrainableModel};
use super::optim::AdamW;
use super::output::{self, CheckpointState};
use super::{DataRecord, RunRecord, TrainOptions};
use crate::encoder::{Encoder, EncoderOptions};
use crate::files;

pub(super) fn validate(options: &TrainOptions) -> Result<()> {
    if options.batch_size < 2 {
        bail!("--batch-size must be at least 2: the contrastive loss needs in-batch negatives");
    }
    if options.grad_accum == 0 || options.epochs == 0 || options.max_steps == Some(0) {
        bail!("--grad-accum, --epochs and --max-steps must be positive");
    }
    if options.checkpoint_every == 0 {
        bail!("--checkpoint-every must be positive");
    }
    if !(0.0..1.0).contains(&options.warmup_ratio) {
        bail!("--warmup must be in [0, 1)");
    }
    if options.lr <= 0.0 || options.max_len < 2 {
        bail!("--lr must be positive and --max-len at least 2");
    }
    if options.two_step && options.objective.mode != Method::Pooler {
        bail!("--two-step refines a pooler model: use it with --mode pooler");
    }
    if options.objective.mode == Method::Pooler && options.pooler_dim == 0 {
        bail!("--pooler-dim must be positive");
    }
    if options.resume && options.fresh {
        bail!("--resume and --fresh contradict each other");
    }
    let objective = &options.objective;
    for (flag, weight) in [
        ("--shallow-weight", objective.shallow_weight),
        ("--distill-weight", objective.distill_weight),
        (
            "--embedding-distill-weight",
            objective.embedding_distill_weight,
        ),
    ] {
        if !(weight.is_finite() && weight >= 0.0) {
            bail!("{flag} must be a number, 0 or more (got {weight})");
        }
    }
    if objective.needs_teacher() && objective.mode == Method::Pooler {
        bail!(
            "--distill-weight and --embedding-distill-weight distil into the encoder's layers, \
             which --mode pooler does not train"
        );
    }
    Ok(())
}

/// The base model's full-depth embeddings of `texts`: what a distilling objective learns from.
pub(super) fn prepare_work_dir(options: &TrainOptions) -> Result<PathBuf> {
    let work = output::work_dir(&options.out_dir);
    if work.exists() {
        if options.fresh {
            std::fs::remove_dir_all(&work)
                .with_context(|| format!("removing {}", work.display()))?;
        } else if !options.resume {
            bail!(
                "an interrupted run is in {}: pass --resume to continue it or --fresh to start over",
                work.display()
            );
        }
    }
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    Ok(work)
}

/// The model to train, with the pooler head its mode needs; refused where the mode's size does
/// not fit the model's width.
pub(super) fn load_model(options: &TrainOptions) -> Result<TrainableModel> {
    let objective = &options.objective;
    let mode = objective.mode;
    let head = match (mode, options.two_step) {
        (Method::Pooler, true) => HeadSetup::FromCheckpoint,
        (Method::Pooler, false) => HeadSetup::Fresh {
            dim: options.pooler_dim,
            seed: options.seed,
        },
        _ => HeadSetup::None,
    };
    let model = TrainableModel::load(&options.model_dir, options.pooling, options.max_len, head)?;
    let hidden = model.config.hidden_size;
    if mode == Method::Ese && objective.compression_size >= hidden {
        bail!(
            "--compression-size {} must be smaller than the model's {hidden} dimensions",
            objective.compression_size
        );
    }
    if mode == Method::Pooler && options.pooler_dim > hidden && !options.two_step {
        bail!(
            "--pooler-dim {} is larger than the model's {hidden} dimensions",
            options.pooler_dim
        );
    }
    Ok(model)
}

/// The teacher, where the objective distils: the untouched base model, run by the inference
/// encoder (no gradients).
pub(super) fn load_teacher(
    options: &TrainOptions,
    model: &TrainableModel,
) -> Result<Option<Encoder>> {
    options
        .objective
        .needs_teacher()
        .then(|| {
            let teacher_options = EncoderOptions {
                pooling: Some(model.pooling),
                max_length: Some(options.max_len),
                ..EncoderOptions::default()
            };
            Encoder::load(&options.model_dir, &teacher_options)
        })
        .transpose()
        .context("loading the base model as the distillation teacher")
}

/// Batches per epoch and optimizer steps in all; refused when the data make no full batch.
pub(super) fn schedule(options: &TrainOptions, examples: &[Example]) -> Result<(usize, usize)> {
    let batches_per_epoch =
        data::epoch_batches(examples, options.batch_size, options.seed, 0).len();
    if batches_per_epoch == 0 {
        bail!(
            "{} examples make no full batch of {}: lower --batch-size or add data",
            examples.len(),
            options.batch_size
        );
    }
    let steps = options
        .max_steps
        .unwrap_or(options.epochs * batches_per_epoch / options.grad_accum)
        .max(1);
    Ok((batches_per_epoch, steps))
}

/// What the run records of its settings and data: a resumed run must match it.
pub(super) fn run_record(
    options: &TrainOptions,
    model: &TrainableModel,
    data: Vec<DataRecord>,
    steps: usize,
) -> Result<RunRecord> {
    let depth = model.depth();
    Ok(RunRecord {
        base_model: options.model_dir.display().to_string(),
        base_weights_sha256: files::sha256_file(&crate::encoder::weights_file(
            &options.model_dir,
        )?)?,
        objective: options.objective.clone(),
        pooling: model.pooling,
        pooler_dim: model
            .head
            .as_ref()
            .map(|(head, _)| head.config.out_features),
        two_step: options.two_step,
        layer_weights: (1..depth).map(layer_weight).collect(),
        data,
        batch_size: options.batch_size,
        grad_accum: options.grad_accum,
        epochs: options.epochs,
        steps,
        lr: options.lr,
        warmup_steps: (steps as f64 * options.warmup_ratio).ceil() as usize,
        weight_decay: options.weight_decay,
        max_grad_norm: options.max_grad_norm,
        max_len: options.max_len,
        seed: options.seed,
    })
}

/// The checkpoint to continue from with `--resume` (none without it, or before the first),
/// refused when it was started with other settings or data.
pub(super) fn resume(
    options: &TrainOptions,
    work: &Path,
    optimizer: &mut AdamW,
    record: &RunRecord,
) -> Result<Option<CheckpointState>> {
    if !options.resume {
        return Ok(None);
    }
    let resumed = output::load_checkpoint(work, optimizer)?;
    if resumed
        .as_ref()
        .is_some_and(|state| &state.record != record)
    {
        bail!(
            "the run in {} was started with other settings or data: pass --fresh to start over",
            work.display()
        );
    }
    Ok(resumed)
}

/// The JSONL training log: appended to by a resumed run, else started anew.
pub(super) fn open_log(path: &Path, resumed: bool) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(resumed)
        .write(true)
        .truncate(!resumed)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// Every `--data` source's examples, in order, and what the run records of each.
pub(super) fn read_sources(options: &TrainOptions) -> Result<(Vec<Example>, Vec<DataRecord>)> {
    let mut examples: Vec<Example> = Vec::new();
    let mut data = Vec::new();
    for source in &options.sources {
        let limit = match source {
            DataSource::CorpusPairs(_) => options.max_corpus_pairs,
            _ => options.max_examples,
        };
        let read = source.read(limit)?;
        if read.is_empty() {
            bail!("{}: no training examples in it", source.path().display());
        }
        data.push(DataRecord {
            source: source.clone(),
            sha256: files::sha256_file(source.path())?,
            examples: read.len(),
        });
        examples.extend(read);
    }
    Ok((examples, data))
}
