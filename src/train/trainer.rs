//! The training loop. [`train`] sets a [`Trainer`] up from the options (model, teacher, data,
//! optimizer, and the checkpoint to resume from), runs its steps and finishes: a paused run
//! leaves its checkpoint, a finished one installs the trained model.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use serde::Serialize;

use super::data::{self, DataSource, Example};
use super::loss::{layer_weight, matryoshka_dims, Layout, Method, Sample};
use super::model::{HeadSetup, TrainableModel};
use super::optim::{scheduled_lr, AdamW, AdamWConfig};
use super::output::{self, CheckpointState};
use super::{DataRecord, RunRecord, TrainOptions, TrainSummary};
use crate::encoder::{Encoder, EncoderOptions};
use crate::files;
use crate::progress::Progress;
use crate::rng::Rng;

/// Runs the training `options` describe: from the start, or from the checkpoint with
/// `resume`, up to the last step or to `pause_after` steps.
pub fn train(options: &TrainOptions) -> Result<TrainSummary> {
    let mut trainer = Trainer::setup(options)?;
    for step in trainer.start_step..trainer.end_step {
        trainer.step(step)?;
    }
    trainer.finish()
}

/// A step's line in `train_log.jsonl`.
#[derive(Serialize)]
struct LogLine {
    step: usize,
    epoch: usize,
    loss: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    compress_loss: Option<f64>,
    lr: f64,
    grad_norm: f64,
    examples_per_second: f64,
    elapsed_s: f64,
}

fn validate(options: &TrainOptions) -> Result<()> {
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
fn teacher_embeddings(teacher: &Encoder, texts: &[&str], device: &Device) -> Result<Tensor> {
    let vectors = teacher.encode(texts, &[teacher.depth()])?.remove(0);
    Ok(Tensor::from_vec(
        vectors.data,
        (vectors.rows, vectors.cols),
        device,
    )?)
}

/// The texts of a batch in its layout's row blocks, and that layout.
fn batch_texts<'a>(examples: &'a [Example], batch: &[usize]) -> (Vec<&'a str>, Layout) {
    let members: Vec<Vec<&str>> = batch.iter().map(|&i| examples[i].texts()).collect();
    let blocks = members[0].len();
    let texts = (0..blocks)
        .flat_map(|b| members.iter().map(move |m| m[b]))
        .collect();
    let layout = match &examples[batch[0]] {
        Example::Triplet { .. } => Layout::Triplets,
        Example::Pair { .. } => Layout::Pairs,
        Example::Scored { .. } => Layout::Scored(
            batch
                .iter()
                .map(|&i| match &examples[i] {
                    Example::Scored { label, .. } => *label,
                    _ => unreachable!("batches hold one kind of example"),
                })
                .collect(),
        ),
    };
    (texts, layout)
}

