//! Evaluation on HotpotQA: retrieval recall of the supporting paragraphs (and, with a generator,
//! exact match and F1 of the answers).

pub mod metrics;

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use crate::corpus::Question;
use crate::retrieve::{Mode, Retriever, SearchTimings};

/// The cut-offs recall is reported at.
pub const RECALL_KS: [usize; 4] = [1, 2, 5, 10];

#[derive(Debug, Clone, Serialize)]
pub struct RetrievalReport {
    pub mode: Mode,
    pub layers: usize,
    pub dim: usize,
    pub questions: usize,
    /// Mean fraction of supporting titles in the top k, per k.
    pub recall: BTreeMap<usize, f64>,
    /// Fraction of questions with every supporting title in the top k, per k.
    pub all_supporting: BTreeMap<usize, f64>,
    pub seconds: f64,
}

/// Retrieved titles per question (the deepest cut-off's worth), in question order.
pub type Rankings = Vec<Vec<String>>;

/// Ranks every question at one depth and size and scores the rankings against the supporting
/// titles.
pub fn evaluate_retrieval(
    retriever: &Retriever,
    questions: &[Question],
    mode: Mode,
    layers: usize,
    dim: usize,
) -> Result<(RetrievalReport, Rankings)> {
    let started = std::time::Instant::now();
    let texts: Vec<&str> = questions.iter().map(|q| q.question.as_str()).collect();
    let deepest = *RECALL_KS.last().expect("cut-offs");
    let mut timings = SearchTimings::default();
    let ranked = retriever.rank(&texts, mode, layers, dim, deepest, &mut timings)?;
    let rankings: Rankings = ranked
        .iter()
        .map(|hits| {
            hits.iter()
                .map(|&(id, _)| Ok(retriever.index.document(id)?.title))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<_>>()?;
    let n = questions.len().max(1) as f64;
    let mut recall = BTreeMap::new();
    let mut all_supporting = BTreeMap::new();
    for k in RECALL_KS {
        let (r, a) = questions.iter().zip(&rankings).fold((0.0, 0.0), |(r, a), (q, titles)| {
            let gold = &q.supporting_titles;
            (
                r + metrics::recall_at_k(titles, gold, k),
                a + f64::from(u8::from(metrics::all_in_top_k(titles, gold, k))),
            )
        });
        recall.insert(k, r / n);
        all_supporting.insert(k, a / n);
    }
    Ok((
        RetrievalReport {
            mode,
            layers,
            dim,
            questions: questions.len(),
            recall,
            all_supporting,
            seconds: started.elapsed().as_secs_f64(),
        },
        rankings,
    ))
}
