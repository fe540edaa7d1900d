//! `rag serve` exposed to clients it must not trust (issue 54, items 17-22): the API key, the
//! `Host` check against DNS rebinding, JSON-only POST bodies and CORS off unless named, the
//! runs folder that serves only its own JSON files, 413 before `100 Continue`, and big embedding
//! requests encoded in pieces. The server is the `rag` binary (`RAG_BIN` names another) on
//! loopback with a tiny model and index.

mod common;
// Shared with tests/web.rs, which uses more of them.
#[allow(dead_code)]
#[path = "web/http.rs"]
mod http;
#[allow(dead_code)]
#[path = "web/server.rs"]
mod server;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rag::index;
use serde_json::{json, Value};
use server::{rag, Server};

const KEY: &str = "s3cret-key";

/// A tiny model and index under `dir`.
fn tiny_index(dir: &Path) -> PathBuf {
    let (model, corpus) = common::tiny_model_and_corpus(dir, 20, 5);
    let index_dir = dir.join("index");
    index::build(&common::tiny_build_options(&model, corpus, &index_dir)).unwrap();
    index_dir
}

fn serve(index_dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["--index", index_dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[derive(Debug)]
struct Raw {
    status: u16,
    /// Lower-cased.
    head: String,
    body: String,
}

/// Sends `head` (request line and headers, without the blank line) and `body` on a fresh
/// connection and reads the whole answer.
fn raw(addr: SocketAddr, head: &str, body: &str) -> Raw {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}"));
    Raw {
        status: head.split(' ').nth(1).unwrap().parse().unwrap(),
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

fn search_body() -> String {
    json!({"query": "topic 3", "k": 2}).to_string()
}

/// POST /search with `headers` (each `Name: value`), Host the server's address.
fn post_search(addr: SocketAddr, headers: &[&str]) -> Raw {
    let mut head = format!("POST /search HTTP/1.1\r\nHost: {addr}");
    for h in headers {
        head.push_str("\r\n");
        head.push_str(h);
    }
    raw(addr, &head, &search_body())
}

fn get_with(addr: SocketAddr, path: &str, headers: &[&str]) -> Raw {
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {addr}");
    for h in headers {
        head.push_str("\r\n");
        head.push_str(h);
    }
    raw(addr, &head, "")
}

fn error_type(reply: &Raw) -> String {
    let body: Value =
        serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply:?}"));
    body["error"]["type"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn listening_beyond_loopback_wants_a_key_or_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-index");
    let output = rag()
        .args(["serve", "--addr", "0.0.0.0:0", "--index"])
        .arg(&missing)
        .env_remove("RAG_API_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without an API key")
            && stderr.contains("--insecure"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on http"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn an_api_key_is_wanted_everywhere_but_the_page_and_health() {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(dir.path());
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let server = serve(
        &index_dir,
        &["--api-key", KEY, "--runs", runs.to_str().unwrap()],
    );
    let addr = server.addr;
    let json = "Content-Type: application/json";
    let right = format!("Authorization: Bearer {KEY}");
    for refused in [
        post_search(addr, &[json]),
        post_search(addr, &[json, "Authorization: Bearer wrong"]),
        post_search(addr, &[json, &format!("Authorization: Bearer {KEY}x")]),
        post_search(addr, &[json, &format!("Authorization: {KEY}")]),
        get_with(addr, "/metrics", &[]),
        get_with(addr, "/runs", &[]),
        raw(
            addr,
            &format!("POST /v1/embeddings HTTP/1.1\r\nHost: {addr}\r\n{json}"),
            r#"{"input": "a"}"#,
        ),
    ] {
        assert_eq!(refused.status, 401, "{refused:?}");
        assert_eq!(error_type(&refused), "unauthorized");
        assert!(
            refused.head.contains("www-authenticate: bearer"),
            "{refused:?}"
        );
    }
    let found = post_search(addr, &[json, &right]);
    assert_eq!(found.status, 200, "{found:?}");
    assert_eq!(get_with(addr, "/metrics", &[&right]).status, 200);
    assert_eq!(get_with(addr, "/runs", &[&right]).status, 200);
    // The page loads without the key (it asks for it), and so does /health, without paths.
    assert_eq!(get_with(addr, "/", &[]).status, 200);
    assert_eq!(get_with(addr, "/static/app.js", &[]).status, 200);
    let open = get_with(addr, "/health", &[]);
    assert_eq!(open.status, 200, "{open:?}");
    let dir_text = dir.path().to_str().unwrap();
    assert!(!open.body.contains(dir_text), "{}", open.body);
    let open: Value = serde_json::from_str(&open.body).unwrap();
    assert_eq!(open["status"], "ready");
    assert!(open["index"].get("dir").is_none(), "{open}");
    let full: Value = serde_json::from_str(&get_with(addr, "/health", &[&right]).body).unwrap();
    assert!(full["index"]["dir"].as_str().is_some(), "{full}");
}

#[test]
fn only_known_host_names_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(dir.path());
    let server = serve(&index_dir, &["--allowed-host", "rag.internal"]);
    let addr = server.addr;
    let port = addr.port();
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_string(),
        format!("localhost.evil.example:{port}"),
        format!("10.1.2.3:{port}"),
    ] {
        for path in ["/health", "/"] {
            let reply = raw(addr, &format!("GET {path} HTTP/1.1\r\nHost: {host}"), "");
            assert_eq!(reply.status, 421, "{host} {path}: {reply:?}");
            assert_eq!(error_type(&reply), "misdirected_request");
        }
        let search = raw(
            addr,
            &format!("POST /search HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"),
            &search_body(),
        );
        assert_eq!(search.status, 421, "{host}: {search:?}");
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "LOCALHOST".to_string(),
        "rag.internal".to_string(),
        format!("rag.internal:{port}"),
    ] {
        let reply = raw(addr, &format!("GET /health HTTP/1.1\r\nHost: {host}"), "");
        assert_eq!(reply.status, 200, "{host}: {reply:?}");
    }
}

#[test]
fn post_bodies_must_be_json_and_cors_is_off_unless_an_origin_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(dir.path());
    let server = serve(&index_dir, &[]);
    let addr = server.addr;
    // What a page on another site can send without a preflight.
    for headers in [
        &["Content-Type: text/plain"][..],
        &["Content-Type: application/x-www-form-urlencoded"][..],
        &["Content-Type: multipart/form-data; boundary=x"][..],
        &[][..],
    ] {
        let reply = post_search(addr, headers);
        assert_eq!(reply.status, 415, "{headers:?}: {reply:?}");
        assert_eq!(error_type(&reply), "unsupported_media_type");
    }
    let ok = post_search(addr, &["Content-Type: Application/JSON; charset=utf-8"]);
    assert_eq!(ok.status, 200, "{ok:?}");
    // No CORS headers for anyone: a preflight from another origin is not granted.
    let origin = "Origin: https://evil.example";
    let preflight = raw(
        addr,
        &format!("OPTIONS /search HTTP/1.1\r\nHost: {addr}\r\n{origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type"),
        "",
    );
    assert!(!preflight.head.contains("access-control-"), "{preflight:?}");
    let answered = post_search(addr, &["Content-Type: application/json", origin]);
    assert_eq!(answered.status, 200);
    assert!(!answered.head.contains("access-control-"), "{answered:?}");
    drop(server);

    let app = "https://app.example";
    let server = serve(&index_dir, &["--cors-origin", app]);
    let addr = server.addr;
    let preflight = raw(
        addr,
        &format!("OPTIONS /search HTTP/1.1\r\nHost: {addr}\r\nOrigin: {app}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type"),
        "",
    );
    assert_eq!(preflight.status, 204, "{preflight:?}");
    assert!(
        preflight
            .head
            .contains(&format!("access-control-allow-origin: {app}")),
        "{preflight:?}"
    );
    let answered = post_search(
        addr,
        &["Content-Type: application/json", &format!("Origin: {app}")],
    );
    assert!(
        answered
            .head
            .contains(&format!("access-control-allow-origin: {app}")),
        "{answered:?}"
    );
    let other = post_search(addr, &["Content-Type: application/json", origin]);
    assert!(!other.head.contains("access-control-"), "{other:?}");
}

#[test]
fn the_runs_folder_serves_only_its_own_json_files() {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(dir.path());
    let runs = dir.path().join("runs");
    let secret = dir.path().join("secret.json");
    std::fs::write(&secret, r#"{"secret": "outside the runs folder"}"#).unwrap();
    std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
    std::fs::write(
        dir.path().join("elsewhere/summary.json"),
        r#"{"secret": "a folder outside"}"#,
    )
    .unwrap();
    for name in ["passwd", "outside", "notjson", "good"] {
        std::fs::create_dir_all(runs.join(name)).unwrap();
    }
    std::os::unix::fs::symlink("/etc/passwd", runs.join("passwd/summary.json")).unwrap();
    std::os::unix::fs::symlink(&secret, runs.join("outside/summary.json")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), runs.join("linked")).unwrap();
    std::fs::write(
        runs.join("notjson/summary.json"),
        "root:x:0:0:root:/root:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(runs.join("good/summary.json"), r#"{"cells": []}"#).unwrap();
    let server = serve(&index_dir, &["--runs", runs.to_str().unwrap()]);
    for name in ["passwd", "outside", "linked", "notjson", "missing"] {
        let reply = http::get(server.addr, &format!("/runs/{name}/summary.json"));
        assert_eq!(reply.status, 404, "{name}: {}", reply.text());
        assert!(!reply.text().contains("root:"), "{name}: {}", reply.text());
        assert!(!reply.text().contains("secret"), "{name}: {}", reply.text());
    }
    let good = http::get(server.addr, "/runs/good/summary.json");
    assert_eq!(good.status, 200, "{}", good.text());
    assert_eq!(good.json(), json!({"cells": []}));
    let listed = http::get(server.addr, "/runs");
    assert_eq!(listed.status, 200);
}

#[test]
fn an_oversized_content_length_is_refused_before_100_continue() {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(dir.path());
    let server = serve(&index_dir, &[]);
    let addr = server.addr;
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "POST /v1/embeddings HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\nExpect: 100-continue\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The first thing the server says, without a byte of the body sent.
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "not refused at once: {answer:?}"
    );
}

#[test]
fn a_big_embedding_request_is_encoded_in_pieces_with_the_same_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let index_dir = tiny_index(dir.path());
    let server = serve(&index_dir, &["--chunk-tokens", "16"]);
    let texts: Vec<String> = (0..40).map(|i| format!("the river of city {i}")).collect();
    let whole = http::post(server.addr, "/v1/embeddings", &json!({"input": texts}));
    assert_eq!(whole.status, 200, "{}", whole.text());
    let metrics = server.get("/metrics").text();
    let batches: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rag_embed_batches_total "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    let tokens = whole.json()["usage"]["prompt_tokens"].as_f64().unwrap();
    assert!(
        batches >= (tokens / 16.0).floor(),
        "{tokens} tokens in {batches} passes of at most 16"
    );
    // Each piece's vectors are the text's own.
    let whole = whole.json();
    for i in [0, 17, 39] {
        let alone = http::post(server.addr, "/v1/embeddings", &json!({"input": texts[i]})).json();
        let vector = |v: &Value| -> Vec<f32> {
            v["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        };
        let cosine = rag::vectors::cosine(&vector(&whole["data"][i]), &vector(&alone["data"][0]));
        assert!(cosine > 0.99999, "text {i}: {cosine}");
        assert_eq!(whole["data"][i]["index"], i);
    }
}
