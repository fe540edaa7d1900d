//! The web page of `rag serve` (`GET /`): its routes over plain HTTP, then the page itself in a
//! real headless browser (Debian's `chromium` and `chromium-driver`, which `scripts/test.sh`
//! installs): a question typed and sent with the keyboard, the streamed answer and its sources,
//! a depth change and its new evidence, the depth x size view, a sweep's heatmaps, an API error
//! shown in the page, and a narrow window. The server is the `rag` binary on loopback with a
//! tiny model and index, and a real GGUF generator when one is there.
//!
//! Without the browser (or a generator) the test skips loudly, unless `RAG_REQUIRE` is set (CI
//! sets it): then what is missing fails it.

mod common;
#[path = "web/http.rs"]
mod http;
#[path = "web/page.rs"]
mod page;
#[path = "web/server.rs"]
mod server;
#[path = "web/webdriver.rs"]
mod webdriver;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use page::{browser_paths, existing, open_page};
use rag::index;
use serde_json::{json, Value};
use server::{rag, Server};
use webdriver::{Browser, ENTER};

/// The generator the page test answers with: the small one, for speed.
const SMALL_LLM: &str = "data/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// `RAG_REQUIRE` set to anything: CI, where a skipped test would hide a broken page.
fn required() -> bool {
    std::env::var_os("RAG_REQUIRE").is_some_and(|v| !v.is_empty())
}

/// Fails the test when what is missing is required, else says the test skips.
fn missing(test: &str, what: &str) {
    assert!(!required(), "{test}: {what} (RAG_REQUIRE is set)");
    common::skip(test, what);
}

