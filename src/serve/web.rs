//! The web page at `GET /`: three static files compiled into the binary (no build step, nothing
//! fetched from elsewhere, so it works offline), and the sweep summaries of `rag eval` it draws
//! heatmaps from (`GET /runs`, `GET /runs/<name>/summary.json`). The page itself talks to the
//! same API as any other client.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::AppState;

/// The page only loads its own files and talks to its own origin.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

struct Asset {
    bytes: &'static [u8],
    content_type: &'static str,
    /// Computed on first use: the hash of the bytes, so a new binary's files are never served
    /// from a stale cache.
    etag: OnceLock<HeaderValue>,
}

impl Asset {
    const fn new(bytes: &'static [u8], content_type: &'static str) -> Self {
        Self {
            bytes,
            content_type,
            etag: OnceLock::new(),
        }
    }

    /// The file, or 304 when the browser's copy is current; browsers revalidate every time
    /// (`no-cache`), which costs a round trip on loopback and never shows an old page.
    fn respond(&'static self, request: &HeaderMap) -> Response {
        let etag = self.etag.get_or_init(|| {
            let digest = hex::encode(&Sha256::digest(self.bytes)[..8]);
            HeaderValue::from_str(&format!("\"{digest}\"")).expect("hex is a valid header")
        });
        let headers = [
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::ETAG, etag.clone()),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
        ];
        if request.get(header::IF_NONE_MATCH) == Some(etag) {
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        (
            headers,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(self.content_type),
            )],
            self.bytes,
        )
            .into_response()
    }
}

static INDEX_HTML: Asset = Asset::new(include_bytes!("web/index.html"), "text/html; charset=utf-8");
static APP_JS: Asset = Asset::new(
    include_bytes!("web/app.js"),
    "text/javascript; charset=utf-8",
);
static STYLE_CSS: Asset = Asset::new(include_bytes!("web/style.css"), "text/css; charset=utf-8");

pub(super) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/",
            get(|h: HeaderMap| async move { INDEX_HTML.respond(&h) }),
        )
        .route(
            "/static/app.js",
            get(|h: HeaderMap| async move { APP_JS.respond(&h) }),
        )
        .route(
            "/static/style.css",
            get(|h: HeaderMap| async move { STYLE_CSS.respond(&h) }),
        )
        .route("/runs", get(runs))
        .route("/runs/{name}/summary.json", get(run_summary))
}

/// A grid run's summary: at least two cells with both a depth and a size.
fn is_sweep(summary: &Value) -> bool {
    let cells = summary["cells"].as_array().map_or(&[][..], Vec::as_slice);
    cells
        .iter()
        .filter(|c| c["layers"].is_u64() && c["dim"].is_u64())
        .count()
        > 1
}

/// The sweeps under `dir`, by name, with what the page's list says about each.
fn list_sweeps(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let mut runs = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("listing {}", dir.display()))?
            .path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| valid_name(n))
        else {
            continue;
        };
        // A run still being written, or someone else's folder: not a sweep to draw.
        let Ok(Some(summary)) = read_summary(dir, name) else {
            continue;
        };
        if is_sweep(&summary) {
            let config = &summary["config"];
            runs.push(json!({
                "name": name,
                "mode": config["mode"],
                "questions": config["questions"],
                "top_k": config["top_k"],
                "generator": config["generator"],
                "cells": summary["cells"].as_array().map_or(0, Vec::len),
            }));
        }
    }
    runs.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(runs)
}

async fn runs(State(app): State<Arc<AppState>>) -> Result<Json<Value>, ApiError> {
    let Some(dir) = app.config.runs.clone() else {
        return Ok(Json(json!({"dir": null, "runs": []})));
    };
    let listed = dir.clone();
    let runs = tokio::task::spawn_blocking(move || list_sweeps(&listed))
        .await
        .map_err(|e| ApiError::internal(e.into()))?
        .map_err(ApiError::internal)?;
    Ok(Json(json!({"dir": dir, "runs": runs})))
}

/// A run's folder name as `rag eval` makes them: letters, digits, `-`, `_` and `.`, not
/// starting with a dot, so no name reaches outside the runs folder.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Run `name`'s `summary.json`, parsed: `None` when there is none. Only a regular file inside
/// the runs folder is read (a link to anything outside it, a FIFO or a device is refused), and
/// only JSON is served, so the route cannot be made to hand out any other file.
fn read_summary(dir: &Path, name: &str) -> anyhow::Result<Option<Value>> {
    let path = dir.join(name).join("summary.json");
    let real = match std::fs::canonicalize(&path) {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("resolving {}", path.display())),
    };
    let root =
        std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
    let regular = std::fs::metadata(&real).is_ok_and(|m| m.is_file());
    anyhow::ensure!(
        real.starts_with(&root) && regular,
        "{} is not a regular file inside {}",
        path.display(),
        dir.display()
    );
    let bytes = std::fs::read(&real).with_context(|| format!("reading {}", path.display()))?;
    let summary = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    Ok(Some(summary))
}

async fn run_summary(
    State(app): State<Arc<AppState>>,
    UrlPath(name): UrlPath<String>,
) -> Result<Response, ApiError> {
    if !valid_name(&name) {
        return Err(ApiError::invalid(format!(
            "invalid run name {name:?}: letters, digits, '-', '_' and '.' only, not starting with '.'"
        )));
    }
    let dir = app.config.runs.clone().ok_or_else(|| {
        ApiError::missing("this server has no runs folder (start it with --runs DIR)")
    })?;
    let read = name.clone();
    let summary = tokio::task::spawn_blocking(move || read_summary(&dir, &read))
        .await
        .map_err(|e| ApiError::internal(e.into()))?
        .map_err(|e| {
            // The operator learns why; the client only that there is nothing to serve.
            eprintln!("rag serve: {e:#}");
            ApiError::missing(format!("run {name:?} has no summary this server serves"))
        })?
        .ok_or_else(|| ApiError::missing(format!("no run named {name:?}")))?;
    Ok(([(header::CACHE_CONTROL, "no-cache")], Json(summary)).into_response())
}
