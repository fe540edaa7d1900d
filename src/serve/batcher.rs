//! Cross-request embedding batching. Every text the server encodes (search questions and
//! `/v1/embeddings` inputs) goes into one bounded queue; a dedicated thread takes the first job,
//! keeps taking more for a short window or until a token budget is spent, and encodes them all
//! in one `Encoder::encode` call at every depth they asked for (one pass yields all of them).
//! The encoder is CPU-bound and blocking, so it never runs on the async executor.
//!
//! A search's question goes the same way, and its batch's searches then go together to a
//! second thread, which looks them up in one faiss call per kind of search (faiss reads the
//! vectors once for all of them instead of once each) while the next batch is encoded.
//!
//! Every job carries the generation of the index it was validated against (see
//! [`super::live`]), and is encoded and looked up with that one, whatever the server serves by
//! the time it is answered.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::oneshot;

use super::error::ApiError;
use super::metrics::Metrics;
use crate::progress::ms_since;
use crate::retrieve::{Retriever, SearchResponse, SearchTimings, Strategy};
use crate::vectors::Matrix;

#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// How long the first job of a batch waits for company.
    pub window: Duration,
    /// Tokens per forward pass; a job that would overflow it starts the next batch.
    pub max_tokens: usize,
    /// Jobs waiting beyond this are refused with 503.
    pub queue: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self {
            window: Duration::from_millis(2),
            max_tokens: 8192,
            queue: 256,
        }
    }
}

struct Job {
    retriever: Arc<Retriever>,
    texts: Vec<String>,
    tokens: usize,
    depth: usize,
    reply: Reply,
}

/// A search whose question waits in the queue (see [`Batcher::search`]).
pub struct QueuedSearch {
    /// As the client sent it (the queued text has the encoder's query prefix).
    pub query: String,
    pub k: usize,
    pub strategy: Strategy,
    /// Resolved against the index, like the job's depth.
    pub dim: usize,
}

/// What a job is owed: its vectors, or what its search finds with them.
enum Reply {
    Vectors(oneshot::Sender<Result<Matrix>>),
    Search(QueuedSearch, oneshot::Sender<Result<SearchResponse>>),
}

impl Reply {
    fn is_closed(&self) -> bool {
        match self {
            Self::Vectors(sender) => sender.is_closed(),
            Self::Search(_, sender) => sender.is_closed(),
        }
    }

    // Sends ignore a client gone meanwhile: nothing to do then.
    fn fail(self, err: anyhow::Error) {
        match self {
            Self::Vectors(sender) => drop(sender.send(Err(err))),
            Self::Search(_, sender) => drop(sender.send(Err(err))),
        }
    }
}

/// A search with its question encoded, on its way to the search thread.
struct Encoded {
    retriever: Arc<Retriever>,
    search: QueuedSearch,
    depth: usize,
    /// Full width, one row.
    vector: Vec<f32>,
    reply: oneshot::Sender<Result<SearchResponse>>,
}

/// What searches must share to be looked up in one call: the index generation (by address),
/// depth, size, strategy and k (the last two shape the ranking, not only its length).
type LookupKey = (usize, usize, usize, Strategy, usize);

impl Encoded {
    fn key(&self) -> LookupKey {
        (
            Arc::as_ptr(&self.retriever) as usize,
            self.depth,
            self.search.dim,
            self.search.strategy,
            self.search.k,
        )
    }
}

pub struct Batcher {
    jobs: SyncSender<Job>,
    metrics: Arc<Metrics>,
}

impl Batcher {
    /// Starts the encoding thread. It stops once every `Batcher` handle is dropped and the jobs
    /// already queued are answered.
    pub fn start(
        options: BatchOptions,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, Vec<JoinHandle<()>>)> {
        let (jobs, queue) = mpsc::sync_channel(options.queue.max(1));
        // Bounded by the job queue: a search is in one place or the other.
        let (searches, encoded) = mpsc::channel();
        let search_metrics = Arc::clone(&metrics);
        let search_worker = std::thread::Builder::new()
            .name("rag-search".into())
            .spawn(move || run_searches(&encoded, &search_metrics))
            .context("starting the search thread")?;
        let worker_metrics = Arc::clone(&metrics);
        let worker = std::thread::Builder::new()
            .name("rag-embed".into())
            .spawn(move || run(&options, &queue, &searches, &worker_metrics))
            .context("starting the embedding thread")?;
        // The embedding thread first: it hands the search thread its last searches on the way.
        Ok((Self { jobs, metrics }, vec![worker, search_worker]))
    }

