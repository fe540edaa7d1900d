//! Cross-request embedding batching. Every text the server encodes (search questions and
//! `/v1/embeddings` inputs) goes into one bounded queue; a dedicated thread takes the first job,
//! keeps taking more for a short window or until a token budget is spent, and encodes them all
//! in one `Encoder::encode` call at every depth they asked for (one pass yields all of them).
//! The encoder is CPU-bound and blocking, so it never runs on the async executor.

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
use crate::encoder::Encoder;
use crate::retrieve::Retriever;
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
    texts: Vec<String>,
    tokens: usize,
    depth: usize,
    reply: oneshot::Sender<Result<Matrix>>,
}

pub struct Batcher {
    jobs: SyncSender<Job>,
    metrics: Arc<Metrics>,
}

impl Batcher {
    /// Starts the encoding thread. It stops once every `Batcher` handle is dropped and the jobs
    /// already queued are answered.
    pub fn start(
        retriever: Arc<Retriever>,
        options: BatchOptions,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, JoinHandle<()>)> {
        let (jobs, queue) = mpsc::sync_channel(options.queue.max(1));
        let worker_metrics = Arc::clone(&metrics);
        let worker = std::thread::Builder::new()
            .name("rag-embed".into())
            .spawn(move || run(&retriever.encoder, &options, &queue, &worker_metrics))
            .context("starting the embedding thread")?;
        Ok((Self { jobs, metrics }, worker))
    }

    /// Full-width vectors of `texts` at `depth`, one row per text, encoded together with whatever
    /// else is queued. `tokens` (the texts' token count) is what the batch budget counts.
    pub async fn encode(
        &self,
        texts: Vec<String>,
        tokens: usize,
        depth: usize,
    ) -> Result<Matrix, ApiError> {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            texts,
            tokens,
            depth,
            reply,
        };
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
            .map_err(|_| ApiError::internal(anyhow!("the embedding thread dropped a request")))?
            .map_err(ApiError::internal)
    }
}

fn run(encoder: &Encoder, options: &BatchOptions, queue: &mpsc::Receiver<Job>, metrics: &Metrics) {
    // A job taken while filling a batch that did not fit its budget opens the next one.
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
        let mut tokens = first.tokens;
        let mut batch = vec![first];
        while tokens < options.max_tokens {
            let job = match queue.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(job) => job,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            };
            if tokens + job.tokens > options.max_tokens {
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
        reply(batch, &depths, encoded);
    }
}

/// Hands each job its own rows, at its own depth.
fn reply(batch: Vec<Job>, depths: &[usize], encoded: Result<Vec<Matrix>>) {
    let matrices = match encoded {
        Ok(m) => m,
        Err(err) => {
            let message = format!("{err:#}");
            for job in batch {
                let _ = job.reply.send(Err(anyhow!("encoding failed: {message}")));
            }
            return;
        }
    };
    let mut row = 0;
    for job in batch {
        let full = &matrices[depths
            .binary_search(&job.depth)
            .expect("every job's depth was encoded")];
        let rows = job.texts.len();
        let data = full.data[row * full.cols..(row + rows) * full.cols].to_vec();
        row += rows;
        // The client may have gone meanwhile; nothing to do then.
        let _ = job.reply.send(Ok(Matrix::from_vec(rows, full.cols, data)));
    }
}
