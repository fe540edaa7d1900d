//! `rag serve` in process, on a tiny generated model and index, over real loopback sockets:
//! every route, every kind of bad input (status and JSON error body), cross-request batching,
//! bounded queues, streaming with client disconnects, loading and graceful shutdown.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;
use rag::ask::{AskResult, AskSettings, Source};
use rag::encoder::tiny::TinyBert;
use rag::encoder::{EncoderOptions, Precision};
use rag::index;
use rag::retrieve::{Hit, Mode, Retriever, SearchRequest, Strategy};
use rag::serve::{self, Answerer, Models, ReloadingIndex, ServeConfig};
use serde_json::{json, Value};

/// A tiny model (hidden size 32, 3 layers) and an index of 100 paragraphs at depths 1 and 3,
/// stored at the full width.
fn tiny_index(dir: &Path) -> (PathBuf, PathBuf) {
    let model = dir.join("model");
    TinyBert::default().write(&model).unwrap();
    let corpus = dir.join("corpus.json");
    common::write_corpus(&corpus, 20, 5);
    let index_dir = dir.join("index");
    let mut options = common::tiny_build_options(&model, corpus, &index_dir);
    options.dim = None;
    index::build(&options).unwrap();
    (model, index_dir)
}

/// Emits `tokens` tokens, `delay` apart, counting what it emitted; waits for `gate` (if any)
/// before starting.
struct FakeAnswerer {
    tokens: usize,
    delay: Duration,
    emitted: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
    finished: Arc<AtomicBool>,
    gate: Option<Mutex<mpsc::Receiver<()>>>,
}

impl FakeAnswerer {
    fn new(tokens: usize, delay: Duration) -> Self {
        Self {
            tokens,
            delay,
            emitted: Arc::default(),
            started: Arc::default(),
            finished: Arc::default(),
            gate: None,
        }
    }
}

impl Answerer for FakeAnswerer {
    fn name(&self) -> String {
        "fake".into()
    }

    fn answer(
        &self,
        question: &str,
        settings: &AskSettings,
        on_token: &mut dyn FnMut(&str) -> bool,
    ) -> Result<AskResult> {
        self.started.fetch_add(1, Ordering::SeqCst);
        if let Some(gate) = &self.gate {
            let _ = gate.lock().unwrap().recv();
        }
        let mut answer = String::new();
        for i in 0..self.tokens {
            std::thread::sleep(self.delay);
            let token = format!("t{i} ");
            self.emitted.fetch_add(1, Ordering::SeqCst);
            answer.push_str(&token);
            if !on_token(&token) {
                break;
            }
        }
        self.finished.store(true, Ordering::SeqCst);
        let source = Source {
            hit: Hit {
                rank: 1,
                id: 0,
                title: question.into(),
                text: format!("{:?}", settings.strategy.mode),
                score: 1.0,
                hop: 1,
                source: None,
            },
            in_prompt: true,
            sentences: Vec::new(),
        };
        Ok(AskResult {
            answer,
            sources: vec![source; settings.top_k],
            ..Default::default()
        })
    }
}

