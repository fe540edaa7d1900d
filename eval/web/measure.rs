//! The web page of `rag serve` measured on the default models: the bytes of its files and, in
//! headless chromium, the time to the first answer token and to the whole answer for the first
//! HotpotQA questions. A measurement, not a test (it asserts nothing): `eval/web/measure.sh`
//! runs it as `cargo bench --bench web_page`, a bench target so that it reuses the page test's
//! server and browser drivers (`tests/web/`) and gets the `rag` binary cargo builds for it.
//!
//! `RAG_WEB_OUT`: where `measure.json` and the screenshots go (eval/web); `RAG_INDEX`: the index
//! (index/default); `RAG_WEB_QUESTIONS`: how many questions (6).

#[allow(dead_code)]
#[path = "../../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../../tests/web/http.rs"]
mod http;
#[allow(dead_code)]
#[path = "../../tests/web/page.rs"]
mod page;
#[allow(dead_code)]
#[path = "../../tests/web/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../../tests/web/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use page::{browser_paths, open_page};
use serde_json::json;
use server::Server;
use webdriver::{Browser, ENTER};

fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| {
        let mid = sorted.len() / 2;
        if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        }
    })
}

fn main() -> anyhow::Result<()> {
    let out = PathBuf::from(std::env::var_os("RAG_WEB_OUT").unwrap_or_else(|| "eval/web".into()));
    let index_dir = std::env::var("RAG_INDEX").unwrap_or_else(|_| "index/default".into());
    let count: usize = std::env::var("RAG_WEB_QUESTIONS")
        .map_or(Ok(6), |n| n.parse())
        .context("RAG_WEB_QUESTIONS: not a whole number")?;
    let (chromedriver, chromium) = browser_paths()
        .context("no chromium and chromedriver (scripts/common.sh ensure_browser)")?;
    let llm =
        common::default_llm().context("no default generator (scripts/fetch-models.sh llm)")?;
    let data = common::data_dir().context("no HotpotQA data (../shared/data)")?;
    let questions = rag::corpus::read_questions(
        &data.join("hotpotqa/hotpot_dev_distractor_sample.json"),
        count,
    )?;
    // The committed sweep, so that the screenshot shows its heatmap.
    let server = Server::start(&[
        "--index",
        &index_dir,
        "--llm",
        llm.to_str().unwrap(),
        "--runs",
        "eval/retrieval/runs",
    ]);
    let health = server.get("/health").json();
    let assets: Vec<(&str, usize)> = ["/", "/static/app.js", "/static/style.css"]
        .into_iter()
        .map(|path| (path, server.get(path).body.len()))
        .collect();

    // The machine's load while measuring: other work on its cores slows prompt evaluation most.
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load_before = load();
    let browser = Browser::start(&chromedriver, &chromium, 1280, 1000);
    let load_started = Instant::now();
    open_page(&browser, &server);
    let ready_ms = load_started.elapsed().as_secs_f64() * 1000.0;
    let mut rows = Vec::new();
    for (i, question) in questions.iter().enumerate() {
        browser.clear("#question");
        browser.type_into("#question", &format!("{}{ENTER}", question.question));
        browser.wait_for(
            "the depth x size view after the answer",
            "return document.getElementById('answer').dataset.done === 'true' && \
             document.querySelector('#tradeoff table')?.dataset.state === 'done'",
            Duration::from_secs(600),
        );
        let seen = browser.eval(
            "const a = document.getElementById('answer'); \
             return {answer: a.textContent, first_token_ms: Number(document.getElementById('first-token').dataset.ms), \
                     answer_ms: Number(a.dataset.ms), server_total_ms: Number(a.dataset.serverMs), \
                     tokens: Number(a.dataset.tokens), \
                     tradeoff_cells: document.querySelectorAll('#tradeoff .cell').length, \
                     tradeoff_ms: Number(document.querySelector('#tradeoff table').dataset.ms)}",
            &[],
        );
        rows.push(json!({"question": question.question, "gold": question.answer, "browser": seen}));
        // The last question's page: the index's smaller sizes are derived by then, so the
        // depth x size view shows warm search times.
        if i + 1 == questions.len() {
            browser.screenshot(&out.join("page-wide.png"));
            browser.resize(420, 1000);
            browser.screenshot(&out.join("page-narrow.png"));
            browser.resize(1280, 1000);
        }
    }
    let column = |key: &str, skip: usize| -> Vec<f64> {
        rows.iter()
            .skip(skip)
            .filter_map(|r| r["browser"][key].as_f64())
            .collect()
    };
    let result = json!({
        "what": "rag serve's web page: bytes of its files, and in headless chromium the time from \
                 pressing Enter to the first answer token and to the whole answer (streamed /ask), \
                 then the depth x size view (one /search per cell, one at a time)",
        "encoder": health["models"]["encoder"],
        "generator": health["models"]["generator"],
        "index": health["index"],
        "page_bytes": {
            "files": assets.iter().map(|(p, n)| json!({"path": p, "bytes": n})).collect::<Vec<_>>(),
            "total": assets.iter().map(|(_, n)| n).sum::<usize>(),
        },
        "page_ready_ms": ready_ms,
        "loadavg": {"before": load_before.trim(), "after": load().trim()},
        "questions": rows,
        "median": {
            "first_token_ms": median(&column("first_token_ms", 0)),
            "first_token_ms_after_the_first_question": median(&column("first_token_ms", 1)),
            "answer_ms": median(&column("answer_ms", 0)),
            "server_total_ms": median(&column("server_total_ms", 0)),
            "tradeoff_ms": median(&column("tradeoff_ms", 0)),
        },
    });
    let path = out.join("measure.json");
    std::fs::write(&path, serde_json::to_string_pretty(&result)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    println!("{}", serde_json::to_string_pretty(&result["median"])?);
    Ok(())
}