impl Server {
    /// The ids `/search` ranks at a depth and size.
    /// What the page shows for a search: the server's own retrieval defaults, which `/health`
    /// reports and the page starts from.
    fn search_ids(&self, query: &str, k: usize, layers: usize, dim: usize) -> Vec<u64> {
        let ask = self.get("/health").json()["ask"].clone();
        let body = json!({"query": query, "k": k, "layers": layers, "dim": dim,
            "mode": ask["mode"], "hops": ask["hops"]});
        let reply = http::post(self.addr, "/search", &body);
        assert_eq!(reply.status, 200, "{}", reply.text());
        reply.json()["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|h| h["id"].as_u64().expect("an id"))
            .collect()
    }
}

/// A sweep's `summary.json` as `rag eval --sweep` writes it (the fields the page reads), over
/// `layers` x `dims`, Recall@5 = (layer + dim/1000) / 10 so each cell's value is known.
fn sweep_summary(layers: &[usize], dims: &[usize], with_em: bool) -> Value {
    let cells: Vec<Value> = layers
        .iter()
        .flat_map(|&l| dims.iter().map(move |&d| (l, d)))
        .map(|(l, d)| {
            json!({"layers": l, "dim": d, "questions": 10,
                   "recall": {"1": 0.0, "2": 0.0, "5": (l as f64 + d as f64 / 1000.0) / 10.0, "10": 0.0},
                   "exact_match": with_em.then_some(0.25)})
        })
        .collect();
    json!({"config": {"questions": 10, "mode": "dense", "top_k": 5, "generator": null,
                      "cells": cells.iter().map(|c| json!({"layers": c["layers"], "dim": c["dim"]})).collect::<Vec<_>>()},
           "cells": cells, "seconds": 1.0})
}

/// A tiny model and index (depths 1 and 3, hidden size 32, stored and served at 32) under `dir`, and a
/// runs folder with one sweep, one single-cell run and a hidden folder.
fn tiny_setup(dir: &Path) -> (PathBuf, PathBuf) {
    let (model, corpus) = common::tiny_model_and_corpus(dir, 20, 5);
    let index_dir = dir.join("index");
    let mut options = common::tiny_build_options(&model, corpus, &index_dir);
    options.dim = None;
    index::build(&options).unwrap();
    let runs = dir.join("runs");
    for (name, summary) in [
        ("sweep-a", sweep_summary(&[1, 3], &[16, 32], true)),
        ("single", sweep_summary(&[3], &[32], false)),
        (".hidden", sweep_summary(&[1, 3], &[16, 32], false)),
    ] {
        std::fs::create_dir_all(runs.join(name)).unwrap();
        std::fs::write(runs.join(name).join("summary.json"), summary.to_string()).unwrap();
    }
    (index_dir, runs)
}

#[test]
fn page_assets_health_and_runs_routes() {
    let dir = tempfile::tempdir().unwrap();
    let (index_dir, runs) = tiny_setup(dir.path());
    let server = Server::start(&[
        "--no-llm",
        "--index",
        index_dir.to_str().unwrap(),
        "--runs",
        runs.to_str().unwrap(),
        "--precision",
        "f32",
    ]);

    let refused = rag()
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--index",
            index_dir.to_str().unwrap(),
        ])
        .args(["--runs", dir.path().join("nope").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no such folder"));

    let page = server.get("/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page
        .text()
        .contains(r#"<script src="/static/app.js" defer>"#));
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    assert!(page
        .header("content-security-policy")
        .is_some_and(|p| p.starts_with("default-src 'self'")));
    let etag = page.header("etag").expect("an ETag").to_string();
    let again = http::request(server.addr, "GET", "/", &[("If-None-Match", &etag)], None).unwrap();
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    for (path, kind) in [
        ("/static/app.js", "text/javascript; charset=utf-8"),
        ("/static/style.css", "text/css; charset=utf-8"),
    ] {
        let asset = server.get(path);
        assert_eq!(
            (asset.status, asset.header("content-type")),
            (200, Some(kind)),
            "{path}"
        );
        assert_ne!(asset.header("etag"), Some(etag.as_str()), "{path}");
    }

    let health = server.get("/health").json();
    assert_eq!(health["index"]["layers"], json!([1, 3]));
    assert_eq!(health["index"]["dims"], json!([16, 32]));
    for mode in ["dense", "bm25", "hybrid"] {
        assert!(
            health["modes"].as_array().unwrap().contains(&json!(mode)),
            "{health}"
        );
    }
    assert_eq!(health["queues"]["generate"], 0);

    let listed = server.get("/runs").json();
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["runs"][0]["name"], "sweep-a");
    assert_eq!(listed["runs"][0]["cells"], 4);
    let summary = server.get("/runs/sweep-a/summary.json");
    assert_eq!(summary.status, 200);
    assert_eq!(summary.json(), sweep_summary(&[1, 3], &[16, 32], true));
    for (path, status) in [
        ("/runs/..%2F..%2Fetc/summary.json", 400),
        ("/runs/.hidden/summary.json", 400),
        ("/runs/a%5Cb/summary.json", 400),
        ("/runs/../index/summary.json", 404),
        ("/runs/nope/summary.json", 404),
    ] {
        let reply = server.get(path);
        assert_eq!(reply.status, status, "{path}: {}", reply.text());
        assert!(reply.json()["error"]["message"].is_string(), "{path}");
    }
}

/// Where the page test leaves its screenshots (CI can keep them).
fn screenshot_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The ids of the source cards the page shows.
fn shown_ids(browser: &Browser) -> Vec<u64> {
    let ids = browser.eval(
        "return [...document.querySelectorAll('#sources li')].map(li => Number(li.dataset.id))",
        &[],
    );
    serde_json::from_value(ids).unwrap()
}

/// Waits until the sources show what was retrieved at `layers` and returns their ids.
fn wait_for_retrieved(browser: &Browser, layers: usize) -> Vec<u64> {
    browser.wait_for(
        &format!("the sources at {layers} layers"),
        &format!(
            "const s = document.getElementById('sources').dataset; \
             return s.state === 'retrieved' && s.layers === '{layers}'"
        ),
        Duration::from_secs(30),
    );
    shown_ids(browser)
}

/// With `--api-key`, the page asks for the key once, keeps it for the tab (sessionStorage),
/// and reads the protected routes with it; a reload in the same tab does not ask again.
#[test]
fn page_asks_for_the_api_key_once_and_keeps_it_for_the_tab() {
    const TEST: &str = "page_asks_for_the_api_key_once_and_keeps_it_for_the_tab";
    let Some((chromedriver, chromium)) = browser_paths() else {
        return missing(
            TEST,
            "chromium and chromedriver are not installed (scripts/test.sh installs them)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (index_dir, runs) = tiny_setup(dir.path());
    let key = "page-key-123";
    let server = Server::start(&[
        "--index",
        index_dir.to_str().unwrap(),
        "--runs",
        runs.to_str().unwrap(),
        "--precision",
        "f32",
        "--api-key",
        key,
    ]);
    let browser = Browser::start(&chromedriver, &chromium, 1280, 1000);
    browser.goto(&server.url("/"));
    let asked = browser.answer_prompt(key, Duration::from_secs(60));
    assert!(asked.contains("API key"), "{asked}");
    let runs_loaded = "return document.getElementById('runs-note').textContent.startsWith('From')";
    browser.wait_for(
        "the runs list, read with the key",
        runs_loaded,
        Duration::from_secs(60),
    );
    assert_eq!(
        browser.eval("return sessionStorage.getItem('rag-api-key')", &[]),
        json!(key)
    );
    assert_eq!(browser.dialog(), None, "asked a second time");
    // A reload in the same tab keeps the key: no prompt, the protected routes still read.
    browser.goto(&server.url("/"));
    browser.wait_for(
        "the runs list after a reload",
        runs_loaded,
        Duration::from_secs(60),
    );
    assert_eq!(browser.dialog(), None, "asked again after a reload");
}

#[test]
fn page_in_a_headless_browser() {
    const TEST: &str = "page_in_a_headless_browser";
    let Some((chromedriver, chromium)) = browser_paths() else {
        return missing(
            TEST,
            "chromium and chromedriver are not installed (scripts/test.sh installs them)",
        );
    };
    let llm = existing("RAG_WEB_LLM", SMALL_LLM).or_else(common::default_llm);
    if llm.is_none() {
        // Without a generator the page still shows the evidence; its answer goes untested.
        missing(
            TEST,
            "no GGUF generator (scripts/fetch-models.sh llm-small), so the answer is not checked",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (index_dir, runs) = tiny_setup(dir.path());
    let mut args = vec![
        "--index".to_string(),
        index_dir.display().to_string(),
        "--runs".into(),
        runs.display().to_string(),
        "--precision".into(),
        "f32".into(),
    ];
    if let Some(llm) = &llm {
        args.extend([
            "--llm".into(),
            llm.display().to_string(),
            "--max-tokens".into(),
            "8".into(),
        ]);
    }
    let server = Server::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let browser = Browser::start(&chromedriver, &chromium, 1280, 1000);
    open_page(&browser, &server);

    // Ask with the keyboard alone: type, Enter.
    let question = "topic 7 river city film";
    browser.type_into("#question", &format!("{question}{ENTER}"));
    let default_ids = server.search_ids(question, 5, 3, 32);
    if llm.is_some() {
        browser.wait_for(
            "the answer",
            "return document.getElementById('answer').dataset.done === 'true'",
            Duration::from_secs(300),
        );
        let answer = browser.eval(
            "const a = document.getElementById('answer'); return [a.textContent, Number(a.dataset.tokens)]",
            &[],
        );
        assert!(!answer[0].as_str().unwrap().trim().is_empty(), "{answer}");
        assert!(
            answer[1].as_u64().unwrap() >= 1,
            "no token was streamed: {answer}"
        );
        let bar = browser.eval(
            "return document.querySelectorAll('#timing .bar span').length",
            &[],
        );
        assert!(bar.as_u64().unwrap() >= 2, "the timing bar has {bar} parts");
        browser.find("#first-token");
        let sources = browser.eval(
            "return [...document.querySelectorAll('#sources li .title')].map(t => t.textContent)",
            &[],
        );
        let titles = sources.as_array().unwrap();
        assert!(!titles.is_empty() && titles.len() <= 5, "{sources}");
        assert!(
            titles
                .iter()
                .all(|t| t.as_str().unwrap().starts_with("topic ")),
            "{sources}"
        );
    } else {
        assert_eq!(wait_for_retrieved(&browser, 3), default_ids);
    }

    // The depth x size view: every cell, each compared with the full-depth full-size one.
    browser.wait_for(
        "the depth x size view",
        "return document.querySelector('#tradeoff table')?.dataset.state === 'done'",
        Duration::from_secs(60),
    );
    let cells = browser.eval(
        "return [...document.querySelectorAll('#tradeoff .cell')].map(c => [Number(c.dataset.layers), Number(c.dataset.dim), Number(c.dataset.overlap)])",
        &[],
    );
    let cells: Vec<(usize, usize, f64)> = serde_json::from_value(cells).unwrap();
    assert_eq!(cells.len(), 4, "{cells:?}");
    let full: HashSet<u64> = server.search_ids(question, 5, 3, 32).into_iter().collect();
    for &(layers, dim, overlap) in &cells {
        let ids = server.search_ids(question, 5, layers, dim);
        let expected = ids.iter().filter(|id| full.contains(id)).count() as f64 / full.len() as f64;
        assert!(
            (overlap - expected).abs() < 0.01,
            "{layers}x{dim}: {overlap} vs {expected}"
        );
    }
    assert!(
        cells.iter().any(|c| c.2 < 1.0),
        "every cell agrees, so the view shows nothing: {cells:?}"
    );
    // The sweep's heatmaps: Recall@5 of 1 layer x 32 dims is (1 + 0.032) / 10.
    browser.wait_for(
        "the heatmaps",
        "return document.querySelectorAll('#heatmaps table').length === 2",
        Duration::from_secs(30),
    );
    let heat = browser.eval("return document.getElementById('heatmaps').innerText", &[]);
    assert!(heat.as_str().unwrap().contains("10.3"), "{heat}");
    browser.screenshot(&screenshot_dir().join("wide.png"));

    // A shallower encoder: the evidence changes at once, to what /search gives at that depth.
    let shallow_ids = server.search_ids(question, 5, 1, 32);
    assert_ne!(
        shallow_ids, default_ids,
        "depths 1 and 3 agree: the check below could not fail"
    );
    browser.click("#layers option[value='1']");
    assert_eq!(wait_for_retrieved(&browser, 1), shallow_ids);
    let url = browser.eval("return location.search", &[]);
    assert!(url.as_str().unwrap().contains("layers=1"), "{url}");
    // A depth x size cell picked with the keyboard sets the controls.
    browser.type_into("#tradeoff .cell[data-layers='3'][data-dim='16']", ENTER);
    assert_eq!(
        wait_for_retrieved(&browser, 3),
        server.search_ids(question, 5, 3, 16)
    );
    let picked = browser.eval(
        "return [document.getElementById('layers').value, document.getElementById('dim').value]",
        &[],
    );
    assert_eq!(picked, json!(["3", "16"]));

    // The URL carries the settings: a fresh load of it comes back with them.
    let shared = "/?q=topic+7+river&layers=1&dim=32&k=3&mode=hybrid";
    browser.goto(&server.url(shared));
    browser.wait_for(
        "the shared settings",
        "const v = id => document.getElementById(id).value; \
         return v('layers') === '1' && v('dim') === '32' && v('k') === '3' && v('mode') === 'hybrid' && v('question') === 'topic 7 river'",
        Duration::from_secs(30),
    );

    // An API error is a message in the page: top-k beyond the server's limit.
    browser.clear("#k");
    browser.type_into("#k", "500");
    browser.type_into("#question", ENTER);
    let error = browser.wait_for(
        "the API's error message",
        "const e = document.getElementById('error'); return !e.hidden && e.innerText",
        Duration::from_secs(30),
    );
    assert!(
        error.as_str().unwrap().contains("between 1 and 100"),
        "{error}"
    );

    // A narrow window: one column, nothing wider than the window.
    browser.resize(400, 900);
    let overflow = browser.eval(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
        &[],
    );
    assert_eq!(overflow, json!(0), "the page is wider than a narrow window");
    browser.screenshot(&screenshot_dir().join("narrow.png"));

    // What /ask reports beyond today's fields, drawn where the server sends it: the sentences
    // that went into the prompt marked, a second hop labelled, every timing part in the bar.
    let drawn = browser.eval(
        "renderSources([{rank: 1, id: 9, title: 'T', text: 'A. B.', score: 0.5, hop: 2, \
                          sentences: [{text: 'A.', in_prompt: false}, {text: 'B.', in_prompt: true}]}], 'n', {}); \
         renderTiming({encode_ms: 1, search_ms: 2, select_ms: 1, prompt_ms: 1, prompt_eval_ms: 10, \
                       generation_ms: 20, total_ms: 35}, 12); \
         const card = document.querySelector('#sources li'); \
         return [[...card.querySelectorAll('mark')].map(m => m.textContent), card.querySelector('p').textContent, \
                 card.innerText.includes('hop 2'), document.querySelectorAll('#timing .bar span').length]",
        &[],
    );
    assert_eq!(drawn, json!([["B."], "A. B.", true, 6]));
}