struct TestServer {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl TestServer {
    fn start(config: ServeConfig, load: impl FnOnce() -> Result<Models> + Send + 'static) -> Self {
        let (addr_tx, addr_rx) = mpsc::channel();
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                addr_tx.send(listener.local_addr()?).unwrap();
                serve::serve(listener, config, load, async move {
                    let _ = stop.await;
                })
                .await
            })
        });
        let addr = addr_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    /// Starts on the tiny index and waits until /health says ready.
    fn ready(config: ServeConfig, index_dir: &Path, answerer: Option<Arc<dyn Answerer>>) -> Self {
        let index_dir = index_dir.to_path_buf();
        let server = Self::start(config, move || {
            Ok(Models {
                retriever: Arc::new(ReloadingIndex::new(Retriever::open(
                    &index_dir,
                    None,
                    Precision::F32,
                )?)?),
                answerer,
            })
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.get("/health").status != 200 {
            assert!(Instant::now() < deadline, "the server never became ready");
            std::thread::sleep(Duration::from_millis(10));
        }
        server
    }

    fn stop(mut self) -> Result<()> {
        let _ = self.shutdown.take().unwrap().send(());
        self.thread.take().unwrap().join().unwrap()
    }

    fn get(&self, path: &str) -> Reply {
        http(self.addr, "GET", path, b"")
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        http(self.addr, "POST", path, body.to_string().as_bytes())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// Asserts the JSON error shape, its status and type, and that the message says `says`.
    fn assert_error(&self, status: u16, kind: &str, says: &str) {
        assert_eq!(self.status, status, "{self:?}");
        let body = self.json();
        assert_eq!(body["error"]["type"], kind, "{self:?}");
        let message = body["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message: {self:?}"));
        assert!(message.contains(says), "expected '{says}' in: {message}");
    }
}

fn send(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // A server refusing an over-long body may close before reading all of it; its answer is
    // still there to read.
    let _ = stream.write_all(body);
    stream
}

fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> Reply {
    let mut stream = send(addr, method, path, body);
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {raw:?}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    Reply {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in metrics:\n{metrics}"))
}

/// The ids of a `/search` answer's hits, in rank order.
fn hit_ids(body: &Value) -> Vec<u64> {
    body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn routes_answer_like_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, index_dir) = tiny_index(tmp.path());
    let server = TestServer::ready(ServeConfig::default(), &index_dir, None);

    let health = server.get("/health").json();
    assert_eq!(health["status"], "ready");
    assert_eq!(health["models"]["encoder"]["hidden_size"], 32);
    assert_eq!(health["models"]["generator"], Value::Null);
    assert_eq!(health["index"]["documents"], 100);

    let library = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    for (mode, hops, layers, dim) in [
        (Mode::Dense, 1, 1, 8),
        // BM25 alone reports the default size (the stored width), whatever was asked.
        (Mode::Bm25, 1, 3, 32),
        (Mode::Hybrid, 1, 3, 16),
        (Mode::Fusion, 1, 3, 16),
        (Mode::Fusion, 2, 1, 8),
        (Mode::Bm25, 2, 3, 32),
    ] {
        let reply = server.post(
            "/search",
            &json!({"query": "topic 42", "k": 4, "mode": mode, "hops": hops, "layers": layers, "dim": dim}),
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        let body = reply.json();
        let expected = library
            .search(&SearchRequest {
                query: "topic 42",
                k: 4,
                strategy: Strategy::new(mode, hops).unwrap(),
                layers: Some(layers),
                dim: Some(dim),
            })
            .unwrap();
        let ids = hit_ids(&body);
        assert_eq!(
            ids,
            expected.hits.iter().map(|h| h.id).collect::<Vec<_>>(),
            "{mode}"
        );
        let score = body["hits"][0]["score"].as_f64().unwrap();
        assert!(
            (score - f64::from(expected.hits[0].score)).abs() < 1e-4,
            "{mode}: {score}"
        );
        assert_eq!(
            (body["layers"].as_u64(), body["dim"].as_u64()),
            (Some(layers as u64), Some(dim as u64))
        );
    }

    let texts = ["the river of the city", "who was in the film?"];
    let reply = server.post(
        "/v1/embeddings",
        &json!({"input": texts, "dimensions": 8, "layers": 1, "model": "anything"}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let body = reply.json();
    assert_eq!(body["object"], "list");
    assert_eq!(
        (body["layers"].as_u64(), body["dimensions"].as_u64()),
        (Some(1), Some(8))
    );
    let encoder = rag::encoder::Encoder::load(&model, &EncoderOptions::default()).unwrap();
    let expected = encoder.encode(&texts, &[1]).unwrap().remove(0).truncated(8);
    for (i, item) in body["data"].as_array().unwrap().iter().enumerate() {
        assert_eq!(item["index"], i);
        let got: Vec<f32> = item["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(got.len(), 8);
        assert!(
            rag::vectors::cosine(&got, expected.row(i)) > 0.9999,
            "text {i}"
        );
    }
    let single = server
        .post("/v1/embeddings", &json!({"input": "a city"}))
        .json();
    assert_eq!(single["data"][0]["embedding"].as_array().unwrap().len(), 32);

    // No generator: /ask says so, after checking the request itself.
    server
        .post("/ask", &json!({"question": "who?"}))
        .assert_error(503, "unavailable", "no generator");
    server.post("/ask", &json!({"question": " "})).assert_error(
        400,
        "invalid_request_error",
        "empty",
    );

    let metrics = server.get("/metrics");
    assert!(metrics.head.contains("text/plain"), "{}", metrics.head);
    assert_eq!(
        counter(
            &metrics.body,
            "rag_http_requests_total{route=\"/search\",status=\"200\"}"
        ),
        6.0
    );
    assert_eq!(
        counter(
            &metrics.body,
            "rag_http_requests_total{route=\"/ask\",status=\"503\"}"
        ),
        1.0
    );
    assert_eq!(
        counter(
            &metrics.body,
            "rag_http_request_duration_seconds_count{route=\"/v1/embeddings\"}"
        ),
        2.0
    );
    assert_eq!(
        counter(&metrics.body, "rag_queue_depth{queue=\"embed\"}"),
        0.0
    );
    server.stop().unwrap();
}

#[test]
fn bad_input_gets_a_json_error_never_a_panic_or_a_dropped_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let mut config = ServeConfig::default();
    config.limits.max_body_bytes = 16 * 1024;
    let answerer: Arc<dyn Answerer> = Arc::new(FakeAnswerer::new(1, Duration::ZERO));
    let server = TestServer::ready(config, &index_dir, Some(answerer));
    let invalid = "invalid_request_error";
    let long_question = "x".repeat(5000);
    // 150 words: a few hundred bytes, but more tokens than the tiny model's 128.
    let many_tokens = "river ".repeat(150);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/search", json!({}), "missing field `query`"),
        (
            "/search",
            json!({"query": 5}),
            "invalid type: integer `5`, expected a string",
        ),
        ("/search", json!({"query": ["a"]}), "invalid type"),
        ("/search", json!({"query": ""}), "empty"),
        ("/search", json!({"query": long_question}), "too long"),
        (
            "/search",
            json!({"query": "a", "k": 0}),
            "k must be between 1 and 100",
        ),
        (
            "/search",
            json!({"query": "a", "k": 1000}),
            "k must be between",
        ),
        (
            "/search",
            json!({"query": "a", "k": "five"}),
            "invalid type",
        ),
        (
            "/search",
            json!({"query": "a", "dim": 0}),
            "`dim` 0 is outside 1..=32",
        ),
        (
            "/search",
            json!({"query": "a", "dim": 33}),
            "`dim` 33 is outside",
        ),
        ("/search", json!({"query": "a", "dim": -4}), "invalid value"),
        (
            "/search",
            json!({"query": "a", "layers": 2}),
            "no vectors for `layers` 2 (it stores 1,3)",
        ),
        (
            "/search",
            json!({"query": "a", "layers": 0}),
            "`layers` 0 is outside 1..=3, the depths of model (the index stores 1,3)",
        ),
        (
            "/search",
            json!({"query": "a", "layers": 99}),
            "`layers` 99 is outside 1..=3",
        ),
        (
            "/search",
            json!({"query": "a", "mode": "fuzzy"}),
            "unknown variant `fuzzy`",
        ),
        (
            "/search",
            json!({"query": "a", "colour": "red"}),
            "unknown field `colour`",
        ),
        (
            "/search",
            json!({"query": many_tokens}),
            "limit of 128 tokens",
        ),
        ("/search", json!([1, 2]), "invalid type"),
        ("/v1/embeddings", json!({}), "missing field `input`"),
        (
            "/v1/embeddings",
            json!({"input": []}),
            "between 1 and 256 texts",
        ),
        (
            "/v1/embeddings",
            json!({"input": [1, 2, 3]}),
            "string or a list of strings",
        ),
        (
            "/v1/embeddings",
            json!({"input": 7}),
            "string or a list of strings",
        ),
        (
            "/v1/embeddings",
            json!({"input": ["ok", "  "]}),
            "input 1 is empty",
        ),
        (
            "/v1/embeddings",
            json!({"input": "x".repeat(9000)}),
            "input 0 is too long",
        ),
        (
            "/v1/embeddings",
            json!({"input": ["ok", many_tokens]}),
            "input 1 is longer than the encoder's limit",
        ),
        (
            "/v1/embeddings",
            json!({"input": "a", "dimensions": 0}),
            "`dimensions` must be between 1 and 32",
        ),
        (
            "/v1/embeddings",
            json!({"input": "a", "dimensions": 64}),
            "`dimensions` must be between 1 and 32",
        ),
        (
            "/v1/embeddings",
            json!({"input": "a", "layers": 4}),
            "`layers` must be between 1 and 3",
        ),
        (
            "/v1/embeddings",
            json!({"input": "a", "encoding_format": "base64"}),
            "encoding_format",
        ),
        ("/ask", json!({"question": ""}), "empty"),
        (
            "/ask",
            json!({"question": "who?", "top_k": 0}),
            "top_k must be between",
        ),
        (
            "/ask",
            json!({"question": "who?", "mode": "psychic"}),
            "unknown variant",
        ),
        (
            "/ask",
            json!({"question": "who?", "stream": "yes"}),
            "invalid type",
        ),
    ];
    for (path, body, says) in &cases {
        let reply = server.post(path, body);
        reply.assert_error(400, invalid, says);
        // HTTP errors name JSON fields, never the command line's flags.
        assert!(!reply.body.contains("--"), "{reply:?}");
    }
    // BM25 has no depth or size: they are ignored, never refused.
    let reply = server.post(
        "/search",
        &json!({"query": "topic 3", "mode": "bm25", "layers": 2, "dim": 999}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let raw_cases: [(&str, &[u8], &str); 4] = [
        ("/search", b"{", "invalid JSON body"),
        ("/search", b"", "invalid JSON body"),
        ("/search", b"{\"query\": \"\xff\xfe\"}", "invalid JSON body"),
        ("/v1/embeddings", b"not json at all", "invalid JSON body"),
    ];
    for (path, body, says) in raw_cases {
        http(server.addr, "POST", path, body).assert_error(400, invalid, says);
    }
    let huge = json!({"query": "a".repeat(64 * 1024)}).to_string();
    http(server.addr, "POST", "/search", huge.as_bytes()).assert_error(
        413,
        "request_too_large",
        "size limit",
    );
    server
        .get("/nowhere")
        .assert_error(404, "not_found", "no such route");
    server
        .get("/search")
        .assert_error(405, "method_not_allowed", "method");
    http(server.addr, "DELETE", "/health", b"").assert_error(405, "method_not_allowed", "method");

    // After all that the server still answers, and counted no 5xx (but /health's while
    // loading).
    assert_eq!(
        server.post("/search", &json!({"query": "topic 3"})).status,
        200
    );
    let metrics = server.get("/metrics").body;
    let errors: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("status=\"5") && !l.contains("route=\"/health\""))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    server.stop().unwrap();
}

/// A server whose batches wait long enough that requests sent together surely meet, even on
/// a loaded machine.
fn batching_server(index_dir: &Path) -> TestServer {
    let mut config = ServeConfig::default();
    config.batch.window = Duration::from_millis(200);
    TestServer::ready(config, index_dir, None)
}

/// `clients` requests to `path` at once, the i-th with `body(i)`; their replies in order.
fn all_at_once(
    server: &TestServer,
    clients: usize,
    path: &str,
    body: impl Fn(usize) -> Value + Sync,
) -> Vec<Reply> {
    let addr = server.addr;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|i| {
                let body = &body;
                s.spawn(move || http(addr, "POST", path, body(i).to_string().as_bytes()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn concurrent_embedding_requests_share_a_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let server = batching_server(&index_dir);
    let clients = 12;
    let replies = all_at_once(
        &server,
        clients,
        "/v1/embeddings",
        |i| json!({"input": format!("the city {i}"), "layers": 1 + i % 3}),
    );
    for reply in &replies {
        assert_eq!(reply.status, 200, "{reply:?}");
    }
    let metrics = server.get("/metrics").body;
    let batches = counter(&metrics, "rag_embed_batches_total");
    let requests = counter(&metrics, "rag_embed_batched_requests_total");
    assert_eq!(requests, clients as f64);
    assert!(
        batches < requests / 2.0,
        "{requests} requests in {batches} batches: not batched"
    );
    // Sharing a batch (and its padding, and other depths) does not change a vector.
    let alone = server
        .post(
            "/v1/embeddings",
            &json!({"input": "the city 4", "layers": 2}),
        )
        .json();
    let together = replies[4].json();
    let vector = |v: &Value| -> Vec<f32> {
        v["data"][0]["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    assert!(rag::vectors::cosine(&vector(&alone), &vector(&together)) > 0.99999);
    server.stop().unwrap();
}

/// Searches sent together are encoded in one batch and looked up together (grouped by depth,
/// size, mode and k), and each still gets what the library finds for it alone.
#[test]
fn concurrent_searches_share_a_batch_and_answer_like_the_library() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let server = batching_server(&index_dir);
    let request = |i: usize| {
        let mode = if i % 4 == 3 {
            Mode::Hybrid
        } else {
            Mode::Dense
        };
        (
            format!("topic {}", 7 * i),
            3 + i % 2,
            mode,
            1 + 2 * (i % 2),
            8 * (1 + i % 2),
        )
    };
    let clients = 12;
    let replies = all_at_once(&server, clients, "/search", |i| {
        let (query, k, mode, layers, dim) = request(i);
        json!({"query": query, "k": k, "mode": mode, "layers": layers, "dim": dim})
    });
    let metrics = server.get("/metrics").body;
    let batches = counter(&metrics, "rag_embed_batches_total");
    assert!(
        batches < clients as f64 / 2.0,
        "{clients} searches in {batches} batches"
    );
    // Three kinds of search: two dense ones (depth, size and k go together) and one hybrid.
    let lookups = counter(&metrics, "rag_search_lookups_total");
    assert_eq!(
        counter(&metrics, "rag_searches_looked_up_total"),
        clients as f64
    );
    assert!(
        lookups < clients as f64 / 2.0,
        "{clients} searches in {lookups} look-ups"
    );
    let library = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply.status, 200, "{reply:?}");
        let (query, k, mode, layers, dim) = request(i);
        let expected = library
            .search(&SearchRequest {
                query: &query,
                k,
                strategy: Strategy::new(mode, 1).unwrap(),
                layers: Some(layers),
                dim: Some(dim),
            })
            .unwrap();
        let body = reply.json();
        let ids = hit_ids(&body);
        assert_eq!(
            ids,
            expected.hits.iter().map(|h| h.id).collect::<Vec<_>>(),
            "{query}"
        );
    }
    server.stop().unwrap();
}

/// The `data:` payload of every `event: NAME` in a server-sent event stream.
fn sse_events(raw: &str, name: &str) -> Vec<Value> {
    let marker = format!("event: {name}\n");
    raw.split(&marker)
        .skip(1)
        .filter_map(|rest| rest.strip_prefix("data: ")?.lines().next())
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[test]
fn ask_answers_whole_or_streamed_and_stops_when_the_client_leaves() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let fake = Arc::new(FakeAnswerer::new(5, Duration::from_millis(1)));
    let server = TestServer::ready(ServeConfig::default(), &index_dir, Some(fake.clone()));

    let whole = server.post(
        "/ask",
        &json!({"question": "who?", "top_k": 2, "mode": "bm25"}),
    );
    assert_eq!(whole.status, 200, "{whole:?}");
    let body = whole.json();
    assert_eq!(body["answer"], "t0 t1 t2 t3 t4 ");
    assert_eq!(body["sources"].as_array().unwrap().len(), 2);
    assert_eq!(body["sources"][0]["text"], "Bm25");
    assert!(body["timings"]["total_ms"].is_number());

    let streamed = server.post("/ask", &json!({"question": "who?", "stream": true}));
    assert_eq!(streamed.status, 200, "{streamed:?}");
    assert!(
        streamed.head.contains("text/event-stream"),
        "{}",
        streamed.head
    );
    let tokens: Vec<String> = sse_events(&streamed.body, "token")
        .iter()
        .map(|e| e["token"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tokens.concat(), "t0 t1 t2 t3 t4 ");
    let done = sse_events(&streamed.body, "done");
    assert_eq!(done.len(), 1, "{}", streamed.body);
    assert_eq!(done[0]["answer"], "t0 t1 t2 t3 t4 ");
    assert_eq!(done[0]["sources"].as_array().unwrap().len(), 5);
    server.stop().unwrap();

    // A client that leaves mid-stream stops its generation.
    let endless = Arc::new(FakeAnswerer::new(100_000, Duration::from_millis(1)));
    let server = TestServer::ready(ServeConfig::default(), &index_dir, Some(endless.clone()));
    let body = json!({"question": "who?", "stream": true}).to_string();
    let mut stream = send(server.addr, "POST", "/ask", body.as_bytes());
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("event: token") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !endless.finished.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "generation went on after the client left"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let emitted = endless.emitted.load(Ordering::SeqCst);
    assert!(emitted < 100_000, "emitted {emitted}");
    let metrics = server.get("/metrics").body;
    assert!(counter(&metrics, "rag_tokens_generated_total") >= 1.0);
    server.stop().unwrap();
}

#[test]
fn a_full_generation_queue_answers_503_with_retry_after() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let (release, gate) = mpsc::channel();
    let fake = Arc::new(FakeAnswerer {
        gate: Some(Mutex::new(gate)),
        ..FakeAnswerer::new(1, Duration::ZERO)
    });
    let mut config = ServeConfig::default();
    config.limits.generate_queue = 1;
    let server = TestServer::ready(config, &index_dir, Some(fake.clone()));
    let addr = server.addr;
    let ask = move || http(addr, "POST", "/ask", br#"{"question": "who?"}"#);
    // One question generating (held at the gate), one waiting: the queue is full.
    let running = std::thread::spawn(ask);
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.started.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the first question never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let waiting = std::thread::spawn(ask);
    while counter(
        &server.get("/metrics").body,
        "rag_queue_depth{queue=\"generate\"}",
    ) < 1.0
    {
        assert!(
            Instant::now() < deadline,
            "the second question never queued"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let refused = ask();
    refused.assert_error(503, "overloaded", "generation queue is full");
    assert!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{}",
        refused.head
    );
    release.send(()).unwrap();
    release.send(()).unwrap();
    assert_eq!(running.join().unwrap().status, 200);
    assert_eq!(waiting.join().unwrap().status, 200);
    server.stop().unwrap();
}

#[test]
fn health_says_loading_until_the_models_are_in() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let (loaded, wait) = mpsc::channel::<()>();
    let server = TestServer::start(ServeConfig::default(), move || {
        let _ = wait.recv();
        Ok(Models {
            retriever: Arc::new(ReloadingIndex::new(Retriever::open(
                &index_dir,
                None,
                Precision::F32,
            )?)?),
            answerer: None,
        })
    });
    let health = server.get("/health");
    assert_eq!(health.status, 503);
    assert_eq!(health.json()["status"], "loading");
    let early = server.post("/search", &json!({"query": "topic 1"}));
    early.assert_error(503, "not_ready", "loading");
    assert!(
        early.head.to_ascii_lowercase().contains("retry-after"),
        "{}",
        early.head
    );
    loaded.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.get("/health").status != 200 {
        assert!(Instant::now() < deadline, "never became ready");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        server.post("/search", &json!({"query": "topic 1"})).status,
        200
    );
    server.stop().unwrap();

    // A failed load stops the server with the reason.
    let mut failing = TestServer::start(ServeConfig::default(), || anyhow::bail!("no such index"));
    let err = failing.thread.take().unwrap().join().unwrap().unwrap_err();
    assert!(format!("{err:#}").contains("no such index"), "{err:#}");
}

#[test]
fn shutdown_drains_requests_in_flight_then_exits() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let fake = Arc::new(FakeAnswerer::new(20, Duration::from_millis(20)));
    let server = TestServer::ready(ServeConfig::default(), &index_dir, Some(fake.clone()));
    let addr = server.addr;
    let in_flight =
        std::thread::spawn(move || http(addr, "POST", "/ask", br#"{"question": "who?"}"#));
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.started.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the question never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopping = Instant::now();
    server.stop().unwrap();
    // The server returned only after the answer was complete, and the client got all of it.
    assert!(fake.finished.load(Ordering::SeqCst));
    assert!(stopping.elapsed() >= Duration::from_millis(100));
    let reply = in_flight.join().unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.json()["answer"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        20
    );
    assert!(
        TcpStream::connect(addr).is_err(),
        "still accepting connections after shutdown"
    );
}

/// Issue 17, case 1: rebuilding the index under a running server. The server keeps answering
/// from the build it has until the new one is fully open, then switches: its answers match
/// the library on the new index, at every depth, and /health names the new build. A new
/// build that cannot be opened leaves the old build served, and /health says why.
#[test]
fn a_rebuilt_index_is_served_whole_once_the_server_notices_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, index_dir) = tiny_index(tmp.path());
    let mut config = ServeConfig::default();
    config.limits.index_check = Duration::from_millis(50);
    let server = TestServer::ready(config, &index_dir, None);
    let build_id =
        |server: &TestServer| server.get("/health").json()["index"]["generation"].clone();
    let first = build_id(&server);
    assert!(first.as_str().is_some_and(|g| g.len() == 16), "{first}");
    let search = |layers: usize| {
        let reply = server.post(
            "/search",
            &json!({"query": "topic 7 river", "k": 5, "layers": layers, "dim": 16}),
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        hit_ids(&reply.json())
    };
    search(1);

    // Another corpus (other paragraphs under the same titles' numbers), same directory.
    let other = tmp.path().join("other.json");
    common::write_corpus(&other, 30, 5);
    let rebuilt = index::build(&common::tiny_build_options(&model, other, &index_dir)).unwrap();
    assert_eq!(rebuilt.documents, 150);
    let deadline = Instant::now() + Duration::from_secs(30);
    while build_id(&server) == first {
        assert!(Instant::now() < deadline, "the server never switched");
        std::thread::sleep(Duration::from_millis(20));
    }
    let library = Retriever::open(&index_dir, None, Precision::F32).unwrap();
    assert_eq!(server.get("/health").json()["index"]["documents"], 150);
    assert_eq!(
        server.get("/health").json()["index"]["generation"],
        library.index.build_id()
    );
    for layers in [3, 1] {
        let expected = library
            .search(&SearchRequest {
                query: "topic 7 river",
                k: 5,
                strategy: Strategy::default(),
                layers: Some(layers),
                dim: Some(16),
            })
            .unwrap();
        assert_eq!(
            search(layers),
            expected.hits.iter().map(|h| h.id).collect::<Vec<_>>(),
            "layers {layers}"
        );
    }

    // A damaged build is not switched to.
    let served = build_id(&server);
    let staged = tmp.path().join("staged");
    index::build(&common::tiny_build_options(
        &model,
        tmp.path().join("corpus.json"),
        &staged,
    ))
    .unwrap();
    std::fs::write(staged.join("docs.offsets"), b"").unwrap();
    let old = tmp.path().join("old");
    std::fs::rename(&index_dir, &old).unwrap();
    std::fs::rename(&staged, &index_dir).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.get("/health").json()["index"]["reload_error"].is_null() {
        assert!(
            Instant::now() < deadline,
            "the damaged index went unnoticed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let health = server.get("/health").json();
    assert_eq!(health["index"]["generation"], served);
    assert!(
        health["index"]["reload_error"]
            .as_str()
            .unwrap()
            .contains("docs.offsets"),
        "{health}"
    );
    assert_eq!(search(3).len(), 5);
    server.stop().unwrap();
}

/// Issue 54, case 10: once a damaged manifest is put back, /health no longer reports the
/// error of the damaged one: the index on disk is the one served, whole.
#[test]
fn a_restored_manifest_clears_the_reload_error() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let live =
        ReloadingIndex::new(Retriever::open(&index_dir, None, Precision::F32).unwrap()).unwrap();
    let path = index_dir.join("manifest.json");
    let original = std::fs::read(&path).unwrap();
    // Replaced whole (a new inode), as an editor or a copy would.
    let replace = |bytes: &[u8]| {
        let tmp = index_dir.join("manifest.json.new");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    replace(b"{ not a manifest");
    assert!(!live.refresh());
    assert!(
        live.reload_error()
            .is_some_and(|e| e.contains("manifest.json")),
        "{:?}",
        live.reload_error()
    );
    replace(&original);
    assert!(!live.refresh());
    assert_eq!(live.reload_error(), None);
}

/// Issue 17, case 8: connections that never finish their request head are closed after the
/// header deadline, and do not hold a shutdown open.
#[test]
fn partial_requests_are_timed_out_and_do_not_hold_shutdown() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let mut config = ServeConfig::default();
    config.limits.header_read = Duration::from_millis(500);
    let server = TestServer::ready(config, &index_dir, None);
    let partial: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).unwrap();
            stream
                .write_all(b"POST /search HTTP/1.1\r\nHost: test\r\nContent-Le")
                .unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            stream
        })
        .collect();
    let started = Instant::now();
    for mut stream in partial.into_iter().take(3) {
        let mut rest = Vec::new();
        // Closed by the server (with or without a 408), not by this test's read timeout.
        let _ = stream.read_to_end(&mut rest);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    // A server with partial requests open stops within the header deadline, not the drain's.
    let _held: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut stream = TcpStream::connect(server.addr).unwrap();
            stream.write_all(b"GET /health HTTP/1.1\r\nHo").unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let stopping = Instant::now();
    server.stop().unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        stopping.elapsed()
    );
}

/// Issue 55: documents added and removed over HTTP, searches answered all along, the new
/// generation served as soon as the request returns, bad input a 4xx naming the field.
#[test]
fn documents_are_added_and_removed_over_http_while_searches_go_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (_model, index_dir) = tiny_index(tmp.path());
    let server = TestServer::ready(ServeConfig::default(), &index_dir, None);
    let health = |server: &TestServer| server.get("/health").json()["index"].clone();
    let before = health(&server);
    assert_eq!(before["documents"], 100);

    // Searches from another client while the updates run: every one answered.
    let stop = Arc::new(AtomicBool::new(false));
    let addr = server.addr;
    let searching = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut answered = 0;
            while !stop.load(Ordering::Relaxed) {
                let body = json!({"query": "topic 3 river", "k": 5, "mode": "hybrid"});
                let reply = http(addr, "POST", "/search", body.to_string().as_bytes());
                assert_eq!(reply.status, 200, "{reply:?}");
                answered += 1;
            }
            answered
        })
    };

    let title = "Zanzibar lighthouse keeper";
    let added = server.post(
        "/documents",
        &json!({"documents": [{"title": title, "text": "A zanzibar lighthouse keeper tends the lamp."}]}),
    );
    assert_eq!(added.status, 200, "{added:?}");
    let body = added.json();
    assert_eq!(
        (body["added"].clone(), body["documents"].clone()),
        (json!(1), json!(101))
    );
    // Served as soon as the request returned.
    let now = health(&server);
    assert_eq!(now["documents"], 101);
    assert_eq!(now["generation"], body["generation"]);
    assert_ne!(now["generation"], before["generation"]);
    let find = |server: &TestServer| {
        let reply = server.post(
            "/search",
            &json!({"query": "zanzibar lighthouse keeper", "k": 3, "mode": "bm25"}),
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        reply.json()["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["title"] == title)
    };
    assert!(find(&server));
    // The same again: nothing to do.
    let again = server.post(
        "/documents",
        &json!({"title": title, "text": "A zanzibar lighthouse keeper tends the lamp."}),
    );
    assert_eq!(again.json()["up_to_date"], true, "{again:?}");

    server
        .post("/documents", &json!({"documents": [{"title": "x"}]}))
        .assert_error(400, "invalid_request_error", "documents[0].text is missing");
    server
        .post("/documents", &json!({"title": " ", "text": "y"}))
        .assert_error(400, "invalid_request_error", "title is empty");
    server
        .post("/documents", &json!({"file": {"name": "", "content": "y"}}))
        .assert_error(400, "invalid_request_error", "file.name");
    http(server.addr, "DELETE", "/documents/No%20such%20title", b"").assert_error(
        404,
        "not_found",
        "No such title",
    );

    let removed = http(
        server.addr,
        "DELETE",
        "/documents/Zanzibar%20lighthouse%20keeper",
        b"",
    );
    assert_eq!(removed.status, 200, "{removed:?}");
    assert_eq!(removed.json()["removed"], 1);
    assert_eq!(health(&server)["documents"], 100);
    assert!(!find(&server));

    // A file, cut as `rag index` cuts one of its kind.
    let file = server.post(
        "/documents",
        &json!({"file": {"name": "notes.md", "content": "# Notes\n\nThe quokka smiles on Rottnest.\n"}}),
    );
    assert_eq!(file.status, 200, "{file:?}");
    assert_eq!(file.json()["added"], 1);

    stop.store(true, Ordering::Relaxed);
    assert!(searching.join().unwrap() > 0);
    server.stop().unwrap();
}
