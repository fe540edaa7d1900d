//! The HTTP routes: request shapes, validation (every bad input is a 4xx JSON error before any
//! model runs), and the hand-off to the batcher, the blocking pool or the generation queue.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::access::Authorised;
use super::batcher::QueuedSearch;
use super::error::{ApiError, JsonBody};
use super::generation::AskEvent;
use super::metrics::route_label;
use super::AppState;
use crate::ask::AskSettings;
use crate::encoder::Encoder;
use crate::progress::ms_since;
use crate::retrieve::{validate_question, Mode, SearchRequest, SearchResponse, Strategy};

type App = State<Arc<AppState>>;

pub(super) fn router(app: Arc<AppState>) -> Router {
    Router::new()
        .route("/search", post(search))
        .route("/ask", post(ask))
        .route("/v1/embeddings", post(embeddings))
        .route("/documents", post(super::documents::add))
        .route("/documents/{title}", delete(super::documents::remove))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .merge(super::web::router())
        .fallback(|| async { ApiError::not_found() })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(DefaultBodyLimit::max(app.config.limits.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            super::access::check,
        ))
        .layer(middleware::from_fn_with_state(Arc::clone(&app), track))
        .with_state(app)
}

async fn track(State(app): App, request: Request, next: Next) -> Response {
    let route = route_label(request.uri().path());
    let started = Instant::now();
    let response = next.run(request).await;
    app.metrics
        .record(route, response.status().as_u16(), started.elapsed());
    response
}

/// Token count of `text` as the encoder sees it, refusing text the encoder would cut short
/// rather than embedding a silently truncated version of it.
fn token_count(encoder: &Encoder, text: &str, what: &str) -> Result<usize, ApiError> {
    let encoding = encoder
        .tokenizer()
        .encode(text, true)
        .map_err(|e| ApiError::invalid(format!("{what} could not be tokenised: {e}")))?;
    if !encoding.get_overflowing().is_empty() {
        return Err(ApiError::invalid(format!(
            "{what} is longer than the encoder's limit of {} tokens",
            encoder.max_length
        )));
    }
    Ok(encoding.len())
}

/// The widest `ef_search` a request may ask for.
const MAX_EF_SEARCH: usize = 100_000;

fn check_k(name: &str, k: usize, max: usize) -> Result<(), ApiError> {
    if k == 0 || k > max {
        return Err(ApiError::invalid(format!(
            "{name} must be between 1 and {max} (got {k})"
        )));
    }
    Ok(())
}

fn default_k() -> usize {
    5
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchBody {
    query: String,
    #[serde(default = "default_k")]
    k: usize,
    #[serde(default)]
    mode: Mode,
    #[serde(default = "one_hop")]
    hops: u8,
    layers: Option<usize>,
    dim: Option<usize>,
    /// Candidates an HNSW index visits per dense search; the server's `--ef-search` if absent;
    /// 0: exact search, not through the graph.
    ef_search: Option<usize>,
}

fn one_hop() -> u8 {
    1
}

async fn search(
    State(app): App,
    JsonBody(body): JsonBody<SearchBody>,
) -> Result<Json<SearchResponse>, ApiError> {
    let started = Instant::now();
    let ready = app.ready()?;
    let query = validate_question(&body.query).map_err(ApiError::invalid_because)?;
    check_k("k", body.k, app.config.limits.max_k)?;
    if let Some(ef) = body.ef_search {
        // faiss's efSearch is an int; beyond this a search visits more than it could use.
        // 0 asks for exact search on an index with a graph.
        if ef > MAX_EF_SEARCH {
            return Err(ApiError::invalid(format!(
                "ef_search must be between 0 (exact) and {MAX_EF_SEARCH} (got {ef})"
            )));
        }
    }
    let strategy = Strategy::new(body.mode, body.hops).map_err(ApiError::invalid_because)?;
    // This request's build of the index, from validation to its last document.
    let retriever = ready.index.current();
    let request = SearchRequest {
        query,
        k: body.k,
        strategy,
        layers: body.layers,
        dim: body.dim,
    };
    let cell = retriever
        .resolve(&request)
        .map_err(|refusal| ApiError::refused(&refusal))?;
    let slot = Arc::clone(&app.search_slots)
        .try_acquire_owned()
        .map_err(|_| ApiError::overloaded("search"))?;
    let mut response = if body.mode == Mode::Bm25 {
        let query = query.to_owned();
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            retriever.search(&SearchRequest {
                query: &query,
                k: body.k,
                strategy,
                layers: Some(cell.layers),
                dim: Some(cell.dim),
            })
        })
        .await
        .map_err(|e| ApiError::internal(e.into()))?
        .map_err(ApiError::internal)?
    } else {
        let prefixed = retriever.encoder.query_text(query);
        let tokens = token_count(&retriever.encoder, &prefixed, "the query")?;
        let search = QueuedSearch {
            query: query.to_owned(),
            k: body.k,
            strategy,
            cell,
            ef_search: body.ef_search,
        };
        let queued = Instant::now();
        let mut response = ready
            .batcher
            .search(retriever, prefixed, tokens, search)
            .await?;
        drop(slot);
        // Waiting for a batch and encoding it count as encoding; the look-up timed itself.
        response.timings.encode_ms = ms_since(queued) - response.timings.total_ms;
        response
    };
    response.timings.total_ms = ms_since(started);
    Ok(Json(response))
}

