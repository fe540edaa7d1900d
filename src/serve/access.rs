//! Who may talk to the server, checked before any route runs, in this order:
//!
//! 1. `Host` (421): only the address the connection reached, `localhost`, loopback literals and
//!    the names given with `--allowed-host`, so that a page whose name was re-pointed at this
//!    machine (DNS rebinding) cannot read its answers.
//! 2. CORS preflight: answered only for the one origin `--cors-origin` names; no CORS headers
//!    otherwise, so another site's page cannot read a response.
//! 3. API key (401): with `--api-key` / `RAG_API_KEY`, every route but the page's own files and
//!    `/health` wants `Authorization: Bearer KEY`, compared in constant time. `/health` stays
//!    open for probes, without the server's paths.
//! 4. `Content-Type` (415): a POST body must say `application/json`. A browser sends a
//!    cross-site form or `text/plain` fetch without asking first; it asks (preflight) before
//!    sending JSON, and the preflight is refused.
//! 5. `Content-Length` (413) over the body limit, answered before the body is read, so a client
//!    that sent `Expect: 100-continue` is never told to go on (hyper sends `100 Continue` only
//!    once a handler starts reading the body).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::Result;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::ApiError;
use super::AppState;

/// How long a browser may keep an answered preflight (seconds).
const PREFLIGHT_MAX_AGE: &str = "600";

#[derive(Debug, Clone, Default)]
pub struct AccessConfig {
    /// The key every protected route wants as `Authorization: Bearer KEY` (`None`: open).
    pub api_key: Option<String>,
    /// Host names accepted besides the bound address, `localhost` and loopback literals.
    pub allowed_hosts: Vec<String>,
    /// The one origin whose pages may call the API from a browser.
    pub cors_origin: Option<String>,
}

/// The local address a connection reached; the connection loop puts it on every request.
#[derive(Debug, Clone, Copy)]
pub struct ConnectedTo(pub SocketAddr);

/// Whether the request carried the API key (always, when there is none); `/health` shows its
/// paths only then.
#[derive(Debug, Clone, Copy)]
pub struct Authorised(pub bool);

