//! Retrieval over a built index: dense (ESE vectors at a chosen depth and size), BM25, or a
//! fusion of both ([`fusion`]), in one hop or two ([`hops`]). Here the [`Retriever`]; what a
//! search asks for in `request.rs`, what it answers in `response.rs`.

pub mod fusion;
pub mod hops;
pub mod order;
mod request;
mod response;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::{bail, Result};
use rayon::prelude::*;

use crate::encoder::{Encoder, EncoderOptions, Precision};
use crate::index::links::Links;
use crate::index::{Cell, CellRefusal, Index};
use crate::progress::ms_since;
use crate::vectors::Matrix;
pub use request::{validate_question, Mode, SearchRequest, Strategy, Tuning, MAX_QUESTION_BYTES};
pub use response::{Hit, Scored, SearchResponse, SearchTimings};

/// How deep each ranking merged into another (fusion's inputs, each hop) is taken.
const CANDIDATES: usize = 50;

/// Questions to rank, and their dense query vectors if the caller encoded them already (full
/// width, at the ranking's depth, query prefix applied, a row per question).
#[derive(Clone, Copy)]
pub struct Queries<'a> {
    pub texts: &'a [&'a str],
    pub encoded: Option<&'a Matrix>,
    /// What BM25 reads instead of the texts (the second hop's shortened seeds), one per text.
    pub lexical: Option<&'a [&'a str]>,
}

impl<'a> Queries<'a> {
    /// Questions the ranking encodes itself.
    pub fn texts(texts: &'a [&'a str]) -> Self {
        Self {
            texts,
            encoded: None,
            lexical: None,
        }
    }
}

