//! The training loop. [`train`] sets a [`Trainer`] up from the options (model, teacher, data,
//! optimizer, and the checkpoint to resume from), runs its steps and finishes: a paused run
//! leaves its checkpoint, a finished one installs the trained model.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use serde::Serialize;

use super::data::{self, Example};
use super::loss::{matryoshka_dims, Layout, Method, Sample};
use super::model::TrainableModel;
use super::optim::{scheduled_lr, AdamW, AdamWConfig};
use super::output::{self, CheckpointState};
use super::setup::{
    load_model, load_teacher, open_log, prepare_work_dir, read_sources, resume, run_record,
    schedule, validate,
};
use super::{RunRecord, TrainOptions, TrainSummary};
use crate::encoder::Encoder;
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
mod tests;
