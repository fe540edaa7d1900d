//! Question answering behind a small trait, so the server, its queue, streaming and disconnect
//! handling do not depend on which generator answers. One thread runs one sequence at a time
//! (a model context holds one), taking jobs first come, first served from a bounded queue.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};

use tokio::sync::mpsc as async_mpsc;

use super::error::ApiError;
use super::metrics::Metrics;
use crate::ask::{AskResult, AskSettings, Pipeline};
use crate::generate::{Generator, PromptSpec};

/// Tokens buffered between the generator and a slow client before generation waits for it.
const TOKEN_BUFFER: usize = 64;

/// Retrieves passages for a question and generates an answer from them.
pub trait Answerer: Send + Sync {
    /// What /health reports as the generator.
    fn name(&self) -> String;

    /// Calls `on_token` with each piece of the answer as it is generated; when it returns
    /// false (the client went away) generation stops and whatever was produced is returned.
    fn answer(
        &self,
        question: &str,
        settings: &AskSettings,
        on_token: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AskResult>;
}

/// The real answerer: the ask pipeline on the served index and the llama.cpp generator.
pub struct RagAnswerer {
    pub retriever: Arc<super::ReloadingIndex>,
    pub generator: Generator,
    pub spec: PromptSpec,
}

impl Answerer for RagAnswerer {
    fn name(&self) -> String {
        self.generator.name.clone()
    }

    fn answer(
        &self,
        question: &str,
        settings: &AskSettings,
        on_token: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AskResult> {
        // One build of the index for the whole question, even if a rebuild lands meanwhile.
        let retriever = self.retriever.current();
        Pipeline::new(&retriever, &self.generator, &self.spec).ask(question, settings, on_token)
    }
}

pub enum AskEvent {
    Token(String),
    /// Boxed: a result is far larger than a token, and tokens are most of the traffic.
    Done(Box<Result<AskResult>>),
}

struct Job {
    question: String,
    settings: AskSettings,
    events: async_mpsc::Sender<AskEvent>,
}

pub struct GenerationQueue {
    jobs: SyncSender<Job>,
    metrics: Arc<Metrics>,
}

impl GenerationQueue {
    /// Starts the generation thread; it stops once every handle is dropped and the queue is
    /// drained.
    pub fn start(
        answerer: Arc<dyn Answerer>,
        capacity: usize,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, JoinHandle<()>)> {
        let (jobs, queue) = mpsc::sync_channel::<Job>(capacity.max(1));
        let worker_metrics = Arc::clone(&metrics);
        let worker = std::thread::Builder::new()
            .name("rag-generate".into())
            .spawn(move || {
                for job in queue {
                    worker_metrics
                        .generate_queue
                        .fetch_sub(1, Ordering::Relaxed);
                    run(answerer.as_ref(), job, &worker_metrics);
                }
            })
            .context("starting the generation thread")?;
        Ok((Self { jobs, metrics }, worker))
    }

    /// Queues a question; its tokens and then its result arrive on the returned channel.
    /// Dropping the receiver stops the generation.
    pub fn submit(
        &self,
        question: String,
        settings: AskSettings,
    ) -> Result<async_mpsc::Receiver<AskEvent>, ApiError> {
        let (events, receiver) = async_mpsc::channel(TOKEN_BUFFER);
        self.metrics.generate_queue.fetch_add(1, Ordering::Relaxed);
        match self.jobs.try_send(Job {
            question,
            settings,
            events,
        }) {
            Ok(()) => Ok(receiver),
            Err(err) => {
                self.metrics.generate_queue.fetch_sub(1, Ordering::Relaxed);
                Err(match err {
                    TrySendError::Full(_) => ApiError::overloaded("generation"),
                    TrySendError::Disconnected(_) => {
                        ApiError::unavailable("the server is shutting down")
                    }
                })
            }
        }
    }
}

fn run(answerer: &dyn Answerer, job: Job, metrics: &Metrics) {
    if job.events.is_closed() {
        // The client left while queued.
        return;
    }
    let events = &job.events;
    let mut on_token = |token: &str| {
        metrics.tokens_generated.fetch_add(1, Ordering::Relaxed);
        events
            .blocking_send(AskEvent::Token(token.to_owned()))
            .is_ok()
    };
    // A panicking generator fails this question, not the thread every later one waits on.
    let result = catch_unwind(AssertUnwindSafe(|| {
        answerer.answer(&job.question, &job.settings, &mut on_token)
    }))
    .unwrap_or_else(|_| Err(anyhow!("the generator panicked")));
    let _ = events.blocking_send(AskEvent::Done(Box::new(result)));
}