    /// Full-width vectors of `texts` at `depth`, one row per text, encoded (by `retriever`'s
    /// encoder) together with whatever else is queued. `tokens` (the texts' token count) is what
    /// the batch budget counts.
    pub async fn encode(
        &self,
        retriever: Arc<Retriever>,
        texts: Vec<String>,
        tokens: usize,
        depth: usize,
    ) -> Result<Matrix, ApiError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            retriever,
            texts,
            tokens,
            depth,
            reply: Reply::Vectors(reply),
        };
        self.submit(job, answer).await
    }

    /// `retriever`'s index searched with `text` (the question with the encoder's query prefix,
    /// `tokens` long) at `depth`: encoded in a batch like [`Self::encode`]'s texts, then looked
    /// up together with the rest of its batch's searches.
    pub async fn search(
        &self,
        retriever: Arc<Retriever>,
        text: String,
        tokens: usize,
        depth: usize,
        search: QueuedSearch,
    ) -> Result<SearchResponse, ApiError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            retriever,
            texts: vec![text],
            tokens,
            depth,
            reply: Reply::Search(search, reply),
        };
        self.submit(job, answer).await
    }

    async fn submit<T>(
        &self,
        job: Job,
        answer: oneshot::Receiver<Result<T>>,
    ) -> Result<T, ApiError> {
        self.metrics.embed_queue.fetch_add(1, Ordering::Relaxed);
        if let Err(err) = self.jobs.try_send(job) {
            self.metrics.embed_queue.fetch_sub(1, Ordering::Relaxed);
            return Err(match err {
                TrySendError::Full(_) => ApiError::overloaded("embedding"),
                TrySendError::Disconnected(_) => {
                    ApiError::unavailable("the server is shutting down")
                }
            });
        }
        answer
            .await
            .map_err(|_| ApiError::internal(anyhow!("a worker thread dropped the request")))?
            .map_err(ApiError::internal)
    }
}

fn run(
    options: &BatchOptions,
    queue: &mpsc::Receiver<Job>,
    searches: &mpsc::Sender<Vec<Encoded>>,
    metrics: &Metrics,
) {
    // A job taken while filling a batch that did not fit its budget (or that needs another
    // encoder, after the index was rebuilt with one) opens the next one.
    let mut carried: Option<Job> = None;
    loop {
        let first = match carried.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
        };
        let deadline = Instant::now() + options.window;
        let encoder = Arc::clone(&first.retriever.encoder);
        let mut tokens = first.tokens;
        let mut batch = vec![first];
        while tokens < options.max_tokens {
            let job = match queue.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            };
            if tokens + job.tokens > options.max_tokens
                || !Arc::ptr_eq(&job.retriever.encoder, &encoder)
            {
                carried = Some(job);
                break;
            }
            tokens += job.tokens;
            batch.push(job);
        }
        metrics
            .embed_queue
            .fetch_sub(batch.len(), Ordering::Relaxed);
        // Clients that gave up while queued cost nothing.
        batch.retain(|job| !job.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        metrics.embed_batches.fetch_add(1, Ordering::Relaxed);
        metrics
            .embed_batched_requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let texts: Vec<&str> = batch
            .iter()
            .flat_map(|j| j.texts.iter().map(String::as_str))
            .collect();
        metrics
            .embed_batched_texts
            .fetch_add(texts.len() as u64, Ordering::Relaxed);
        let mut depths: Vec<usize> = batch.iter().map(|j| j.depth).collect();
        depths.sort_unstable();
        depths.dedup();
        // A panic inside the encoder must fail this batch, not kill the thread every later
        // request depends on.
        let encoded = catch_unwind(AssertUnwindSafe(|| encoder.encode(&texts, &depths)))
            .unwrap_or_else(|_| Err(anyhow!("the encoder panicked")));
        let found = reply(batch, &depths, encoded);
        if !found.is_empty() {
            // Fails only once the search thread is gone, which it never is before this one.
            let _ = searches.send(found);
        }
    }
}

/// Hands each job its own rows, at its own depth; returns the searches among them, to be
/// looked up.
fn reply(batch: Vec<Job>, depths: &[usize], encoded: Result<Vec<Matrix>>) -> Vec<Encoded> {
    let matrices = match encoded {
        Ok(m) => m,
        Err(err) => {
            let message = format!("{err:#}");
            for job in batch {
                job.reply.fail(anyhow!("encoding failed: {message}"));
            }
            return Vec::new();
        }
    };
    let mut found = Vec::new();
    let mut row = 0;
    for job in batch {
        let full = &matrices[depths
            .binary_search(&job.depth)
            .expect("every job's depth was encoded")];
        let rows = job.texts.len();
        let data = full.data[row * full.cols..(row + rows) * full.cols].to_vec();
        row += rows;
        match job.reply {
            // The client may have gone meanwhile; nothing to do then.
            Reply::Vectors(sender) => {
                drop(sender.send(Ok(Matrix::from_vec(rows, full.cols, data))))
            }
            Reply::Search(search, reply) => found.push(Encoded {
                retriever: job.retriever,
                search,
                depth: job.depth,
                vector: data,
                reply,
            }),
        }
    }
    found
}

/// Looks up the searches of each batch (and of any that arrived meanwhile), one call per
/// [`LookupKey`].
fn run_searches(encoded: &mpsc::Receiver<Vec<Encoded>>, metrics: &Metrics) {
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
fn look_up((_, depth, dim, strategy, k): LookupKey, group: Vec<Encoded>) {
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
    let ranked = retriever.rank(
        &queries,
        Some(&vectors),
        strategy,
        depth,
        dim,
        k,
        &mut timings,
    );
    match ranked {
        Ok(ranked) => {
            for (search, ranked) in group.into_iter().zip(ranked) {
                let response = retriever.respond(
                    &search.search.query,
                    strategy,
                    depth,
                    dim,
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