pub struct Retriever {
    pub index: Index,
    /// Shared with the retriever of the index's next build when it has the same encoder.
    pub encoder: Arc<Encoder>,
    pub tuning: Tuning,
    /// The index's title links, built on the first search that uses them.
    links: OnceLock<Links>,
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
            tuning: Tuning::default(),
            links: OnceLock::new(),
        })
    }

    /// The index in `index_dir` as it is now (another build of it, after a rebuild), every
    /// vector file loaded; keeps this retriever's encoder when the new index was built with the
    /// same one and stores no deeper layer.
    pub fn reopen(&self, index_dir: &Path) -> Result<Self> {
        let index = Index::open(index_dir)?;
        let same_model = index.manifest.model == self.index.manifest.model;
        let deepest = index.manifest.layers.last().copied().unwrap_or(0);
        let encoder = if same_model && deepest <= self.encoder.depth() {
            Arc::clone(&self.encoder)
        } else {
            Arc::new(Self::load_encoder(&index, None, self.encoder.precision)?)
        };
        let reopened = Self {
            index,
            encoder,
            tuning: self.tuning,
            links: OnceLock::new(),
        };
        reopened.preload()?;
        Ok(reopened)
    }

    /// Loads now what searches would otherwise load on first use: every vector file, and the
    /// title links when the tuning uses them (an index from before stored links reads every
    /// title for them), so that a server's first request does not pay for them.
    pub fn preload(&self) -> Result<()> {
        self.index.preload()?;
        if self.tuning.link_weight > 0.0 {
            self.links()?;
        }
        Ok(())
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

    /// The same retriever ranking only one shard's documents ([`Index::only_shard`]).
    pub fn only_shard(self, shard: crate::index::ShardSpec) -> Result<Self> {
        Ok(Self {
            index: self.index.only_shard(shard)?,
            ..self
        })
    }

    pub fn with_tuning(mut self, tuning: Tuning) -> Result<Self> {
        self.tuning = tuning.check()?;
        Ok(self)
    }

    /// The title links of the index, opened (or for an older index, built) on first use. Two
    /// searches racing here may both open them; one result is kept.
    fn links(&self) -> Result<&Links> {
        if let Some(built) = self.links.get() {
            return Ok(built);
        }
        let built = self.index.links()?;
        Ok(self.links.get_or_init(|| built))
    }

    pub fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let started = Instant::now();
        let query = validate_question(request.query)?;
        let cell = self.resolve(request)?;
        let mut timings = SearchTimings::default();
        let ranked = self
            .rank(
                Queries::texts(&[query]),
                request.strategy,
                cell,
                request.k,
                &mut timings,
            )?
            .pop()
            .unwrap_or_default();
        let mut response = self.respond(query, request.strategy, cell, ranked, timings)?;
        response.timings.total_ms = ms_since(started);
        Ok(response)
    }

    /// The depth and size `request` asks for, resolved against the index. BM25 has neither:
    /// for it they are ignored (and the defaults reported).
    pub fn resolve(&self, request: &SearchRequest) -> Result<Cell, CellRefusal> {
        let manifest = &self.index.manifest;
        if request.strategy.mode.is_dense() {
            manifest.resolve(request.layers, request.dim)
        } else {
            manifest.resolve(None, None)
        }
    }

    /// The response to `query` from its ranking (as [`rank`](Self::rank) gives it): the
    /// ranked documents, fetched from the store. The caller sets `timings.total_ms`. A server
    /// ranks many clients' questions at once, then answers each with this.
    pub fn respond(
        &self,
        query: &str,
        strategy: Strategy,
        cell: Cell,
        ranked: Vec<Scored>,
        timings: SearchTimings,
    ) -> Result<SearchResponse> {
        let hits = ranked
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let doc = self.index.document(s.id)?;
                Ok(Hit {
                    rank: i + 1,
                    id: s.id,
                    title: doc.title,
                    text: doc.text,
                    score: s.score,
                    hop: s.hop,
                    source: doc.source,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(SearchResponse {
            query: query.to_string(),
            mode: strategy.mode,
            hops: strategy.hops,
            cell,
            hits,
            timings,
        })
    }

    /// Rankings for many questions at a resolved cell. Dense questions are encoded here as one
    /// batch, unless the caller encoded them ([`Queries::encoded`]). A second hop searches
    /// again for every question and each of its best first-hop paragraphs
    /// ([`Tuning::hop_beam`]), all in one batch.
    pub fn rank(
        &self,
        queries: Queries,
        strategy: Strategy,
        cell: Cell,
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<Scored>>> {
        let ef_search = self.tuning.ef_search;
        self.rank_with_ef(ef_search, queries, strategy, cell, k, timings)
    }

    /// [`rank`](Self::rank) with an HNSW index visiting `ef_search` candidates per dense search
    /// instead of the tuning's (a server's request may name its own; 0: exact search).
    pub fn rank_with_ef(
        &self,
        ef_search: Option<usize>,
        queries: Queries,
        strategy: Strategy,
        cell: Cell,
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<Scored>>> {
        if k == 0 {
            bail!("k must be at least 1");
        }
        let scored = |ranking: Vec<(u64, f32)>| {
            ranking
                .into_iter()
                .map(|(id, score)| Scored { id, score, hop: 1 })
                .collect::<Vec<_>>()
        };
        if strategy.hops < 2 {
            let first = self.rank_once(ef_search, queries, strategy.mode, cell, k, timings)?;
            return Ok(first.into_iter().map(scored).collect());
        }
        let depth = k.max(CANDIDATES);
        let first = self.rank_once(ef_search, queries, strategy.mode, cell, depth, timings)?;
        let started = Instant::now();
        let links = (self.tuning.link_weight > 0.0)
            .then(|| self.links())
            .transpose()?;
        let mut texts = Vec::new();
        // The same seeds' BM25 queries, shorter by the tuning's rule.
        let mut lexical = Vec::new();
        // Per seed, the documents its text names (none without links).
        let mut named = Vec::new();
        for (query, ranking) in queries.texts.iter().zip(&first) {
            for &(id, _) in ranking.iter().take(self.tuning.hop_beam) {
                let seed = self.index.document(id)?;
                if let Some(links) = links {
                    named.push(links.mentioned(&seed.text, id));
                }
                texts.push(hops::query(query, &seed));
                lexical.push(self.tuning.hop_query.lexical(query, &seed));
            }
        }
        timings.search_ms += ms_since(started);
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let lexical: Vec<&str> = lexical.iter().map(String::as_str).collect();
        let mut seconds = if texts.is_empty() {
            Vec::new()
        } else {
            self.rank_once(
                ef_search,
                Queries {
                    texts: &texts,
                    encoded: None,
                    lexical: Some(&lexical),
                },
                strategy.mode,
                cell,
                CANDIDATES,
                timings,
            )?
        }
        .into_iter();
        let mut named = named.into_iter();
        let weights = (self.tuning.hop_weight, self.tuning.link_weight);
        Ok(first
            .iter()
            .map(|ranking| {
                let seeds = ranking.len().min(self.tuning.hop_beam);
                let seconds: Vec<_> = seconds.by_ref().take(seeds).collect();
                let named: Vec<_> = named.by_ref().take(seeds).collect();
                hops::merge(ranking, &seconds, &named, weights, k)
                    .into_iter()
                    .map(|(id, score, hop)| Scored { id, score, hop })
                    .collect()
            })
            .collect())
    }

    /// One search per question, best first; BM25 reads the queries' `lexical` texts where
    /// given, else the questions.
    fn rank_once(
        &self,
        ef_search: Option<usize>,
        queries: Queries,
        mode: Mode,
        cell: Cell,
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        let lexical = queries.lexical.unwrap_or(queries.texts);
        if mode == Mode::Bm25 {
            return self.bm25(lexical, k, timings);
        }
        if mode == Mode::Dense {
            return self.dense(ef_search, queries, cell, k, timings);
        }
        let depth = (k * 4).max(CANDIDATES);
        // Side by side: a second hop's BM25 queries are whole paragraphs (the larger part of a
        // two-hop search at millions of documents) while its dense ones are encoded.
        let ((dense, dense_timings), (lexical, lexical_timings)) = rayon::join(
            || {
                let mut t = SearchTimings::default();
                (self.dense(ef_search, queries, cell, depth, &mut t), t)
            },
            || {
                let mut t = SearchTimings::default();
                (self.bm25(lexical, depth, &mut t), t)
            },
        );
        timings.add(&dense_timings);
        timings.add(&lexical_timings);
        let (dense, lexical) = (dense?, lexical?);
        Ok(dense
            .into_iter()
            .zip(lexical)
            .map(|(d, l)| {
                let mut fused = match mode {
                    Mode::Fusion => fusion::convex_fusion(&d, &l, self.tuning.fusion_weight),
                    _ => fusion::reciprocal_rank_fusion(&[d, l]),
                };
                fused.truncate(k);
                fused
            })
            .collect())
    }

    fn dense(
        &self,
        ef_search: Option<usize>,
        queries: Queries,
        cell: Cell,
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        let started = Instant::now();
        let texts = queries.texts;
        let vectors = match queries.encoded {
            Some(full) if full.rows == texts.len() => self.index.query_vectors(cell, full)?,
            Some(full) => bail!("{} vectors given for {} questions", full.rows, texts.len()),
            None => {
                let full = self
                    .encoder
                    .encode_queries(texts, &[cell.layers])?
                    .remove(0);
                self.index.query_vectors(cell, &full)?
            }
        };
        timings.encode_ms += ms_since(started);
        let started = Instant::now();
        // faiss's exact-distance order, which a sharded index's merge reproduces; near-ties are
        // settled where lists meet (fusion, hops, sentence choice).
        let hits = self.index.search_dense(cell, &vectors.data, k, ef_search)?;
        timings.search_ms += ms_since(started);
        Ok(hits)
    }

    fn bm25_syntax(&self) -> crate::index::bm25::QuerySyntax {
        match self.tuning.bm25_syntax {
            true => crate::index::bm25::QuerySyntax::Tantivy,
            false => crate::index::bm25::QuerySyntax::PlainText,
        }
    }

    fn bm25(
        &self,
        queries: &[&str],
        k: usize,
        timings: &mut SearchTimings,
    ) -> Result<Vec<Vec<(u64, f32)>>> {
        let started = Instant::now();
        let hits = queries
            .par_iter()
            .map(|q| self.index.search_bm25(q, self.bm25_syntax(), k))
            .collect::<Result<Vec<_>>>()?;
        timings.search_ms += ms_since(started);
        Ok(hits)
    }
}
