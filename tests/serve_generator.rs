//! A plain `rag serve` answers: it loads the default generator from
//! `data/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` (relative to where it runs, as
//! `rag ask` does) when that file is there, says which one in `/health`, and `--no-llm`
//! serves search only. Runs on a tiny index, with a real GGUF placed under the default name.

mod common;
// Only some of its helpers are used here.
#[allow(dead_code)]
#[path = "web/http.rs"]
mod http;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

/// `rag serve` started in `cwd`, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(cwd: &Path, args: &[&str]) -> Self {
        let mut child = common::rag()
            .current_dir(cwd)
            .args(["serve", "--addr", "127.0.0.1:0", "--precision", "f32"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting rag serve");
        let stderr = child.stderr.take().expect("a piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("rag serve said where it listens")
            .parse()
            .expect("a socket address");
        let mut server = Self { child, addr };
        // Loading a GGUF takes seconds.
        let deadline = Instant::now() + Duration::from_secs(300);
        while http::request(server.addr, "GET", "/health", &[], None)
            .map(|r| r.status)
            .ok()
            != Some(200)
        {
            assert!(
                server.child.try_wait().unwrap().is_none(),
                "rag serve exited while loading"
            );
            assert!(Instant::now() < deadline, "rag serve never became ready");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn plain_serve_loads_the_default_generator_and_no_llm_serves_search_only() {
    const TEST: &str = "plain_serve_loads_the_default_generator_and_no_llm_serves_search_only";
    let Some(llm) = common::any_llm(TEST) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (model, corpus) = common::tiny_model_and_corpus(dir.path(), 4, 5);
    let index = dir.path().join("index");
    common::tiny_index(&model, &[&corpus], &index, &[]);
    // The working directory of a fresh clone: the generator under its default name.
    let cwd = dir.path().join("clone");
    let models = cwd.join("data/models");
    std::fs::create_dir_all(&models).unwrap();
    let default = models.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    std::os::unix::fs::symlink(&llm, &default).unwrap();
    let index = index.to_str().unwrap();

    let server = Server::start(&cwd, &["--index", index, "--max-tokens", "4"]);
    let health = http::get(server.addr, "/health").json();
    assert_eq!(
        health["models"]["generator"],
        json!("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        "{health}"
    );
    let reply = http::post(
        server.addr,
        "/ask",
        &json!({"question": "what is topic 3 about?"}),
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply.json()["answer"].is_string(), "{}", reply.text());
    drop(server);

    let server = Server::start(&cwd, &["--index", index, "--no-llm"]);
    let health = http::get(server.addr, "/health").json();
    assert_eq!(health["models"]["generator"], json!(null), "{health}");
    let reply = http::post(
        server.addr,
        "/ask",
        &json!({"question": "what is topic 3 about?"}),
    );
    assert_eq!(reply.status, 503, "{}", reply.text());
    assert!(reply.text().contains("no generator"), "{}", reply.text());
    // Search still works.
    let reply = http::post(server.addr, "/search", &json!({"query": "topic 3", "k": 2}));
    assert_eq!(reply.status, 200, "{}", reply.text());
}