/// Refuses to listen beyond loopback with no key unless the operator said `--insecure`.
pub fn check_bind(addr: SocketAddr, access: &AccessConfig, insecure: bool) -> Result<()> {
    if let Some(key) = &access.api_key {
        anyhow::ensure!(!key.trim().is_empty(), "--api-key / RAG_API_KEY is empty");
    }
    if !addr.ip().is_loopback() && access.api_key.is_none() && !insecure {
        anyhow::bail!(
            "refusing to listen on {addr} without an API key: set --api-key or RAG_API_KEY, or pass --insecure to serve every route to anyone who can reach it"
        );
    }
    Ok(())
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]:port`), lower-cased.
fn host_name(value: &str) -> String {
    let value = value.trim();
    let host = if let Some(rest) = value.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        value.rsplit_once(':').map_or(value, |(h, _)| h)
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

fn host_allowed(name: &str, connected: Option<IpAddr>, allowed: &[String]) -> bool {
    if name == "localhost" || allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || Some(ip) == connected,
        Err(_) => false,
    }
}

/// The request's host: the authority of an absolute request target, else the `Host` header.
fn request_host(request: &Request) -> Option<String> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str().to_owned());
    }
    request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Routes anyone may load: the page and its files (it asks for the key itself) and `/health`.
fn is_open(path: &str) -> bool {
    matches!(path, "/" | "/health") || path.starts_with("/static/")
}

fn bearer_matches(headers: &HeaderMap, key: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| {
            constant_time_eq::constant_time_eq(given.trim().as_bytes(), key.as_bytes())
        })
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

fn error(status: StatusCode, kind: &'static str, message: String) -> ApiError {
    ApiError {
        status,
        kind,
        message,
        retry_after: None,
    }
}

fn unauthorised() -> Response {
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "this server wants an API key: send `Authorization: Bearer KEY`".into(),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The CORS answer to a preflight from the allowed origin.
fn preflight(origin: &HeaderValue) -> Response {
    (
        StatusCode::NO_CONTENT,
        [
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone()),
            (
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, DELETE"),
            ),
            (
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type"),
            ),
            (
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static(PREFLIGHT_MAX_AGE),
            ),
            (header::VARY, HeaderValue::from_static("Origin")),
        ],
    )
        .into_response()
}

pub(super) async fn check(
    State(app): State<Arc<AppState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let access = &app.config.access;
    let connected = request.extensions().get::<ConnectedTo>().map(|c| c.0.ip());
    let Some(host) = request_host(&request) else {
        return ApiError::invalid("the request has no Host header").into_response();
    };
    let name = host_name(&host);
    if !host_allowed(&name, connected, &access.allowed_hosts) {
        return error(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!("this server does not answer for host {name:?} (start it with --allowed-host {name} to allow it)"),
        )
        .into_response();
    }
    // The allowed origin's value, when this request comes from it.
    let origin = access.cors_origin.as_deref().and_then(|allowed| {
        request
            .headers()
            .get(header::ORIGIN)
            .filter(|o| o.as_bytes() == allowed.as_bytes())
            .cloned()
    });
    if request.method() == Method::OPTIONS {
        if let Some(origin) = &origin {
            return preflight(origin);
        }
    }
    let authorised = access
        .api_key
        .as_deref()
        .is_none_or(|key| bearer_matches(request.headers(), key));
    if !authorised && !is_open(request.uri().path()) {
        return unauthorised();
    }
    request.extensions_mut().insert(Authorised(authorised));
    if request.method() == Method::POST {
        if !is_json(request.headers()) {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "a request body must be JSON, sent with `Content-Type: application/json`".into(),
            )
            .into_response();
        }
        let limit = app.config.limits.max_body_bytes;
        let length = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if length.is_some_and(|n| n > limit as u64) {
            return ApiError::too_large().into_response();
        }
    }
    let mut response = next.run(request).await;
    if let Some(origin) = origin {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// `/health`'s answer for a client without the key: the server's paths (and the reload error,
/// which names them) left out.
pub(super) fn without_paths(health: &mut Value) {
    if let Some(encoder) = health["models"]["encoder"].as_object_mut() {
        encoder.remove("path");
    }
    if let Some(index) = health["index"].as_object_mut() {
        index.remove("dir");
        if index.get("reload_error").is_some_and(|e| !e.is_null()) {
            index.insert(
                "reload_error".into(),
                "the newest index could not be opened; the server's log says why".into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port_and_case() {
        assert_eq!(host_name("LocalHost:8080"), "localhost");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("example.org.:1"), "example.org");
    }

    #[test]
    fn only_loopback_the_connected_address_and_named_hosts_are_answered() {
        let allowed = vec!["rag.internal".to_string()];
        let connected = Some("10.0.0.5".parse().unwrap());
        for ok in ["localhost", "127.0.0.1", "::1", "10.0.0.5", "rag.internal"] {
            assert!(host_allowed(ok, connected, &allowed), "{ok}");
        }
        for refused in [
            "evil.example",
            "10.0.0.6",
            "0.0.0.0",
            "localhost.evil.example",
            "",
        ] {
            assert!(!host_allowed(refused, connected, &allowed), "{refused}");
        }
    }

    #[test]
    fn listening_beyond_loopback_wants_a_key_or_insecure() {
        let open = AccessConfig::default();
        let keyed = AccessConfig {
            api_key: Some("k".into()),
            ..Default::default()
        };
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(check_bind(local, &open, false).is_ok());
        let refused = check_bind(any, &open, false).unwrap_err().to_string();
        assert!(refused.contains("--api-key"), "{refused}");
        assert!(check_bind(any, &open, true).is_ok());
        assert!(check_bind(any, &keyed, false).is_ok());
        let empty = AccessConfig {
            api_key: Some(" ".into()),
            ..Default::default()
        };
        assert!(check_bind(local, &empty, false).is_err());
    }
}
