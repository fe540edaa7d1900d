//! Cross-request embedding batching, in two lanes with an encoding thread each: searches
//! (their questions) and bulk `/v1/embeddings` texts, so a search never queues behind bulk work
//! (head-of-line blocking: four 256-text requests once held a search for 45 s). Each thread
//! takes its first job, waits a short window for company, and encodes what it holds in one
//! `Encoder::encode` call at every depth asked for (one pass yields all of them): every waiting
//! search (up to a token budget), or at most `chunk_tokens` of bulk texts, so a big request is
//! encoded in pieces and the two threads share the cores pass by pass. The encoder is
//! CPU-bound and blocking, so it never runs on the async executor.
//!
//! A pass's searches then go together to a third thread, which looks them up in one faiss call
//! per kind of search (faiss reads the vectors once for all of them instead of once each) while
//! the next pass is encoded.
//!
//! Every job carries the build of the index it was validated against (see
//! [`super::reloading`]), and is encoded and looked up with that one, whatever the server serves by
//! the time it is answered.

mod lanes;
mod lookup;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tokio::sync::oneshot;

use super::error::ApiError;
use super::metrics::Metrics;
use crate::index::Cell;
use crate::retrieve::{Retriever, SearchResponse, Strategy};
use crate::vectors::Matrix;
use lanes::{Bulk, Lanes, Pass};
use lookup::{run_searches, Encoded};

#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// How long the first job of a batch waits for company.
    pub window: Duration,
    /// Tokens per forward pass; a job that would overflow it starts the next batch.
    pub max_tokens: usize,
    /// Jobs waiting beyond this are refused with 503.
    pub queue: usize,
    /// Tokens of bulk embedding texts per pass (at least one text), so the bulk thread takes
    /// the cores in short turns.
    pub chunk_tokens: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self {
            window: Duration::from_millis(2),
            max_tokens: 8192,
            queue: 256,
            chunk_tokens: 128,
        }
    }
}

struct Job {
    retriever: Arc<Retriever>,
    texts: Vec<String>,
    /// Per text.
    tokens: Vec<usize>,
    depth: usize,
    reply: Reply,
}

/// A search whose question waits in the queue (see [`Batcher::search`]).
pub struct QueuedSearch {
    /// As the client sent it (the queued text has the encoder's query prefix).
    pub query: String,
    pub k: usize,
    pub strategy: Strategy,
    /// The depth and size, resolved against the index: the job is encoded at `cell.layers`.
    pub cell: Cell,
    /// Candidates an HNSW index visits (`ef_search`; `None`: the server's setting).
    pub ef_search: Option<usize>,
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

pub struct Batcher {
    /// To the thread that encodes searches.
    searches: Sender<Job>,
    /// To the thread that encodes `/v1/embeddings` texts.
    bulk: Sender<Job>,
    /// Jobs waiting or being encoded beyond this are refused (`metrics.embed_queue` counts them).
    limit: usize,
    metrics: Arc<Metrics>,
}

impl Batcher {
    /// Starts the encoding threads (one for searches, one for bulk work) and the look-up
    /// thread. They stop once every `Batcher` handle is dropped and the jobs
    /// already queued are answered.
    pub fn start(
        options: BatchOptions,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, Vec<JoinHandle<()>>)> {
        let (searches, search_queue) = mpsc::channel();
        let (bulk, bulk_queue) = mpsc::channel();
        let limit = options.queue.max(1);
        // Bounded by the job queue: a search is in one place or the other.
        let (found, encoded) = mpsc::channel();
        let lookup_metrics = Arc::clone(&metrics);
        let lookup = std::thread::Builder::new()
            .name("rag-search".into())
            .spawn(move || run_searches(&encoded, &lookup_metrics))
            .context("starting the search thread")?;
        let encoder = |name: &str, queue: mpsc::Receiver<Job>| {
            let (options, found, metrics) = (options.clone(), found.clone(), Arc::clone(&metrics));
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || run(&options, &queue, &found, &metrics))
                .with_context(|| format!("starting the {name} thread"))
        };
        let search_encoder = encoder("rag-embed-search", search_queue)?;
        let bulk_encoder = encoder("rag-embed", bulk_queue)?;
        // The encoding threads first: they hand the search thread their last searches.
        Ok((
            Self {
                searches,
                bulk,
                limit,
                metrics,
            },
            vec![search_encoder, bulk_encoder, lookup],
        ))
    }

