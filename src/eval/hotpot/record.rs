//! What a run keeps on disk: its settings (`config.json`) and one line of `predictions.jsonl`
//! per question and cell, read back whole when a run resumes or is reported.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::scores::RetrievalScores;
use crate::ask::context::SentenceWeights;
use crate::encoder::Precision;
use crate::index::Cell;
use crate::retrieve::{Mode, Strategy, Tuning};

pub const PREDICTIONS_FILE: &str = "predictions.jsonl";
pub const CONFIG_FILE: &str = "config.json";

/// Where a run's context comes from: retrieval at an index [`Cell`], or the gold paragraphs
/// (both fields `None`, as the run files have it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunCell {
    pub layers: Option<usize>,
    pub dim: Option<usize>,
}

impl RunCell {
    pub const ORACLE: RunCell = RunCell {
        layers: None,
        dim: None,
    };

    pub fn retrieval(layers: usize, dim: usize) -> Self {
        Self {
            layers: Some(layers),
            dim: Some(dim),
        }
    }

    /// The index cell searched (`None`: the oracle's gold paragraphs).
    pub fn searched(&self) -> Option<Cell> {
        Some(Cell::new(self.layers?, self.dim?))
    }
}

impl std::fmt::Display for RunCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.layers, self.dim) {
            (Some(layers), Some(dim)) => write!(f, "layers {layers}, dim {dim}"),
            _ => write!(f, "the gold paragraphs"),
        }
    }
}

/// What a run is; a run directory is resumed only with the same settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub questions_file: PathBuf,
    pub questions: usize,
    pub cells: Vec<RunCell>,
    pub mode: Mode,
    /// Absent in runs made before the second hop: one.
    #[serde(default = "one_hop")]
    pub hops: u8,
    /// Fusion's and the second hop's weights (absent in runs made before they existed).
    #[serde(default)]
    pub tuning: Option<Tuning>,
    pub top_k: usize,
    /// The context's token budget; 0 (and absent, in older runs) is whole paragraphs.
    #[serde(default)]
    pub context_tokens: usize,
    /// Prompts built and measured, no answers generated.
    #[serde(default)]
    pub context_only: bool,
    /// How sentences were scored, when they were chosen (absent in older runs: the defaults).
    #[serde(default)]
    pub sentence_weights: Option<SentenceWeights>,
    /// `--context-floor` where not 0 (absent: 0, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub context_floor: usize,
    /// `--widen-tokens` where it widens (absent: 0, never, as in every run made before it
    /// existed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub widen_tokens: usize,
    pub oracle: bool,
    /// The generator's file name and prompt style, or `None` for retrieval only.
    pub generator: Option<String>,
    pub prompt_style: Option<String>,
    pub max_tokens: Option<usize>,
    /// `--yes-no-bias` where it is not 0 (plain greedy, and every run made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yes_no_bias: Option<f32>,
    /// `--option-bias`, unless off (plain greedy, and every run made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_bias: Option<f32>,
    /// `--option-facts`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub option_facts: bool,
    /// `--full-dates`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full_dates: bool,
    /// `--option-dates`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub option_dates: bool,
    /// `--option-counts`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub option_counts: bool,
    /// `--option-measures`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub option_measures: bool,
    /// `--shared-place`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_place: bool,
    /// `--number-words`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub number_words: bool,
    /// `--answer-again`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answer_again: bool,
    /// `--extractive`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub extractive: bool,
    /// `--yes-no-facts`, where on (absent: off, as in every run made before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yes_no_facts: bool,
    pub index: Option<PathBuf>,
    /// The run whose recorded rankings this one reads instead of searching
    /// (`--rankings-from`); `index` then only supplies the documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rankings_from: Option<PathBuf>,
    /// The arithmetic of the vectors searched, where it is not f32 on both sides (absent: f32,
    /// as in every run made before bf16 indexes, or no vectors searched): the same model and
    /// index rank differently at another precision, so a run is not resumed across one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precisions>,
}

/// The questions' precision (this run's encoder) and the documents' (the index's build); the
/// default, f32 on both sides, is what a run without the field was made at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precisions {
    pub questions: Precision,
    pub documents: Precision,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn one_hop() -> u8 {
    1
}

impl RunConfig {
    pub fn strategy(&self) -> Result<Strategy> {
        Strategy::new(self.mode, self.hops)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PredictionTimings {
    /// Questions are encoded once for every depth and searched as one batch per cell; these are
    /// those batches' time per question.
    pub encode_ms: f64,
    pub search_ms: f64,
    pub prompt_tokens: usize,
    /// Of the prompt tokens, those whose state was reused from the previous question.
    #[serde(default)]
    pub reused_tokens: usize,
    pub generated_tokens: usize,
    #[serde(default)]
    pub select_ms: f64,
    pub prompt_eval_ms: f64,
    pub generation_ms: f64,
    /// From the question's retrieval to its answer's last token.
    #[serde(default)]
    pub total_ms: f64,
}

/// One line of `predictions.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prediction {
    pub id: String,
    pub cell: RunCell,
    pub question: String,
    pub gold: String,
    pub prediction: Option<String>,
    pub em: Option<bool>,
    pub f1: Option<f64>,
    /// Titles of the paragraphs put in the prompt, best first.
    pub context_titles: Vec<String>,
    /// Paragraphs dropped to fit the model's context.
    pub dropped: usize,
    /// The sentences put in the prompt, per paragraph in `context_titles` (absent when whole
    /// paragraphs went in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
    /// Whether the gold answer appears in the prompt's context, normalised as for exact match
    /// (none for yes/no answers, which never appear as such).
    #[serde(default)]
    pub answer_in_context: Option<bool>,
    /// Retrieved titles, best first (none for the oracle).
    pub retrieved: Vec<String>,
    pub retrieval: RetrievalScores,
    /// The yes-token's logit minus the no-token's, for answers that opened with yes or no.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yes_no_margin: Option<f32>,
    /// The same margin with no documents (`--yes-no-prior`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yes_no_prior: Option<f32>,
    /// How the answer was chosen between the question's two options, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option_choice: Option<crate::generate::OptionChoice>,
    /// How the answer was decided by the years of the two documents it chose between
    /// (`--option-dates`), where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dated_choice: Option<crate::generate::DatedChoice>,
    /// How the answer was decided by the counts the two documents it chose between give
    /// (`--option-counts`), where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_choice: Option<crate::generate::CountedChoice>,
    /// How the answer was decided by the heights or populations the two documents it compared
    /// give (`--option-measures`), where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_choice: Option<crate::generate::MeasuredChoice>,
    /// How a "yes" became "no" because a document it named does not mention the place asked
    /// about (`--shared-place`), where it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place_check: Option<crate::generate::PlaceCheck>,
    /// The answer that echoed the question and the one given again (`--answer-again`), where
    /// it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<crate::generate::Echo>,
    /// The answer found in none of its prompt's documents, and the prompt it came from, where
    /// the answer was given again from a wider context (`--widen-tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widened: Option<crate::ask::Widened>,
    pub timings: PredictionTimings,
}

/// The complete lines of a predictions file; a last line cut short by a crash is removed.
pub fn read_predictions(path: &Path) -> Result<Vec<Prediction>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let complete = text.rfind('\n').map_or(0, |i| i + 1);
    if complete < text.len() {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        file.set_len(complete as u64)
            .with_context(|| format!("truncating {}", path.display()))?;
    }
    text[..complete]
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .with_context(|| format!("{} line {} is damaged", path.display(), i + 1))
        })
        .collect()
}
