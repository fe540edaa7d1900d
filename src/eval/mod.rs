//! Evaluation on HotpotQA: retrieval recall of the supporting paragraphs and, with a generator,
//! exact match and F1 of the answers, over a grid of depth x dimension. Runs live in
//! `eval/runs/<name>/` and resume where they stopped ([`run`]); [`report`] writes what people
//! read. [`sts`] is the intrinsic benchmark: STS Spearman correlations per layer x size.

pub mod heatmap;
pub mod metrics;
pub mod report;
pub mod run;
pub mod sts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::index::{self, BuildOptions, Manifest};

/// The cut-offs recall is reported at.
pub const RECALL_KS: [usize; 4] = [1, 2, 5, 10];

/// Retrieval quality for one question.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalScores {
    /// Fraction of supporting titles in the top k, per k.
    pub recall: BTreeMap<usize, f64>,
    /// Whether every supporting title is in the top k, per k.
    pub all_supporting: BTreeMap<usize, bool>,
}

impl RetrievalScores {
    pub fn of(retrieved: &[String], gold: &[String]) -> Self {
        Self {
            recall: RECALL_KS
                .iter()
                .map(|&k| (k, metrics::recall_at_k(retrieved, gold, k)))
                .collect(),
            all_supporting: RECALL_KS
                .iter()
                .map(|&k| (k, metrics::all_in_top_k(retrieved, gold, k)))
                .collect(),
        }
    }
}

/// An index storing every depth in `depths`: `options.index_dir` when it does, else an
/// `eval-...` index beside it that does (one already built is reused), built when there is none
/// with all the depths in one encoding pass. `options` says what to build it from.
pub fn index_with_depths(options: &BuildOptions, depths: &[usize]) -> Result<PathBuf> {
    let covers = |dir: &Path| {
        Manifest::read(dir)
            .map(|m| depths.iter().all(|d| m.layers.contains(d)))
            .unwrap_or(false)
    };
    if covers(&options.index_dir) {
        return Ok(options.index_dir.clone());
    }
    let parent = options
        .index_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let key = build_key(options);
    let suffix = format!("-{key}");
    if let Ok(entries) = std::fs::read_dir(parent) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("eval-") && name.ends_with(&suffix) && covers(&entry.path()) {
                return Ok(entry.path());
            }
        }
    }
    let layers: Vec<String> = depths.iter().map(usize::to_string).collect();
    let dir = parent.join(format!("eval-L{}{suffix}", layers.join("-")));
    eprintln!(
        "{} has no vectors for layers {}: building {} (one encoding pass for all of them)",
        options.index_dir.display(),
        layers.join(","),
        dir.display()
    );
    let mut build = options.clone();
    build.index_dir = dir.clone();
    build.layers = Some(depths.to_vec());
    index::build(&build).with_context(|| format!("building {}", dir.display()))?;
    Ok(dir)
}

/// Names what an eval index is built from (corpus, encoder, template), so that a cached one is
/// reused only for the same inputs.
fn build_key(options: &BuildOptions) -> String {
    let mut hasher = Sha256::new();
    for path in &options.corpus {
        hasher.update(path.to_string_lossy().as_bytes());
        hasher.update(std::fs::metadata(path).map_or(0, |m| m.len()).to_le_bytes());
    }
    hasher.update(options.model_dir.to_string_lossy().as_bytes());
    // The batch size changes speed, not vectors.
    let encoder = crate::encoder::EncoderOptions {
        batch_size: None,
        ..options.encoder.clone()
    };
    hasher.update(format!("{encoder:?}").as_bytes());
    hasher.update(options.template.as_bytes());
    hex::encode(&hasher.finalize()[..4])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_question_scores_cover_every_cut_off() {
        let titles = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let scores = RetrievalScores::of(&titles(&["X", "A", "Y", "B"]), &titles(&["A", "B"]));
        assert_eq!(scores.recall[&1], 0.0);
        assert_eq!(scores.recall[&2], 0.5);
        assert_eq!(scores.recall[&5], 1.0);
        assert!(!scores.all_supporting[&2]);
        assert!(scores.all_supporting[&5]);
        assert_eq!(scores.recall.len(), RECALL_KS.len());
    }
}
