//! What training leaves on disk: checkpoints to resume from, and the finished model in the
//! Hugging Face / sentence-transformers layout that `rag index --model DIR` loads unchanged,
//! with its model card.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::loss::Method;
use super::model::TrainableModel;
use super::optim::AdamW;
use super::{RunRecord, TrainSummary};
use crate::encoder::Pooling;
use crate::files;

/// Files of the source checkpoint that describe the tokenizer and sentence-transformers
/// settings, copied into the trained model as they are.
const COPIED_FILES: [&str; 7] = [
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
];

/// A training run's working directory: `<out>.training/` beside the output.
pub fn work_dir(out_dir: &Path) -> PathBuf {
    files::sibling(out_dir, "training")
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CheckpointState {
    /// Optimizer steps completed.
    pub step: usize,
    pub examples: usize,
    pub seconds: f64,
    pub record: RunRecord,
}

fn save_tensors(tensors: &HashMap<String, Tensor>, path: &Path) -> Result<()> {
    candle_core::safetensors::save(tensors, path)
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes `fill`'s files into `<dir>.tmp` and then swaps it in place of `dir`, so an
/// interruption leaves either the previous directory or the new one.
fn replace_dir(dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = files::sibling(dir, "tmp");
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
    }
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    fill(&tmp)?;
    files::install_dir(&tmp, dir)
}

pub fn save_checkpoint(work: &Path, optimizer: &AdamW, state: &CheckpointState) -> Result<()> {
    replace_dir(&work.join("checkpoint"), |dir| {
        let vars: HashMap<String, Tensor> = optimizer
            .vars()
            .iter()
            .map(|(name, var)| (name.clone(), var.as_tensor().detach()))
            .collect();
        save_tensors(&vars, &dir.join("model.safetensors"))?;
        save_tensors(
            &optimizer.state_tensors(&Device::Cpu)?,
            &dir.join("optimizer.safetensors"),
        )?;
        files::write_json_atomic(&dir.join("state.json"), state)
    })
}

/// Restores the weights and optimizer state of `<work>/checkpoint`, if there is one.
pub fn load_checkpoint(work: &Path, optimizer: &mut AdamW) -> Result<Option<CheckpointState>> {
    let dir = work.join("checkpoint");
    // A run killed between the two renames of a checkpoint save left it as `checkpoint.old`.
    files::recover_interrupted_install(&dir)?;
    if !dir.join("state.json").exists() {
        return Ok(None);
    }
    let state: CheckpointState = files::read_json(&dir.join("state.json"))?;
    let load = |name: &str| {
        let path = dir.join(name);
        candle_core::safetensors::load(&path, &Device::Cpu)
            .with_context(|| format!("reading {}", path.display()))
    };
    let weights = load("model.safetensors")?;
    for (name, var) in optimizer.vars() {
        let saved = weights
            .get(name)
            .with_context(|| format!("{}: checkpoint lacks {name}", dir.display()))?;
        var.set(saved)?;
    }
    optimizer.restore(&load("optimizer.safetensors")?, state.step)?;
    Ok(Some(state))
}

fn pooling_config(pooling: Pooling, dim: usize) -> serde_json::Value {
    json!({
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": pooling == Pooling::Cls,
        "pooling_mode_mean_tokens": pooling == Pooling::Mean,
        "pooling_mode_max_tokens": false,
        "pooling_mode_mean_sqrt_len_tokens": false,
    })
}

/// Writes the trained model into `dir`: weights, config, tokenizer, pooling (and Dense) modules,
/// `ese.json` and the model card.
pub fn write_model(
    dir: &Path,
    source: &Path,
    model: &TrainableModel,
    ese_json: &serde_json::Value,
    card: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir.join("1_Pooling"))
        .with_context(|| format!("creating {}", dir.display()))?;
    save_tensors(&model.encoder_tensors()?, &dir.join("model.safetensors"))?;
    for name in COPIED_FILES {
        let from = source.join(name);
        if from.exists() {
            std::fs::copy(&from, dir.join(name))
                .with_context(|| format!("copying {}", from.display()))?;
        }
    }
    files::write_json_atomic(
        &dir.join("1_Pooling/config.json"),
        &pooling_config(model.pooling, model.config.hidden_size),
    )?;
    let mut modules = vec![
        json!({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}),
        json!({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}),
    ];
    if let Some((config, tensors)) = model.head_tensors()? {
        std::fs::create_dir_all(dir.join("2_Dense"))
            .with_context(|| format!("creating {}", dir.display()))?;
        files::write_json_atomic(&dir.join("2_Dense/config.json"), &config)?;
        save_tensors(&tensors, &dir.join("2_Dense/model.safetensors"))?;
        modules.push(json!({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}));
    }
    let normalize = modules.len();
    modules.push(json!({
        "idx": normalize, "name": normalize.to_string(), "path": format!("{normalize}_Normalize"),
        "type": "sentence_transformers.models.Normalize"
    }));
    files::write_json_atomic(&dir.join("modules.json"), &modules)?;
    files::write_json_atomic(&dir.join("ese.json"), ese_json)?;
    files::write_atomic(&dir.join("README.md"), card.as_bytes())
}

