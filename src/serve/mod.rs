//! `rag serve`: search, question answering and embeddings over HTTP, with the models loaded once.
//!
//! The async executor only parses, validates and routes. Encoding runs on one batching thread
//! and the look-ups of encoded searches on a search thread beside it ([`batcher`]), generation
//! on another ([`generation`]), BM25-only searches on tokio's blocking pool; each path has a
//! bounded queue that answers 503 with `Retry-After` when full. `GET /` is a web page on the
//! same API ([`web`]).
//!
//! The index is served one build at a time and replaced when a rebuild installs a new
//! one ([`reloading`]). Connections that do not send their request in time are closed ([`http`]),
//! so shutdown waits only for requests that are being answered.

pub mod access;
pub mod batcher;
mod documents;
pub mod error;
pub mod generation;
mod http;
pub mod metrics;
pub mod reloading;
mod routes;
mod web;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use access::AccessConfig;
pub use batcher::{BatchOptions, Batcher};
pub use error::ApiError;
pub use generation::{Answerer, AskEvent, GenerationQueue, RagAnswerer};
use metrics::Metrics;
pub use reloading::ReloadingIndex;

#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Largest text to embed, in bytes (questions have `retrieve::MAX_QUESTION_BYTES`); texts
    /// must also fit the encoder's maximum length in tokens.
    pub max_text_bytes: usize,
    /// Most texts in one `/v1/embeddings` request.
    pub max_inputs: usize,
    /// Largest `k` / `top_k`.
    pub max_k: usize,
    /// Index look-ups running or waiting at once before `/search` answers 503.
    pub search_slots: usize,
    /// Questions waiting for the generator before `/ask` answers 503.
    pub generate_queue: usize,
    /// How long shutdown waits for requests in flight before it gives up on them.
    pub drain: Duration,
    /// How long a connection may take to send a request's headers, counted from the end of
    /// its last response (or from connecting): the idle timeout of kept-alive connections too.
    pub header_read: Duration,
    /// How long a request's body may take to arrive once its headers have (408 beyond).
    pub body_read: Duration,
    /// How often the index's manifest is looked at for a new build.
    pub index_check: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body_bytes: 1 << 20,
            max_text_bytes: 8192,
            max_inputs: 256,
            max_k: 100,
            search_slots: 64,
            generate_queue: 16,
            drain: Duration::from_secs(30),
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            index_check: reloading::CHECK_EVERY,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ServeConfig {
    pub limits: Limits,
    pub batch: BatchOptions,
    /// How `/ask` retrieves and builds its context when a request does not say.
    pub ask: crate::ask::AskSettings,
    /// Where `rag eval` runs are, for the page's heatmaps of their sweeps (`None`: no runs).
    pub runs: Option<std::path::PathBuf>,
    /// API key, accepted hosts and CORS origin ([`access`]).
    pub access: AccessConfig,
}

/// What the server serves, loaded once before it reports ready.
pub struct Models {
    pub retriever: Arc<ReloadingIndex>,
    /// `None` when no generator was given: `/ask` then answers 503 saying so.
    pub answerer: Option<Arc<dyn Answerer>>,
}

struct Ready {
    index: Arc<ReloadingIndex>,
    batcher: Batcher,
    generation: Option<GenerationQueue>,
    generator_name: Option<String>,
    /// Dropped to stop the index watch.
    stop_watch: Sender<()>,
    workers: Vec<JoinHandle<()>>,
}

impl Ready {
    fn start(models: Models, config: &ServeConfig, metrics: &Arc<Metrics>) -> Result<Self> {
        let index = models.retriever;
        let (batcher, mut workers) = Batcher::start(config.batch.clone(), Arc::clone(metrics))?;
        let (stop_watch, watcher) = index.watch(config.limits.index_check)?;
        workers.push(watcher);
        let generator_name = models.answerer.as_ref().map(|a| a.name());
        let generation = match models.answerer {
            Some(answerer) => {
                let (queue, worker) = GenerationQueue::start(
                    answerer,
                    config.limits.generate_queue,
                    Arc::clone(metrics),
                )?;
                workers.push(worker);
                Some(queue)
            }
            None => None,
        };
        Ok(Self {
            index,
            batcher,
            generation,
            generator_name,
            stop_watch,
            workers,
        })
    }