/// `/ask`'s body; what it leaves out comes from the server's settings.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskBody {
    question: String,
    top_k: Option<usize>,
    mode: Option<Mode>,
    hops: Option<u8>,
    layers: Option<usize>,
    dim: Option<usize>,
    context_tokens: Option<usize>,
    #[serde(default)]
    stream: bool,
}

async fn ask(State(app): App, JsonBody(body): JsonBody<AskBody>) -> Result<Response, ApiError> {
    let ready = app.ready()?;
    let question = validate_question(&body.question).map_err(ApiError::invalid_because)?;
    let defaults = app.config.ask;
    let top_k = body.top_k.unwrap_or(defaults.top_k);
    check_k("top_k", top_k, app.config.limits.max_k)?;
    let strategy = Strategy::new(
        body.mode.unwrap_or(defaults.strategy.mode),
        body.hops.unwrap_or(defaults.strategy.hops),
    )
    .map_err(ApiError::invalid_because)?;
    let cell = ready
        .index
        .current()
        .resolve(&SearchRequest {
            query: question,
            k: top_k,
            strategy,
            layers: body.layers.or(defaults.layers),
            dim: body.dim.or(defaults.dim),
        })
        .map_err(|refusal| ApiError::refused(&refusal))?;
    let settings = AskSettings {
        strategy,
        layers: Some(cell.layers),
        dim: Some(cell.dim),
        top_k,
        context_tokens: body.context_tokens.unwrap_or(defaults.context_tokens),
        weights: defaults.weights,
        context_floor: defaults.context_floor,
        widen_tokens: defaults.widen_tokens,
    };
    let queue = ready.generation.as_ref().ok_or_else(|| {
        ApiError::unavailable(
            "no generator is loaded (started with --no-llm, or without the default one): start `rag serve` with --llm FILE to answer questions",
        )
    })?;
    let mut events = queue.submit(question.to_owned(), settings)?;
    if body.stream {
        return Ok(Sse::new(event_stream(events))
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    // Returning early drops `events`, which stops the generation.
    while let Some(event) = events.recv().await {
        if let AskEvent::Done(result) = event {
            return (*result)
                .map(|r| Json(r).into_response())
                .map_err(ApiError::internal);
        }
    }
    Err(ApiError::internal(anyhow::anyhow!(
        "the generation thread stopped without an answer"
    )))
}

/// Server-sent events: `token` per generated piece, then `done` with the whole result (or
/// `error`). Dropping the stream, which the server does when the client disconnects, drops the
/// receiver and so stops the generation.
fn event_stream(events: mpsc::Receiver<AskEvent>) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(Some(events), |state| async move {
        let mut events = state?;
        let (event, next) = match events.recv().await? {
            AskEvent::Token(token) => (
                json_event("token", &json!({ "token": token })),
                Some(events),
            ),
            AskEvent::Done(result) => match *result {
                Ok(result) => (json_event("done", &result), None),
                Err(err) => (json_event("error", &ApiError::internal(err).body()), None),
            },
        };
        Some((Ok(event), next))
    })
}

fn json_event(name: &str, data: &impl serde::Serialize) -> Event {
    let data = serde_json::to_string(data).unwrap_or_else(|e| {
        json!({"error": {"message": e.to_string(), "type": "internal_error"}}).to_string()
    });
    Event::default().event(name).data(data)
}

#[derive(Deserialize)]
struct EmbeddingsBody {
    #[serde(default)]
    input: Value,
    dimensions: Option<usize>,
    layers: Option<usize>,
    encoding_format: Option<String>,
}

/// `input` as OpenAI clients send it: one string or a list of strings (token-id arrays are
/// refused: they would be ids of some other tokenizer).
fn embedding_inputs(
    input: Value,
    max_inputs: usize,
    max_bytes: usize,
) -> Result<Vec<String>, ApiError> {
    let texts = match input {
        Value::Null => return Err(ApiError::invalid("missing field `input`")),
        Value::String(text) => vec![text],
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => Err(ApiError::invalid(
                    "`input` must be a string or a list of strings",
                )),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(ApiError::invalid(
                "`input` must be a string or a list of strings",
            ))
        }
    };
    if texts.is_empty() || texts.len() > max_inputs {
        return Err(ApiError::invalid(format!(
            "`input` must hold between 1 and {max_inputs} texts (got {})",
            texts.len()
        )));
    }
    for (i, text) in texts.iter().enumerate() {
        if text.trim().is_empty() {
            return Err(ApiError::invalid(format!("input {i} is empty")));
        }
        if text.len() > max_bytes {
            return Err(ApiError::invalid(format!(
                "input {i} is too long ({} bytes; the limit is {max_bytes})",
                text.len()
            )));
        }
    }
    Ok(texts)
}

