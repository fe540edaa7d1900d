//! Retrieval over a built index: dense (ESE vectors at a chosen depth and size), BM25, or their
//! reciprocal-rank fusion.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::corpus::Paragraph;
use crate::encoder::{Encoder, EncoderOptions, Precision};
use crate::index::manifest::Asker;
use crate::index::Index;
use crate::util::ms_since;
use crate::vectors::Matrix;

/// Questions longer than this are refused rather than silently truncated by the tokenizer.
pub const MAX_QUESTION_BYTES: usize = 4096;
/// The usual constant of reciprocal-rank fusion (Cormack et al., 2009).
const RRF_K: f32 = 60.0;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
    Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Dense,
    Bm25,
    Hybrid,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Dense => "dense",
            Mode::Bm25 => "bm25",
            Mode::Hybrid => "hybrid",
        })
    }
}

#[derive(Debug, Clone)]
pub struct SearchRequest<'a> {
    pub query: &'a str,
    pub k: usize,
    pub mode: Mode,
    pub layers: Option<usize>,
    pub dim: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub rank: usize,
    pub id: u64,
    pub title: String,
    pub text: String,
    pub score: f32,
}

impl Hit {
    /// The paragraph this hit points at, as a prompt needs it.
    pub fn paragraph(&self) -> Paragraph {
        Paragraph {
            title: self.title.clone(),
            text: self.text.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchTimings {
    pub encode_ms: f64,
    pub search_ms: f64,
    pub total_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SearchResponse {
    pub query: String,
    pub mode: Mode,
    pub layers: usize,
    pub dim: usize,
    pub hits: Vec<Hit>,
    pub timings: SearchTimings,
}

pub fn validate_question(question: &str) -> Result<&str> {
    let trimmed = question.trim();
    if trimmed.is_empty() {
        bail!("the question is empty");
    }
    if trimmed.len() > MAX_QUESTION_BYTES {
        bail!(
            "the question is too long ({} bytes; the limit is {MAX_QUESTION_BYTES})",
            trimmed.len()
        );
    }
    Ok(trimmed)
}

pub struct Retriever {
    pub index: Index,
    /// Shared with the retriever of the index's next generation when it has the same encoder.
    pub encoder: Arc<Encoder>,
}

impl Retriever {
    /// Opens an index with the encoder it was built with (or `model`, which must be the same
    /// weights), loading only the layers the index stores.
    pub fn open(index_dir: &Path, model: Option<&Path>, precision: Precision) -> Result<Self> {
        let index = Index::open(index_dir)?;
        let encoder = Self::load_encoder(&index, model, precision)?;
        Ok(Self {
            index,
            encoder: Arc::new(encoder),
        })
    }

    /// The index in `index_dir` as it is now (another generation of it, after a rebuild), every
    /// vector file loaded; keeps this retriever's encoder when the new index was built with the
    /// same one and stores no deeper layer.
    pub fn reopen(&self, index_dir: &Path) -> Result<Self> {
        let index = Index::open(index_dir)?;
        index.preload()?;
        let same_model = index.manifest.model == self.index.manifest.model;
        let deepest = index.manifest.layers.last().copied().unwrap_or(0);
        let encoder = if same_model && deepest <= self.encoder.depth() {
            Arc::clone(&self.encoder)
        } else {
            Arc::new(Self::load_encoder(&index, None, self.encoder.precision)?)
        };
        Ok(Self { index, encoder })
    }

    fn load_encoder(index: &Index, model: Option<&Path>, precision: Precision) -> Result<Encoder> {
        let identity = &index.manifest.model;
        let options = EncoderOptions {
            pooling: Some(identity.pooling),
            max_length: Some(identity.max_length),
            query_prefix: Some(identity.query_prefix.clone()),
            max_layers: index.manifest.layers.last().copied(),
            batch_size: None,
            precision,
        };
        let encoder = Encoder::load(model.unwrap_or(&identity.path), &options)?;
        identity.check_matches(&encoder)?;
        Ok(encoder)
    }

    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let started = Instant::now();
        let query = validate_question(request.query)?;
        let (layers, dim) = self.resolve(request, Asker::Cli)?;
        let mut timings = SearchTimings::default();
        let ranked = self
            .rank(
                &[query],
                None,
                request.mode,
                layers,
                dim,
                request.k,
                &mut timings,
            )?
            .pop()
            .unwrap_or_default();
        let mut response = self.respond(query, request.mode, layers, dim, ranked, timings)?;
        response.timings.total_ms = ms_since(started);
        Ok(response)
    }

    /// The depth and size `request` asks for, resolved against the index. BM25 has neither:
    /// for it they are ignored (and the defaults reported).
    pub fn resolve(&self, request: &SearchRequest, asker: Asker) -> Result<(usize, usize)> {
        let manifest = &self.index.manifest;
        match request.mode {
            Mode::Bm25 => manifest.resolve(None, None, asker),
            Mode::Dense | Mode::Hybrid => manifest.resolve(request.layers, request.dim, asker),
        }
    }

    /// The response to `query` from its ranking (as [`rank`](Self::rank) gives it): the
    /// ranked documents, fetched from the store. The caller sets `timings.total_ms`. A server
    /// ranks many clients' questions at once, then answers each with this.
    pub fn respond(
        &self,
        query: &str,
        mode: Mode,
        layers: usize,
        dim: usize,
        ranked: Vec<(u64, f32)>,
        timings: SearchTimings,
    ) -> Result<SearchResponse> {
        let hits = ranked
            .into_iter()
            .enumerate()
            .map(|(i, (id, score))| {
                let doc = self.index.document(id)?;
                Ok(Hit {
                    rank: i + 1,
                    id,
                    title: doc.title,
                    text: doc.text,
                    score,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SearchResponse {
            query: query.to_string(),
            mode,
            layers,
            dim,
            hits,
            timings,
        })
    }

    /// Ranked (id, score) lists for many questions at a resolved depth and size. Dense
    /// questions are encoded here as one batch, unless `encoded` holds them already (full
    /// width, at this depth, query prefix applied, a row per question).
    #[allow(clippy::too_many_arguments)]
    pub fn rank(
        &self,
        queries: &[&str],
        encoded: Option<&Matrix>,
        mode: Mode,
        layers: usize,
        dim: usize,
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        if k == 0 {
            bail!("k must be at least 1");
        }
        match mode {
            Mode::Dense => self.dense(queries, encoded, layers, dim, k, timings),
            Mode::Bm25 => self.bm25(queries, k, timings),
            Mode::Hybrid => {
                let depth = (k * 4).max(50);
                let dense = self.dense(queries, encoded, layers, dim, depth, timings)?;
                let lexical = self.bm25(queries, depth, timings)?;
                Ok(dense
                    .into_iter()
                    .zip(lexical)
                    .map(|(d, l)| {
                        let mut fused = reciprocal_rank_fusion(&[d, l]);
                        fused.truncate(k);
                        fused
                    })
                    .collect())
            }
        }
    }

    fn dense(
        &self,
        queries: &[&str],
        encoded: Option<&Matrix>,
        layers: usize,
        dim: usize,
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        let started = Instant::now();
        let vectors = match encoded {
            Some(full) if full.rows == queries.len() => {
                self.index.query_vectors(layers, dim, full)?
            }
            Some(full) => bail!(
                "{} vectors given for {} questions",
                full.rows,
                queries.len()
            ),
            None => {
                let full = self.encoder.encode_queries(queries, &[layers])?.remove(0);
                self.index.query_vectors(layers, dim, &full)?
            }
        };
        timings.encode_ms += ms_since(started);
        let started = Instant::now();
        let hits = self
            .index
            .dense(layers, dim)?
            .search_many(&vectors.data, k)?;
        timings.search_ms += ms_since(started);
        Ok(hits)
    }

    fn bm25(
        &self,
        queries: &[&str],
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        let started = Instant::now();
        let hits = queries
            .iter()
            .map(|q| self.index.bm25().search(q, k))
            .collect::<Result<Vec<_>>>()?;
        timings.search_ms += ms_since(started);
        Ok(hits)
    }
}

/// Fuses rankings by summing `1 / (RRF_K + rank)` per document; ties keep first-seen order.
pub fn reciprocal_rank_fusion(rankings: &[Vec<(u64, f32)>]) -> Vec<(u64, f32)> {
    let mut scores: HashMap<u64, f32> = HashMap::new();
    let mut order: Vec<u64> = Vec::new();
    for ranking in rankings {
        for (rank, &(id, _)) in ranking.iter().enumerate() {
            let entry = scores.entry(id).or_insert_with(|| {
                order.push(id);
                0.0
            });
            *entry += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut fused: Vec<(u64, f32)> = order.into_iter().map(|id| (id, scores[&id])).collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_rewards_documents_both_rankings_agree_on() {
        let dense = vec![(1, 0.9), (2, 0.8), (3, 0.7)];
        let lexical = vec![(3, 12.0), (4, 9.0), (1, 5.0)];
        let fused = reciprocal_rank_fusion(&[dense, lexical]);
        let ids: Vec<u64> = fused.iter().map(|h| h.0).collect();
        // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie, 1 seen first); 2: 1/62; 4: 1/62.
        assert_eq!(ids, vec![1, 3, 2, 4]);
        assert!((fused[0].1 - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-6);
    }

    #[test]
    fn questions_are_checked() {
        assert!(validate_question("  ").is_err());
        assert!(validate_question(&"x".repeat(MAX_QUESTION_BYTES + 1)).is_err());
        assert_eq!(validate_question(" who? ").unwrap(), "who?");
    }
}
