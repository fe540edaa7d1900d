//! `POST /documents` and `DELETE /documents/{title}`: the served index's documents added,
//! changed and removed over HTTP, by the same update as `rag index --add/--remove`
//! ([`crate::index::update`]), which installs a new build that is served as soon as it is
//! (the request waits for the switch, so its answer names the build now served).
//!
//! An update runs on a blocking thread of its own, with an encoder of its own at the index's
//! precision: searches keep their lane, their encoder and the build they started with,
//! and only share the CPU. Updates from several clients run one at a time, in order; one
//! that finds the index locked by a `rag index` elsewhere is answered 409.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::error::{ApiError, JsonBody};
use super::AppState;
use crate::corpus::{Paragraph, Source};
use crate::encoder::EncoderOptions;
use crate::index::update::{self, UpdateOptions, UpdateSummary};
use crate::progress::ProgressMode;

/// Most documents one request may add.
const MAX_DOCUMENTS: usize = 10_000;

/// One record, or several under `documents`; or a file under `file`, cut into passages as
/// `rag index` cuts a file of its kind (its name's extension: .txt, .md, .html, .json, .jsonl).
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum DocumentsBody {
    Many { documents: Vec<Record> },
    File { file: Upload },
    One(Record),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Record {
    title: Option<String>,
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Upload {
    name: String,
    content: String,
}

type App = State<Arc<AppState>>;

pub(super) async fn add(
    State(app): App,
    JsonBody(body): JsonBody<DocumentsBody>,
) -> Result<Response, ApiError> {
    let mut options = options(&app)?;
    let upload = match body {
        DocumentsBody::One(record) => {
            options.documents = vec![record.paragraph("")?];
            None
        }
        DocumentsBody::Many { documents } => {
            if documents.is_empty() || documents.len() > MAX_DOCUMENTS {
                return Err(ApiError::invalid(format!(
                    "documents must hold 1 to {MAX_DOCUMENTS} records"
                )));
            }
            options.documents = documents
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.paragraph(&format!("documents[{i}].")))
                .collect::<Result<_, _>>()?;
            None
        }
        DocumentsBody::File { file } => Some(file.stage()?),
    };
    if let Some((_, path)) = &upload {
        options.add = vec![path.clone()];
    }
    let summary = run(&app, options).await;
    drop(upload);
    Ok(answer(summary?, StatusCode::OK))
}

pub(super) async fn remove(
    State(app): App,
    UrlPath(title): UrlPath<String>,
) -> Result<Response, ApiError> {
    let mut options = options(&app)?;
    let served = app.ready()?.index.current();
    let known = served
        .index
        .titles()
        .map_err(ApiError::internal)?
        .iter()
        .any(|(_, t)| *t == title);
    if !known {
        return Err(ApiError::missing(format!(
            "no document has the title {title:?}"
        )));
    }
    options.remove_titles = vec![title];
    Ok(answer(run(&app, options).await?, StatusCode::OK))
}

impl Record {
    fn paragraph(self, at: &str) -> Result<Paragraph, ApiError> {
        let field = |name: &str, value: Option<String>| match value {
            Some(v) if !v.trim().is_empty() => Ok(v),
            Some(_) => Err(ApiError::invalid(format!("{at}{name} is empty"))),
            None => Err(ApiError::invalid(format!("{at}{name} is missing"))),
        };
        Ok(Paragraph {
            title: field("title", self.title)?.trim().to_string(),
            text: field("text", self.text)?,
            links: Vec::new(),
            source: None::<Source>,
        })
    }
}

impl Upload {
    /// Writes the upload into a folder of its own under its bare name, so that its documents
    /// are titled and sourced by that name; the folder goes when the request ends.
    fn stage(self) -> Result<(Staged, std::path::PathBuf), ApiError> {
        let name = std::path::Path::new(&self.name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .ok_or_else(|| ApiError::invalid("file.name must name a file, e.g. notes.md"))?;
        if self.content.trim().is_empty() {
            return Err(ApiError::invalid("file.content is empty"));
        }
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rag-upload-{}-{n}", std::process::id()));
        let staged = Staged(dir.clone());
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(&name), self.content))
            .map_err(|e| ApiError::internal(e.into()))?;
        Ok((staged, dir.join(name)))
    }
}

/// An uploaded file's folder, removed when dropped.
struct Staged(std::path::PathBuf);

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The update of the served index, with the served encoder's model and settings.
fn options(app: &AppState) -> Result<UpdateOptions, ApiError> {
    let served = app.ready()?.index.current();
    Ok(UpdateOptions {
        index_dir: served.index.dir.clone(),
        model_dir: served.encoder.model_dir.clone(),
        encoder: EncoderOptions {
            pooling: Some(served.encoder.pooling),
            max_length: Some(served.encoder.max_length),
            ..EncoderOptions::default()
        },
        add: Vec::new(),
        documents: Vec::new(),
        remove_titles: Vec::new(),
        remove_sources: Vec::new(),
        sync: false,
        skip_bad: false,
        progress: ProgressMode::Quiet,
    })
}

/// Runs the update on a blocking thread, one at a time, then switches to what it installed.
async fn run(app: &Arc<AppState>, options: UpdateOptions) -> Result<UpdateSummary, ApiError> {
    let _turn = app.updates.lock().await;
    let live = Arc::clone(&app.ready()?.index);
    tokio::task::spawn_blocking(move || {
        let summary = update::update(&options)?;
        if !summary.up_to_date {
            live.refresh();
        }
        Ok::<_, anyhow::Error>(summary)
    })
    .await
    .map_err(|e| ApiError::internal(e.into()))?
    .map_err(|err| {
        let message = format!("{err:#}");
        if message.contains("is being built by another") {
            ApiError::conflict(message)
        } else if message.contains("could not be read")
            || message.contains("not UTF-8")
            || message.contains("no paragraphs")
        {
            ApiError::invalid(message)
        } else {
            ApiError::internal(err)
        }
    })
}

fn answer(summary: UpdateSummary, status: StatusCode) -> Response {
    (
        status,
        Json(json!({
            "added": summary.added,
            "changed": summary.changed,
            "unchanged": summary.unchanged,
            "removed": summary.removed,
            "documents": summary.documents,
            "generation": summary.build_id,
            "compacted": summary.compacted,
            "up_to_date": summary.up_to_date,
            "seconds": summary.total_seconds,
        })),
    )
        .into_response()
}