fn check_range(name: &str, value: usize, max: usize) -> Result<usize, ApiError> {
    if value == 0 || value > max {
        return Err(ApiError::invalid(format!(
            "`{name}` must be between 1 and {max} (got {value})"
        )));
    }
    Ok(value)
}

async fn embeddings(
    State(app): App,
    JsonBody(body): JsonBody<EmbeddingsBody>,
) -> Result<Json<Value>, ApiError> {
    let ready = app.ready()?;
    let limits = &app.config.limits;
    if body
        .encoding_format
        .as_deref()
        .is_some_and(|f| f != "float")
    {
        return Err(ApiError::invalid("`encoding_format` must be \"float\""));
    }
    let texts = embedding_inputs(body.input, limits.max_inputs, limits.max_text_bytes)?;
    let retriever = ready.index.current();
    let encoder = Arc::clone(&retriever.encoder);
    let depth = check_range(
        "layers",
        body.layers.unwrap_or(encoder.depth()),
        encoder.depth(),
    )?;
    let dim = check_range(
        "dimensions",
        body.dimensions.unwrap_or(encoder.hidden_size()),
        encoder.hidden_size(),
    )?;
    // Tokenising a few hundred long texts takes milliseconds: off the executor.
    let tokenizer = Arc::clone(&encoder);
    let (texts, tokens) = tokio::task::spawn_blocking(move || {
        let tokens = texts
            .iter()
            .enumerate()
            .map(|(i, text)| token_count(&tokenizer, text, &format!("input {i}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, ApiError>((texts, tokens))
    })
    .await
    .map_err(|e| ApiError::internal(e.into()))??;
    let vectors = ready
        .batcher
        .encode(retriever, texts, tokens.clone(), depth)
        .await?
        .truncated(dim);
    let tokens: usize = tokens.iter().sum();
    let data: Vec<Value> = (0..vectors.rows)
        .map(|i| json!({"object": "embedding", "index": i, "embedding": vectors.row(i)}))
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": crate::files::model_name(&encoder.model_dir),
        "layers": depth,
        "dimensions": dim,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })))
}

async fn health(State(app): App, Extension(who): Extension<Authorised>) -> Response {
    let Some(ready) = app.ready.get() else {
        let body = json!({"status": "loading", "models": {"encoder": null, "generator": null}});
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    };
    let retriever = ready.index.current();
    let manifest = &retriever.index.manifest;
    let mut body = json!({
        "status": "ready",
        "models": {
            "encoder": {
                "name": crate::files::model_name(&retriever.encoder.model_dir),
                "path": retriever.encoder.model_dir,
                "layers": retriever.encoder.depth(),
                "hidden_size": retriever.encoder.hidden_size(),
                "max_tokens": retriever.encoder.max_length,
                "precision": retriever.encoder.precision,
            },
            "generator": ready.generator_name,
        },
        "index": {
            "dir": retriever.index.dir,
            // `generation`: the name /health gave the build id before the index's builds had theirs.
            "generation": retriever.index.build_id(),
            "reload_error": ready.index.reload_error(),
            "documents": retriever.index.len(),
            "layers": manifest.layers,
            "default_dim": manifest.default_dim,
            "stored_dim": manifest.stored_dim,
            "dims": manifest.offered_dims(),
        },
        "modes": Mode::ALL.iter().map(Mode::to_string).collect::<Vec<_>>(),
        // What /ask does with the fields a request leaves out.
        "ask": {
            "mode": app.config.ask.strategy.mode,
            "hops": app.config.ask.strategy.hops,
            "top_k": app.config.ask.top_k,
            "context_tokens": app.config.ask.context_tokens,
        },
        "queues": {
            "generate": app.metrics.generate_queue.load(Ordering::Relaxed),
            "embed": app.metrics.embed_queue.load(Ordering::Relaxed),
        },
    });
    if !who.0 {
        super::access::without_paths(&mut body);
    }
    Json(body).into_response()
}

async fn metrics(State(app): App) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}