    /// Full-width vectors of `texts` at `depth`, one row per text, encoded (by `retriever`'s
    /// encoder) in pieces of the bulk lane. `tokens` (each text's token count) is what the
    /// budgets count.
    pub async fn encode(
        &self,
        retriever: Arc<Retriever>,
        texts: Vec<String>,
        tokens: Vec<usize>,
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
    /// `tokens` long) at `search.cell`: encoded in a batch like [`Self::encode`]'s texts, then looked
    /// up together with the rest of its batch's searches.
    pub async fn search(
        &self,
        retriever: Arc<Retriever>,
        text: String,
        tokens: usize,
        search: QueuedSearch,
    ) -> Result<SearchResponse, ApiError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            retriever,
            texts: vec![text],
            tokens: vec![tokens],
            depth: search.cell.layers,
            reply: Reply::Search(search, reply),
        };
        self.submit(job, answer).await
    }

    async fn submit<T>(
        &self,
        job: Job,
        answer: oneshot::Receiver<Result<T>>,
    ) -> Result<T, ApiError> {
        let waiting = self.metrics.embed_queue.fetch_add(1, Ordering::Relaxed);
        if waiting >= self.limit {
            self.metrics.embed_queue.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::overloaded("embedding"));
        }
        let lane = match job.reply {
            Reply::Search(..) => &self.searches,
            Reply::Vectors(_) => &self.bulk,
        };
        if lane.send(job).is_err() {
            self.metrics.embed_queue.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::unavailable("the server is shutting down"));
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
    let mut lanes = Lanes::default();
    loop {
        if lanes.is_empty() {
            match queue.recv() {
                Ok(job) => lanes.add(job),
                Err(_) => return,
            }
            // An idle thread's first job waits a little for company (until the pass is full).
            let deadline = Instant::now() + options.window;
            while lanes.search_tokens() < options.max_tokens
                && lanes.bulk_tokens() < options.chunk_tokens
            {
                match queue.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(job) => lanes.add(job),
                    Err(_) => break,
                }
            }
        }
        for job in queue.try_iter() {
            lanes.add(job);
        }
        lanes.drop_abandoned(metrics);
        let Some((encoder, pass)) = lanes.next_pass(options) else {
            continue;
        };
        let found = encode_pass(&encoder, &mut lanes, pass, metrics);
        if !found.is_empty() {
            // Fails only once the search thread is gone, which it never is before this one.
            let _ = searches.send(found);
        }
    }
}

/// Encodes `pass`, answers its searches' vectors to the caller (to be looked up) and adds its
/// pieces' rows to their bulk jobs, answering those it completes.
fn encode_pass(
    encoder: &crate::encoder::Encoder,
    lanes: &mut Lanes,
    pass: Pass,
    metrics: &Metrics,
) -> Vec<Encoded> {
    let Pass { searches, pieces } = pass;
    let texts: Vec<&str> = searches
        .iter()
        .map(|j| j.texts[0].as_str())
        .chain(pieces.iter().flat_map(|(i, range)| {
            lanes.bulk[*i].job.texts[range.clone()]
                .iter()
                .map(String::as_str)
        }))
        .collect();
    metrics.embed_batches.fetch_add(1, Ordering::Relaxed);
    metrics
        .embed_batched_requests
        .fetch_add((searches.len() + pieces.len()) as u64, Ordering::Relaxed);
    metrics
        .embed_batched_texts
        .fetch_add(texts.len() as u64, Ordering::Relaxed);
    let mut depths: Vec<usize> = searches
        .iter()
        .map(|j| j.depth)
        .chain(pieces.iter().map(|(i, _)| lanes.bulk[*i].job.depth))
        .collect();
    depths.sort_unstable();
    depths.dedup();
    // A panic inside the encoder must fail this pass, not kill the thread every later request
    // depends on.
    let encoded = catch_unwind(AssertUnwindSafe(|| encoder.encode(&texts, &depths)))
        .unwrap_or_else(|_| Err(anyhow!("the encoder panicked")));
    drop(texts);
    let matrices = match encoded {
        Ok(m) => m,
        Err(err) => {
            let message = format!("{err:#}");
            let failed: Vec<Job> = searches
                .into_iter()
                .chain(
                    pieces
                        .iter()
                        .rev()
                        .filter_map(|(i, _)| lanes.bulk.remove(*i).map(|b| b.job)),
                )
                .collect();
            metrics
                .embed_queue
                .fetch_sub(failed.len(), Ordering::Relaxed);
            for job in failed {
                job.reply.fail(anyhow!("encoding failed: {message}"));
            }
            return Vec::new();
        }
    };
    let rows_of = |depth: usize| {
        &matrices[depths
            .binary_search(&depth)
            .expect("every job's depth was encoded")]
    };
    let mut row = searches.len();
    for (i, range) in pieces {
        let bulk = &mut lanes.bulk[i];
        let full = rows_of(bulk.job.depth);
        let rows = range.len();
        bulk.cols = full.cols;
        bulk.data
            .extend_from_slice(&full.data[row * full.cols..(row + rows) * full.cols]);
        bulk.next = range.end;
        row += rows;
    }
    // Pieces come from the front, each job's in order: the jobs done are a prefix.
    while lanes
        .bulk
        .front()
        .is_some_and(|b| b.next == b.job.texts.len())
    {
        let Some(Bulk {
            job, data, cols, ..
        }) = lanes.bulk.pop_front()
        else {
            break;
        };
        metrics.embed_queue.fetch_sub(1, Ordering::Relaxed);
        if let Reply::Vectors(sender) = job.reply {
            // The client may have gone meanwhile; nothing to do then.
            drop(sender.send(Ok(Matrix::from_vec(job.texts.len(), cols, data))));
        }
    }
    metrics
        .embed_queue
        .fetch_sub(searches.len(), Ordering::Relaxed);
    searches
        .into_iter()
        .enumerate()
        .filter_map(|(row, job)| {
            let Reply::Search(search, reply) = job.reply else {
                return None;
            };
            let full = rows_of(job.depth);
            Some(Encoded {
                retriever: job.retriever,
                search,
                vector: full.data[row * full.cols..(row + 1) * full.cols].to_vec(),
                reply,
            })
        })
        .collect()
}