    /// Closes the queues and waits for the worker threads to answer what they hold.
    fn stop(self) {
        let Ready {
            batcher,
            generation,
            stop_watch,
            workers,
            ..
        } = self;
        drop(batcher);
        drop(generation);
        drop(stop_watch);
        for worker in workers {
            let _ = worker.join();
        }
    }
}

pub(crate) struct AppState {
    ready: OnceLock<Ready>,
    config: ServeConfig,
    metrics: Arc<Metrics>,
    search_slots: Arc<Semaphore>,
    /// Taken by each update of the index over HTTP, so that they run one at a time.
    updates: tokio::sync::Mutex<()>,
}

impl AppState {
    fn ready(&self) -> Result<&Ready, ApiError> {
        self.ready.get().ok_or_else(ApiError::loading)
    }
}

/// Serves on `listener` until `shutdown` completes, then stops taking connections and waits (up
/// to `limits.drain`) for requests in flight. The listener answers at once (`/health` says
/// "loading"); `load` runs on a blocking thread and the other routes work once it returns. An
/// error from `load` stops the server with that error.
pub async fn serve<L, S>(
    listener: TcpListener,
    config: ServeConfig,
    load: L,
    shutdown: S,
) -> Result<()>
where
    L: FnOnce() -> Result<Models> + Send + 'static,
    S: Future<Output = ()> + Send + 'static,
{
    let drain = config.limits.drain;
    let header_read = config.limits.header_read;
    let app = Arc::new(AppState {
        search_slots: Arc::new(Semaphore::new(config.limits.search_slots.max(1))),
        ready: OnceLock::new(),
        updates: tokio::sync::Mutex::new(()),
        metrics: Arc::new(Metrics::default()),
        config,
    });
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let graceful = async move {
        shutdown.await;
        let _ = stopping.send(());
    };
    let server = http::serve(
        listener,
        routes::router(Arc::clone(&app)),
        header_read,
        graceful,
    );
    let mut server = std::pin::pin!(server);
    let loader = {
        let app = Arc::clone(&app);
        tokio::task::spawn_blocking(move || -> Result<()> {
            let ready = Ready::start(load()?, &app.config, &app.metrics)?;
            let retriever = ready.index.current();
            eprintln!(
                "ready: encoder {}, index {} ({} documents, build {}), generator {}",
                retriever.encoder.model_dir.display(),
                retriever.index.dir.display(),
                retriever.index.len(),
                retriever.index.build_id(),
                ready.generator_name.as_deref().unwrap_or("none")
            );
            // Only this task sets it, once.
            let _ = app.ready.set(ready);
            Ok(())
        })
    };
    tokio::select! {
        () = &mut server => return Ok(()),
        loaded = loader => loaded.context("the model loading task failed")??,
    }
    let give_up = async move {
        if stopped.await.is_ok() {
            tokio::time::sleep(drain).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = &mut server => {}
        () = give_up => eprintln!("shutdown: requests still in flight after {drain:?}; leaving them"),
    }
    // Every connection is closed, so the router's handles on the state are gone and the
    // worker threads can be told to finish.
    if let Ok(app) = Arc::try_unwrap(app) {
        if let Some(ready) = app.ready.into_inner() {
            tokio::task::spawn_blocking(move || ready.stop())
                .await
                .context("stopping the worker threads")?;
        }
    }
    Ok(())
}

/// Listens on `addr` and serves until Ctrl-C or SIGTERM, on a runtime of its own (see
/// [`serve`] for `load`). Beyond loopback it wants an API key, unless `insecure`.
pub fn run<L>(addr: SocketAddr, config: ServeConfig, insecure: bool, load: L) -> Result<()>
where
    L: FnOnce() -> Result<Models> + Send + 'static,
{
    access::check_bind(addr, &config.access, insecure)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        if !addr.ip().is_loopback() && config.access.api_key.is_none() {
            eprintln!("warning: listening on {addr} with no API key (--insecure): every route is open to anyone who can reach it");
        }
        eprintln!(
            "listening on http://{} (loading models)",
            listener.local_addr()?
        );
        serve(listener, config, load, shutdown_signal()).await
    })
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            // Without a SIGTERM handler Ctrl-C still works.
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    eprintln!("shutting down: finishing requests in flight");
}
