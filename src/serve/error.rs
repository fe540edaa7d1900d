//! The one error shape every route answers with, `{"error": {"message", "type"}}`, and the JSON
//! body extractor that turns every way a body can be wrong into it instead of axum's plain-text
//! rejections.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::AppState;
use crate::index::CellRefusal;

/// Seconds a client told to back off (queue full, models loading) should wait.
const RETRY_AFTER_SECONDS: u64 = 1;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// An invalid request whose reason is a library error (a bad depth, an empty question):
    /// its message, causes included, is what the client needs to fix the request.
    pub fn invalid_because(err: anyhow::Error) -> Self {
        Self::invalid(format!("{err:#}"))
    }

    /// A depth or size the index cannot search at, named as the request's JSON field.
    pub fn refused(refusal: &CellRefusal) -> Self {
        Self::invalid(refusal.describe(|field| format!("`{field}`")))
    }

    /// A bounded queue is full: the client should retry, not the server grow.
    pub fn overloaded(queue: &str) -> Self {
        Self {
            retry_after: Some(RETRY_AFTER_SECONDS),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                format!("the {queue} queue is full; retry shortly"),
            )
        }
    }

    pub fn loading() -> Self {
        Self {
            retry_after: Some(RETRY_AFTER_SECONDS),
            ..Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "the models are still loading; retry shortly (GET /health says when ready)",
            )
        }
    }

    /// The index is being changed by someone else (a `rag index` holding its lock).
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn internal(err: anyhow::Error) -> Self {
        // The operator gets the whole message (a 500 is a bug to chase); the client does not,
        // since it names the server's files.
        eprintln!("error: {err:#}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "the server failed to answer this request; its log says why",
        )
    }

    pub fn not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such route (try GET / for the page, POST /search, POST /ask, POST /v1/embeddings, POST /documents, DELETE /documents/{title}, GET /health, GET /metrics)",
        )
    }

    pub fn too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            "the request body is over the size limit",
        )
    }

    /// Something a route names (a run) does not exist.
    pub fn missing(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method",
        )
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// A JSON request body, read within the router's size limit and the body deadline and parsed
/// with serde_json: too big is 413, too slow 408, anything else wrong (not JSON, missing field,
/// wrong type, unknown field) is 400 with serde's description of what and where.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<Arc<AppState>> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &Arc<AppState>) -> Result<Self, ApiError> {
        let deadline = state.config.limits.body_read;
        let bytes = tokio::time::timeout(deadline, Bytes::from_request(request, state))
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "request_timeout",
                    format!("the request body did not arrive within {deadline:?}"),
                )
            })?
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::too_large()
                } else {
                    ApiError::invalid(format!(
                        "could not read the request body: {}",
                        rejection.body_text()
                    ))
                }
            })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::invalid(format!("invalid JSON body: {e}")))
    }
}
