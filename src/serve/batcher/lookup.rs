//! The look-up thread: encoded searches grouped by what they must share, each group ranked in
//! one call (faiss reads the vectors once for all of them) and answered.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use anyhow::{anyhow, Result};
use tokio::sync::oneshot;

use super::QueuedSearch;
use crate::index::Cell;
use crate::progress::ms_since;
use crate::retrieve::{Queries, Retriever, SearchResponse, SearchTimings, Strategy};
use crate::serve::metrics::Metrics;
use crate::vectors::Matrix;

/// A search with its question encoded, on its way to the search thread.
pub(super) struct Encoded {
    pub(super) retriever: Arc<Retriever>,
    pub(super) search: QueuedSearch,
    /// Full width, one row.
    pub(super) vector: Vec<f32>,
    pub(super) reply: oneshot::Sender<Result<SearchResponse>>,
}

/// What searches must share to be looked up in one call: the index build (by address), the
/// cell, strategy, k (the last two shape the ranking, not only its length) and efSearch.
type LookupKey = (usize, Cell, Strategy, usize, Option<usize>);

impl Encoded {
    fn key(&self) -> LookupKey {
        (
            Arc::as_ptr(&self.retriever) as usize,
            self.search.cell,
            self.search.strategy,
            self.search.k,
            self.search.ef_search,
        )
    }
}

/// Looks up the searches of each batch (and of any that arrived meanwhile), one call per
/// [`LookupKey`].
pub(super) fn run_searches(encoded: &mpsc::Receiver<Vec<Encoded>>, metrics: &Metrics) {
    while let Ok(mut searches) = encoded.recv() {
        searches.extend(encoded.try_iter().flatten());
        searches.retain(|s| !s.reply.is_closed());
        searches.sort_by_key(Encoded::key);
        while !searches.is_empty() {
            let key = searches[0].key();
            let same = searches.iter().take_while(|s| s.key() == key).count();
            let group: Vec<Encoded> = searches.drain(..same).collect();
            metrics.search_lookups.fetch_add(1, Ordering::Relaxed);
            metrics
                .searches_looked_up
                .fetch_add(group.len() as u64, Ordering::Relaxed);
            // A panic must fail these searches, not the thread every later one depends on.
            catch_unwind(AssertUnwindSafe(|| look_up(key, group)))
                .unwrap_or_else(|_| eprintln!("rag serve: a search panicked"));
        }
    }
}

/// Searches that share `key`, in one call.
fn look_up((_, cell, strategy, k, ef_search): LookupKey, group: Vec<Encoded>) {
    let started = Instant::now();
    let retriever = Arc::clone(&group[0].retriever);
    let cols = group[0].vector.len();
    let vectors: Vec<f32> = group
        .iter()
        .flat_map(|s| s.vector.iter().copied())
        .collect();
    let vectors = Matrix::from_vec(group.len(), cols, vectors);
    let queries: Vec<&str> = group.iter().map(|s| s.search.query.as_str()).collect();
    let mut timings = SearchTimings::default();
    let ranked = retriever.rank_with_ef(
        ef_search.or(retriever.tuning.ef_search),
        Queries {
            texts: &queries,
            encoded: Some(&vectors),
            lexical: None,
        },
        strategy,
        cell,
        k,
        &mut timings,
    );
    match ranked {
        Ok(ranked) => {
            for (search, ranked) in group.into_iter().zip(ranked) {
                let response = retriever.respond(
                    &search.search.query,
                    strategy,
                    cell,
                    ranked,
                    timings.clone(),
                );
                let response = response.map(|mut r| {
                    r.timings.total_ms = ms_since(started);
                    r
                });
                let _ = search.reply.send(response);
            }
        }
        Err(err) => {
            let message = format!("{err:#}");
            for search in group {
                let _ = search.reply.send(Err(anyhow!("search failed: {message}")));
            }
        }
    }
}