/// A generator for step `step` alone: dropout masks and 2DMSE's samples then depend only on the
/// seed and the step, so a resumed run draws exactly what an uninterrupted one would.
fn step_rng(seed: u64, step: usize, stream: u64) -> Rng {
    let mut mixer = Rng::new(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    Rng::new(mixer.next_u64() ^ (step as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

fn prepare_work_dir(options: &TrainOptions) -> Result<PathBuf> {
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
fn load_model(options: &TrainOptions) -> Result<TrainableModel> {
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
fn load_teacher(options: &TrainOptions, model: &TrainableModel) -> Result<Option<Encoder>> {
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
fn schedule(options: &TrainOptions, examples: &[Example]) -> Result<(usize, usize)> {
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
fn run_record(
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
fn resume(
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
fn open_log(path: &Path, resumed: bool) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(resumed)
        .write(true)
        .truncate(!resumed)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// Every `--data` source's examples, in order, and what the run records of each.
fn read_sources(options: &TrainOptions) -> Result<(Vec<Example>, Vec<DataRecord>)> {
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

/// A run from setup to finish: the model and its optimizer, the data, and how far it has got.
struct Trainer<'a> {
    options: &'a TrainOptions,
    model: TrainableModel,
    /// The base model, when the objective distils from it.
    teacher: Option<Encoder>,
    examples: Vec<Example>,
    batches_per_epoch: usize,
    record: RunRecord,
    /// `<out>.training/`: the checkpoint and the log until the model is installed.
    work: PathBuf,
    optimizer: AdamW,
    resumed: Option<CheckpointState>,
    log: File,
    log_path: PathBuf,
    /// Whether the objective takes every layer's embeddings, not only the last one's.
    every_layer: bool,
    /// The sizes 2DMSE samples from.
    sample_dims: Vec<usize>,
    progress: Progress,
    started: Instant,
    /// The steps this invocation runs: from the checkpoint (or 0) to a pause or the last one.
    start_step: usize,
    end_step: usize,
    examples_seen: usize,
    examples_this_run: usize,
    /// The current epoch and its batches.
    plan: Option<(usize, Vec<Vec<usize>>)>,
    /// The losses of the last (up to) 20 steps.
    recent_losses: Vec<f64>,
}

impl<'a> Trainer<'a> {
    /// Checks the options, loads the model, the teacher and the data, and opens the work
    /// directory: resuming from its checkpoint with `--resume`, which must be of this same run.
    fn setup(options: &'a TrainOptions) -> Result<Self> {
        validate(options)?;
        let mode = options.objective.mode;
        let model = load_model(options)?;
        let hidden = model.config.hidden_size;
        let teacher = load_teacher(options, &model)?;
        let (examples, data) = read_sources(options)?;
        let (batches_per_epoch, steps) = schedule(options, &examples)?;
        let record = run_record(options, &model, data, steps)?;

        let work = prepare_work_dir(options)?;
        let mut optimizer = AdamW::new(
            model.trainable_vars(),
            AdamWConfig {
                lr: options.lr,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: options.weight_decay,
            },
        );
        let resumed = resume(options, &work, &mut optimizer, &record)?;
        let start_step = resumed.as_ref().map_or(0, |s| s.step);
        let log_path = work.join("train_log.jsonl");
        let log = open_log(&log_path, resumed.is_some())?;

        let mut progress = Progress::new(
            options.progress,
            &format!("train {mode}"),
            steps as u64,
            "{spinner} train [{bar:30}] {pos}/{len} steps {msg} ({eta})",
        );
        progress.update(start_step as u64, String::new);
        let started = Instant::now();
        let examples_seen = resumed.as_ref().map_or(0, |s| s.examples);
        let end_step = options
            .pause_after
            .map_or(steps, |n| (start_step + n).min(steps));
        Ok(Self {
            options,
            model,
            teacher,
            examples,
            batches_per_epoch,
            record,
            work,
            optimizer,
            resumed,
            log,
            log_path,
            every_layer: matches!(mode, Method::Ese | Method::TwoDmse),
            sample_dims: matryoshka_dims(hidden),
            progress,
            started,
            start_step,
            end_step,
            examples_seen,
            examples_this_run: 0,
            plan: None,
            recent_losses: Vec::new(),
        })
    }

    /// Seconds spent before this invocation, by the runs it resumes.
    fn prior_seconds(&self) -> f64 {
        self.resumed.as_ref().map_or(0.0, |s| s.seconds)
    }

    /// Optimizer step `step` (0-based) over `grad_accum` micro-batches: logged, and followed by
    /// a checkpoint when one is due or the run pauses after it.
    fn step(&mut self, step: usize) -> Result<()> {
        let options = self.options;
        let objective = &options.objective;
        *self
            .model
            .bert
            .dropout_rng()
            .lock()
            .expect("dropout generator poisoned") = step_rng(options.seed, step, 1);
        let mut grads = self.optimizer.zero_grads();
        let (mut loss_sum, mut compress_sum) = (0.0f64, None::<f64>);
        let mut epoch = 0;
        for micro in 0..options.grad_accum {
            let index = step * options.grad_accum + micro;
            epoch = index / self.batches_per_epoch;
            if self.plan.as_ref().map(|(e, _)| *e) != Some(epoch) {
                self.plan = Some((
                    epoch,
                    data::epoch_batches(&self.examples, options.batch_size, options.seed, epoch),
                ));
            }
            let batch =
                &self.plan.as_ref().expect("plan set above").1[index % self.batches_per_epoch];
            let (texts, layout) = batch_texts(&self.examples, batch);
            let layers = self.model.embed(&texts, self.every_layer, true)?;
            let sample = (objective.mode == Method::TwoDmse).then(|| {
                let mut rng = step_rng(options.seed, index, 2);
                Sample {
                    layer: 1 + rng.below(self.model.depth().saturating_sub(1).max(1)),
                    dim: self.sample_dims[rng.below(self.sample_dims.len())],
                }
            });
            let teacher_vectors = self
                .teacher
                .as_ref()
                .map(|t| teacher_embeddings(t, &texts, self.model.bert.device()))
                .transpose()?;
            let value = objective.loss(&layers, &layout, sample, teacher_vectors.as_ref())?;
            let total = value.total.to_scalar::<f32>()? as f64;
            if !total.is_finite() {
                bail!("the loss became {total} at step {}: lower --lr", step + 1);
            }
            let grads_store = value.total.backward()?;
            self.optimizer
                .accumulate(&grads_store, 1.0 / options.grad_accum as f32, &mut grads)?;
            loss_sum += total / options.grad_accum as f64;
            if let Some(compress) = value.compress {
                *compress_sum.get_or_insert(0.0) +=
                    compress.to_scalar::<f32>()? as f64 / options.grad_accum as f64;
            }
        }
        let steps = self.record.steps;
        let lr = scheduled_lr(options.lr, step, self.record.warmup_steps, steps);
        let grad_norm = self.optimizer.step(&grads, lr, options.max_grad_norm)?;
        self.examples_seen += options.batch_size * options.grad_accum;
        self.examples_this_run += options.batch_size * options.grad_accum;
        let elapsed = self.started.elapsed().as_secs_f64();
        let rate = self.examples_this_run as f64 / elapsed.max(1e-9);
        self.recent_losses.push(loss_sum);
        if self.recent_losses.len() > 20 {
            self.recent_losses.remove(0);
        }
        let line = LogLine {
            step: step + 1,
            epoch: epoch + 1,
            loss: loss_sum,
            compress_loss: compress_sum,
            lr,
            grad_norm,
            examples_per_second: rate,
            elapsed_s: self.prior_seconds() + elapsed,
        };
        writeln!(self.log, "{}", serde_json::to_string(&line)?)
            .with_context(|| format!("writing {}", self.log_path.display()))?;
        self.progress.update(step as u64 + 1, || {
            format!("loss {loss_sum:.4} | {rate:.1} ex/s")
        });
        let pausing = step + 1 == self.end_step && self.end_step < steps;
        if ((step + 1).is_multiple_of(options.checkpoint_every) && step + 1 < steps) || pausing {
            self.checkpoint(step + 1, elapsed)?;
        }
        Ok(())
    }

    /// Saves what resuming after `steps_done` steps needs, `elapsed` seconds into this
    /// invocation.
    fn checkpoint(&self, steps_done: usize, elapsed: f64) -> Result<()> {
        output::save_checkpoint(
            &self.work,
            &self.optimizer,
            &CheckpointState {
                step: steps_done,
                examples: self.examples_seen,
                seconds: self.prior_seconds() + elapsed,
                record: self.record.clone(),
            },
        )
    }

    /// The run's summary; when it ran its last step, also installs the trained model (with
    /// `ese.json`, the model card and the log) and removes the work directory.
    fn finish(self) -> Result<TrainSummary> {
        let prior_seconds = self.prior_seconds();
        self.progress.finish();
        let seconds = self.started.elapsed().as_secs_f64();
        let steps_run = self.end_step - self.start_step;
        let options = self.options;
        let summary = TrainSummary {
            out_dir: options.out_dir.clone(),
            mode: options.objective.mode,
            steps: self.record.steps,
            steps_run,
            resumed_from: self.resumed.map(|s| s.step),
            examples: self.examples_seen,
            seconds: prior_seconds + seconds,
            seconds_per_step: seconds / steps_run.max(1) as f64,
            examples_per_second: self.examples_this_run as f64 / seconds.max(1e-9),
            final_loss: self.recent_losses.iter().sum::<f64>()
                / self.recent_losses.len().max(1) as f64,
            finished: self.end_step == self.record.steps,
        };
        if !summary.finished {
            return Ok(summary);
        }
        let ese_json = serde_json::json!({ "run": self.record, "result": summary });
        let card = output::model_card(&self.record, &summary);
        let (model, log_path) = (&self.model, &self.log_path);
        output::install_model(&options.out_dir, |dir| {
            output::write_model(dir, &options.model_dir, model, &ese_json, &card)?;
            std::fs::copy(log_path, dir.join("train_log.jsonl"))
                .with_context(|| format!("copying {}", log_path.display()))?;
            Ok(())
        })?;
        std::fs::remove_dir_all(&self.work)
            .with_context(|| format!("removing {}", self.work.display()))?;
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::encoder::tiny::TinyBert;
    use crate::progress::ProgressMode;
    use crate::train::loss::{self, AngleLoss, Objective};
    use crate::vectors::cosine;

    /// Triplets whose anchor and positive share two of three words and whose negative shares
    /// none: something a tiny model can learn in a few steps.
    fn synthetic_triplets(dir: &Path, count: usize) -> PathBuf {
        let mut rng = Rng::new(5);
        let mut word = || -> String {
            (0..3)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect()
        };
        let lines: Vec<String> = (0..count)
            .map(|_| {
                let (a, b, c, d) = (word(), word(), word(), word());
                serde_json::json!({
                    "query": format!("{a} {b} {c}"),
                    "positive": format!("{a} {b} {d}"),
                    "negative": format!("{} {} {}", word(), word(), word()),
                })
                .to_string()
            })
            .collect();
        let path = dir.join("train.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    fn options(model_dir: &Path, out_dir: &Path, data: &Path, mode: Method) -> TrainOptions {
        TrainOptions {
            model_dir: model_dir.to_path_buf(),
            out_dir: out_dir.to_path_buf(),
            sources: vec![DataSource::Jsonl(data.to_path_buf())],
            max_examples: usize::MAX,
            max_corpus_pairs: usize::MAX,
            objective: Objective {
                mode,
                angle: AngleLoss::default(),
                compression_size: 16,
                kl_temperature: 1.0,
                shallow_weight: 1.0,
                distill_weight: 0.0,
                embedding_distill_weight: 0.0,
            },
            pooling: None,
            pooler_dim: 16,
            two_step: false,
            batch_size: 8,
            grad_accum: 1,
            epochs: 1,
            max_steps: Some(24),
            lr: 2e-3,
            warmup_ratio: 0.1,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
            max_len: 16,
            seed: 3,
            checkpoint_every: 10,
            pause_after: None,
            resume: false,
            fresh: false,
            progress: ProgressMode::Quiet,
        }
    }

    fn tiny_model(dir: &Path, dropout: bool) -> PathBuf {
        let model_dir = dir.join("tiny");
        TinyBert::default().write(&model_dir).unwrap();
        if !dropout {
            let path = model_dir.join("config.json");
            let mut config: serde_json::Value = files::read_json(&path).unwrap();
            config["hidden_dropout_prob"] = 0.0.into();
            config["attention_probs_dropout_prob"] = 0.0.into();
            files::write_json_atomic(&path, &config).unwrap();
        }
        model_dir
    }

    /// The objective on a fixed batch, without dropout. For ESE, its learn-to-express part at
    /// the compressed size (what ESE trains shallow layers for): the compression target moves
    /// with the model, so on a tiny random model the total need not fall in a few steps.
    fn eval_loss(model: &TrainableModel, objective: &Objective, examples: &[Example]) -> f64 {
        let batch: Vec<usize> = (0..16).collect();
        let (texts, layout) = batch_texts(examples, &batch);
        let every_layer = matches!(objective.mode, Method::Ese | Method::TwoDmse);
        let layers = model.embed(&texts, every_layer, false).unwrap();
        let value = if objective.mode == Method::Ese {
            let k = objective.compression_size;
            let terms: Vec<f32> = layers
                .iter()
                .map(|x| {
                    let x = x.narrow(1, 0, k).unwrap();
                    objective
                        .angle
                        .forward(&x, &layout)
                        .unwrap()
                        .to_scalar::<f32>()
                        .unwrap()
                })
                .collect();
            terms.iter().sum::<f32>()
        } else {
            let sample = Sample { layer: 1, dim: 16 };
            let value = objective
                .loss(&layers, &layout, Some(sample), None)
                .unwrap();
            value.total.to_scalar::<f32>().unwrap()
        };
        value as f64
    }

    #[test]
    fn a_short_run_lowers_the_loss_in_every_mode_and_the_model_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = tiny_model(dir.path(), true);
        let data = synthetic_triplets(dir.path(), 64);
        let examples = DataSource::Jsonl(data.clone()).read(usize::MAX).unwrap();
        for mode in [
            Method::Raw,
            Method::Mrl,
            Method::TwoDmse,
            Method::Ese,
            Method::Pooler,
        ] {
            let out = dir.path().join(format!("out-{mode}"));
            let mut opts = options(&model_dir, &out, &data, mode);
            if mode == Method::Pooler {
                // A random tiny model's CLS state carries little of the text at first: the
                // pooler needs a few more steps than the pooled modes.
                opts.max_steps = Some(160);
            }
            let head = |fresh: bool| match (mode, fresh) {
                (Method::Pooler, true) => HeadSetup::Fresh {
                    dim: 16,
                    seed: opts.seed,
                },
                (Method::Pooler, false) => HeadSetup::FromCheckpoint,
                _ => HeadSetup::None,
            };
            let before = TrainableModel::load(&model_dir, None, 16, head(true)).unwrap();
            let loss_before = eval_loss(&before, &opts.objective, &examples);
            let summary = train(&opts).unwrap();
            assert_eq!(summary.steps, opts.max_steps.unwrap());
            assert!(
                !output::work_dir(&out).exists(),
                "{mode}: the work directory was left behind"
            );
            let after = TrainableModel::load(&out, None, 16, head(false)).unwrap();
            let loss_after = eval_loss(&after, &opts.objective, &examples);
            let log = std::fs::read_to_string(out.join("train_log.jsonl")).unwrap();
            assert!(
                loss_after < loss_before * 0.9,
                "{mode}: loss {loss_before} -> {loss_after}\n{log}"
            );

            // The encoder loads the saved model unchanged and encodes what training computed.
            let encoder = Encoder::load(&out, &EncoderOptions::default()).unwrap();
            let texts = ["abc def ghi", "the river of the city"];
            let trained = after
                .embed(&texts, false, false)
                .unwrap()
                .remove(0)
                .to_vec2::<f32>()
                .unwrap();
            let encoded = encoder
                .encode(&texts, &[encoder.depth()])
                .unwrap()
                .remove(0);
            assert_eq!(encoded.cols, if mode == Method::Pooler { 16 } else { 32 });
            for (i, row) in trained.iter().enumerate() {
                assert!(cosine(row, encoded.row(i)) > 0.9999, "{mode}: text {i}");
            }
            let record: serde_json::Value = files::read_json(&out.join("ese.json")).unwrap();
            assert_eq!(record["run"]["objective"]["mode"], mode.to_string());
            assert!(std::fs::read_to_string(out.join("README.md"))
                .unwrap()
                .contains(&mode.to_string()));
        }
    }

    #[test]
    fn distilling_brings_the_shallow_layers_to_the_base_models_embeddings() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = tiny_model(dir.path(), false);
        let data = synthetic_triplets(dir.path(), 64);
        let examples = DataSource::Jsonl(data.clone()).read(usize::MAX).unwrap();
        let (texts, _) = batch_texts(&examples, &(0..16).collect::<Vec<_>>());
        let base = Encoder::load(&model_dir, &EncoderOptions::default()).unwrap();
        let teacher = teacher_embeddings(&base, &texts, &Device::Cpu).unwrap();
        let k = 16;
        // How far layer 1 is from the base model's last layer: its first k dimensions'
        // neighbourhoods, and its full-width embeddings.
        let gaps = |model: &Path| {
            let model = TrainableModel::load(model, None, 16, HeadSetup::None).unwrap();
            let first = model.embed(&texts, true, false).unwrap().remove(0);
            let student = first.narrow(1, 0, k).unwrap();
            let similarities = loss::similarity_distillation(&student, &teacher, 20.0).unwrap();
            let embeddings = loss::embedding_distillation(&first, &teacher).unwrap();
            [similarities, embeddings].map(|v| v.to_scalar::<f32>().unwrap() as f64)
        };
        let trained = |name: &str, distill_weight: f64, embedding_distill_weight: f64| {
            let out = dir.path().join(name);
            let mut opts = options(&model_dir, &out, &data, Method::Ese);
            opts.objective.distill_weight = distill_weight;
            opts.objective.embedding_distill_weight = embedding_distill_weight;
            train(&opts).unwrap();
            let record: serde_json::Value = files::read_json(&out.join("ese.json")).unwrap();
            let objective = &record["run"]["objective"];
            assert_eq!(objective["distill_weight"], distill_weight);
            assert_eq!(
                objective["embedding_distill_weight"],
                embedding_distill_weight
            );
            out
        };
        let before = gaps(&model_dir);
        let plain = gaps(&trained("plain", 0.0, 0.0));
        let similarities = gaps(&trained("similarities", 5.0, 0.0));
        let embeddings = gaps(&trained("embeddings", 0.0, 20.0));
        assert!(
            similarities[0] < 0.7 * before[0] && similarities[0] < 0.7 * plain[0],
            "layer 1's neighbourhoods vs the base model's last layer: {} before, {} after plain \
             ESE, {} after distilling similarities",
            before[0],
            plain[0],
            similarities[0]
        );
        assert!(
            embeddings[1] < 0.7 * before[1] && embeddings[1] < 0.7 * plain[1],
            "layer 1's embeddings vs the base model's last layer (1 - cos): {} before, {} after \
             plain ESE, {} after distilling embeddings",
            before[1],
            plain[1],
            embeddings[1]
        );
        for (flag, weights) in [("similarities", (1.0, 0.0)), ("embeddings", (0.0, 1.0))] {
            let mut opts = options(
                &model_dir,
                &dir.path().join("pooler"),
                &data,
                Method::Pooler,
            );
            (
                opts.objective.distill_weight,
                opts.objective.embedding_distill_weight,
            ) = weights;
            assert!(
                train(&opts).is_err(),
                "distilling {flag} goes into encoder layers, which the pooler does not train"
            );
        }
    }

    #[test]
    fn two_step_refines_only_the_pooler_head() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = tiny_model(dir.path(), true);
        let data = synthetic_triplets(dir.path(), 64);
        let first = dir.path().join("pooler");
        let mut opts = options(&model_dir, &first, &data, Method::Pooler);
        opts.max_steps = Some(4);
        train(&opts).unwrap();
        let second = dir.path().join("pooler-2step");
        let mut opts = options(&first, &second, &data, Method::Pooler);
        opts.two_step = true;
        opts.max_steps = Some(4);
        train(&opts).unwrap();
        let read = |dir: &Path, file: &str| std::fs::read(dir.join(file)).unwrap();
        assert!(read(&first, "model.safetensors") == read(&second, "model.safetensors"));
        assert!(
            read(&first, "2_Dense/model.safetensors") != read(&second, "2_Dense/model.safetensors")
        );
        // Two-step needs a pooler model to start from.
        let mut bad = options(
            &model_dir,
            &dir.path().join("bad"),
            &dir.path().join("train.jsonl"),
            Method::Pooler,
        );
        bad.two_step = true;
        assert!(train(&bad).unwrap_err().to_string().contains("--two-step"));
    }

    #[test]
    fn autograd_gradients_match_finite_differences() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = tiny_model(dir.path(), false);
        let data = synthetic_triplets(dir.path(), 8);
        let examples = DataSource::Jsonl(data).read(usize::MAX).unwrap();
        let model = TrainableModel::load(&model_dir, None, 16, HeadSetup::None).unwrap();
        let batch: Vec<usize> = (0..4).collect();
        let (texts, layout) = batch_texts(&examples, &batch);
        let angle = AngleLoss::default();
        // AnglE on every layer's embedding, so the check runs through every layer and the
        // pooling; the trained path (train = true) without dropout is deterministic.
        let loss = || -> Tensor {
            let layers = model.embed(&texts, true, true).unwrap();
            let terms: Vec<Tensor> = layers
                .iter()
                .map(|x| angle.forward(x, &layout).unwrap())
                .collect();
            Tensor::stack(&terms, 0).unwrap().sum(0).unwrap()
        };
        let grads = loss().backward().unwrap();
        let vars = model.trainable_vars();
        let mut checked = 0;
        for name in [
            "encoder.layer.0.attention.self.query.weight",
            "encoder.layer.1.intermediate.dense.weight",
            "encoder.layer.2.output.dense.bias",
            "encoder.layer.2.output.LayerNorm.weight",
            "embeddings.LayerNorm.bias",
            "embeddings.position_embeddings.weight",
        ] {
            let var = &vars
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("no {name}"))
                .1;
            let original = var
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let grad = grads
                .get(var.as_tensor())
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            // The element with the largest gradient: well above f32 noise.
            let (at, &analytic) = grad
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
                .unwrap();
            let eps = 1e-2f32;
            let at_value = |v: f32| {
                let mut values = original.clone();
                values[at] = v;
                var.set(&Tensor::from_vec(values, var.shape(), var.device()).unwrap())
                    .unwrap();
                loss().to_scalar::<f32>().unwrap()
            };
            let numeric =
                (at_value(original[at] + eps) - at_value(original[at] - eps)) / (2.0 * eps);
            at_value(original[at]);
            assert!(
                (numeric - analytic).abs() <= 2e-3 + 0.05 * analytic.abs(),
                "{name}[{at}]: autograd {analytic} vs finite difference {numeric}"
            );
            checked += 1;
        }
        assert_eq!(checked, 6);
    }

    #[test]
    fn an_interrupted_run_resumes_to_the_same_weights() {
        let dir = tempfile::tempdir().unwrap();
        let model_dir = tiny_model(dir.path(), true);
        let data = synthetic_triplets(dir.path(), 64);
        let straight = dir.path().join("straight");
        train(&options(&model_dir, &straight, &data, Method::Ese)).unwrap();

        // Leave a run that stopped after its step-10 checkpoint: same settings, then resume.
        let resumed = dir.path().join("resumed");
        let mut first = options(&model_dir, &resumed, &data, Method::Ese);
        first.checkpoint_every = 10;
        first.pause_after = Some(10);
        let paused = train(&first).unwrap();
        assert!(!paused.finished && paused.steps_run == 10);
        assert!(output::work_dir(&resumed)
            .join("checkpoint/state.json")
            .exists());
        assert!(!resumed.exists(), "a paused run installed a model");
        first.pause_after = None;
        // Without --resume (or --fresh) an interrupted run is not silently discarded.
        let err = train(&first).unwrap_err().to_string();
        assert!(err.contains("--resume"), "{err}");
        // A crash between the two renames of the checkpoint's install leaves it aside as
        // `checkpoint.old`; resuming still starts from it.
        let checkpoint = output::work_dir(&resumed).join("checkpoint");
        std::fs::rename(&checkpoint, files::sibling(&checkpoint, "old")).unwrap();
        let mut again = first;
        again.resume = true;
        let summary = train(&again).unwrap();
        assert_eq!(summary.resumed_from, Some(10));
        // The same cut-off in the model's own install: loading it puts it back.
        std::fs::rename(&resumed, files::sibling(&resumed, "old")).unwrap();
        Encoder::load(&resumed, &EncoderOptions::default()).unwrap();
        assert!(resumed.join("model.safetensors").exists());
        let weights = |dir: &Path| std::fs::read(dir.join("model.safetensors")).unwrap();
        assert!(
            weights(&straight) == weights(&resumed),
            "resumed weights differ"
        );
        let log = std::fs::read_to_string(resumed.join("train_log.jsonl")).unwrap();
        assert_eq!(log.lines().count(), 24);
    }
}