/// Installs the finished model at `out_dir` (replacing an older one whole).
pub fn install_model(out_dir: &Path, fill: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    if let Some(parent) = out_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    replace_dir(out_dir, fill)
}

/// The model card's heading and training table; evaluations are appended under it.
pub(super) fn model_card(record: &RunRecord, summary: &TrainSummary) -> String {
    let data: Vec<String> = record
        .data
        .iter()
        .map(|d| format!("{} ({} examples)", d.source.path().display(), d.examples))
        .collect();
    let mode = match record.objective.mode {
        Method::Ese => {
            let objective = &record.objective;
            let mut settings = vec![format!("compression size {}", objective.compression_size)];
            if objective.shallow_weight != 1.0 {
                settings.push(format!(
                    "shallow layers weighted x{}",
                    objective.shallow_weight
                ));
            }
            if objective.distill_weight > 0.0 {
                settings.push(format!(
                    "similarity distillation x{}",
                    objective.distill_weight
                ));
            }
            if objective.embedding_distill_weight > 0.0 {
                settings.push(format!(
                    "embedding distillation x{}",
                    objective.embedding_distill_weight
                ));
            }
            format!("ese ({})", settings.join(", "))
        }
        Method::Pooler => format!(
            "pooler ({} dims{})",
            record.pooler_dim.unwrap_or(0),
            if record.two_step { ", two-step" } else { "" }
        ),
        other => other.to_string(),
    };
    format!(
        "# {name}\n\nTrained by `rag train` from `{base}`.\n\n\
         | setting | value |\n| --- | --- |\n\
         | mode | {mode} |\n| pooling | {pooling} |\n| data | {data} |\n\
         | steps | {steps} (batch {batch} x accumulation {accum}, {epochs} epoch(s)) |\n\
         | learning rate | {lr} (warm-up {warmup} steps, linear decay) |\n| max length | {max_len} |\n| seed | {seed} |\n\
         | time | {seconds:.0} s ({rate:.1} examples/s) |\n| final loss | {loss:.4} |\n",
        name = summary.out_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        base = record.base_model,
        pooling = record.pooling,
        data = data.join(", "),
        steps = record.steps,
        batch = record.batch_size,
        accum = record.grad_accum,
        epochs = record.epochs,
        lr = record.lr,
        warmup = record.warmup_steps,
        max_len = record.max_len,
        seed = record.seed,
        seconds = summary.seconds,
        rate = summary.examples_per_second,
        loss = summary.final_loss,
    )
}

/// Appends an evaluation section (markdown) to a trained model's card.
pub fn append_card_section(model_dir: &Path, section: &str) -> Result<()> {
    let path = model_dir.join("README.md");
    let mut card =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    card.push('\n');
    card.push_str(section);
    files::write_atomic(&path, card.as_bytes())
}
