//! The connection loop: axum's `serve` with a deadline on request headers, which it does not
//! set. hyper then closes a connection that has not sent a whole request head within
//! `header_read` of connecting or of its last response, so neither a slow client nor an idle
//! kept-alive connection holds a socket (or a shutdown) open.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use futures_util::FutureExt;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;

use super::access::ConnectedTo;

/// How long accepting pauses after an error (out of file descriptors, most likely) before
/// trying again.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown` completes; then stops accepting, lets each
/// connection finish the request it is answering (idle ones close at once), and returns once
/// all are closed.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    header_read: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let (signal, signalled) = watch::channel(());
    tokio::spawn(async move {
        shutdown.await;
        drop(signalled);
    });
    let (closed, open) = watch::channel(());
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    eprintln!("rag serve: accepting a connection: {err}");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            },
            () = signal.closed() => break,
        };
        // Which of the machine's addresses the client reached: the one `Host` it may name.
        let connected = stream.local_addr().ok().map(ConnectedTo);
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut request: axum::extract::Request<hyper::body::Incoming>| {
                if let Some(connected) = connected {
                    request.extensions_mut().insert(connected);
                }
                request
            },
        ));
        let signal = signal.clone();
        let open = open.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_read);
            let mut connection = pin!(builder.serve_connection(TokioIo::new(stream), service));
            let mut stopping = pin!(signal.closed().fuse());
            loop {
                tokio::select! {
                    // A connection's errors (a client gone, a timeout) end only that connection.
                    _ = connection.as_mut() => break,
                    () = &mut stopping => connection.as_mut().graceful_shutdown(),
                }
            }
            drop(open);
        });
    }
    drop(open);
    drop(listener);
    closed.closed().await;
}
