//! `bat serve`: an HTTP endpoint for one ledger (tokio + axum).
//!
//! Every handler authenticates first, then works on the ledger on tokio's
//! blocking pool with its own [`Ledger`] handle (handles are `Send`, not
//! `Sync`; the catalog serializes writers). The protocol is documented in
//! `ledger/PROTOCOL.d/http.md`. The server only ever sends objects through
//! the ledger's wire export and ref names/ids from the catalog; nothing under
//! `.bat/private` is read.

pub mod auth;
pub mod check;
mod handlers;
mod stream;
pub mod ui;
pub mod ui_page;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;

pub use auth::{Scope, TokenSet};

/// Size limits the server enforces on requests.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most object ids in one `has` or `get` request.
    pub max_ids: usize,
    /// Most bytes of one `put` request body.
    pub max_put_bytes: u64,
    /// Most payload bytes the server buffers before importing a batch.
    pub put_batch_bytes: usize,
    /// Most bytes of a JSON request body.
    pub max_json_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ids: 65_536,
            max_put_bytes: 1 << 40,
            put_batch_bytes: 64 << 20,
            max_json_bytes: 64 << 10,
        }
    }
}

/// How long the server waits on a client. A client that is slower than
/// these is disconnected; none of them is waited out holding the ledger.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From connection (or the end of the previous request) to the end of
    /// a request's headers.
    pub header_read: Duration,
    /// Longest pause while receiving a request body or while the client is
    /// not taking the response.
    pub idle: Duration,
    /// Longest whole request, response streaming included.
    pub request: Duration,
    /// After SIGINT/SIGTERM: how long requests in flight may finish. The
    /// server is gone by then: connections still open shortly before the
    /// deadline are cancelled, whatever the timeouts above would allow.
    pub shutdown_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header_read: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            request: Duration::from_secs(6 * 3600),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The ledger's `.bat` directory.
    pub ledger_dir: PathBuf,
    /// Accepted tokens.
    pub tokens: TokenSet,
    /// What a request without a (valid) token may do: `Scope::None` unless
    /// the operator allowed anonymous reading.
    pub anonymous: Scope,
    /// Refuse every write whatever the token.
    pub read_only: bool,
    /// Request limits.
    pub limits: Limits,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Also serve the read-only web page under `/ui` ([`ui`]).
    pub ui: bool,
}

/// The server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding, accepting or the runtime failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl bat_ledger::Diagnostic for ServeError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }
}

pub(crate) struct AppState {
    pub(crate) config: ServeConfig,
}

/// The axum router of the protocol.
pub fn router(config: ServeConfig) -> Router {
    // Binary id lists (has/get) are the largest buffered bodies; uploads
    // stream and are limited by `max_put_bytes`.
    let body_limit = config.limits.max_ids * 32 + 1024;
    let request = config.timeouts.request;
    let state = Arc::new(AppState { config });
    Router::new()
        .route("/v1/info", get(handlers::info))
        .route("/v1/refs", get(handlers::list_refs))
        .route("/v1/refs/update", post(handlers::update_ref))
        .route("/v1/has", post(handlers::has))
        .route("/v1/get", post(stream::get_objects))
        .route("/v1/put", post(stream::put_objects))
        .merge(ui::routes(state.config.ui))
        .fallback(handlers::not_found)
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        // The whole handler (body included) within the request timeout;
        // streamed responses check the same deadline as they go.
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| async move {
                match tokio::time::timeout(request, next.run(req)).await {
                    Ok(r) => r,
                    Err(_) => handlers::ApiError::new(
                        StatusCode::REQUEST_TIMEOUT,
                        "timeout",
                        format!("request not done within {}s", request.as_secs()),
                    )
                    .into_response(),
                }
            },
        ))
        .with_state(state)
}

/// Serve on an already bound listener until SIGINT or SIGTERM, then finish
/// the requests in flight and return. Builds its own tokio runtime.
pub fn serve_blocking(
    config: ServeConfig,
    listener: std::net::TcpListener,
) -> Result<(), ServeError> {
    let io = |context: &str| {
        let context = context.to_string();
        move |source| ServeError::Io { context, source }
    };
    listener
        .set_nonblocking(true)
        .map_err(io("setting the listener non-blocking"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(io("starting the tokio runtime"))?;
    let timeouts = config.timeouts;
    let res = rt.block_on(async move {
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(io("registering the listener"))?;
        let deadline =
            serve_connections(listener, router(config), timeouts, shutdown_signal()).await;
        Ok(deadline.into_std())
    });
    // Blocking work still running (an import) is abandoned: every ledger
    // write is crash-safe. It gets what is left of the grace period, so the
    // process is gone by the deadline whatever the clients do.
    let left = res.as_ref().map_or(Duration::ZERO, |deadline| {
        deadline.saturating_duration_since(std::time::Instant::now())
    });
    rt.shutdown_timeout(left.max(MIN_RUNTIME_STOP));
    res.map(|_| ())
}

/// Part of the shutdown grace kept for closing: connections still open
/// this long before the deadline are cancelled, so that aborting them and
/// stopping the runtime also happen within the grace.
const CLOSE_RESERVE: Duration = Duration::from_secs(1);

/// Least time the runtime is given to drop its tasks at exit.
const MIN_RUNTIME_STOP: Duration = Duration::from_millis(50);

/// Accept connections until `shutdown` resolves, then let requests in
/// flight finish until shortly before `shutdown_grace` has passed, cancel
/// every connection still open (a client sending half a request or reading
/// a response slowly is not waited out, whatever its own timeouts say), and
/// return the deadline the whole shutdown must meet.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    app: Router,
    t: Timeouts,
    shutdown: impl std::future::Future<Output = ()>,
) -> tokio::time::Instant {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut conns = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(serve_connection(stream, app.clone(), t, stop_rx.clone()));
                }
                // Out of descriptors or a connection reset before accept:
                // back off briefly instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    let deadline = tokio::time::Instant::now() + t.shutdown_grace;
    let reserve = CLOSE_RESERVE.min(t.shutdown_grace / 4);
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout_at(deadline - reserve, drain(&mut conns)).await;
    // Cancel the rest, and wait (within the grace) until their tasks are
    // gone: dropping a connection closes its socket and ends the blocking
    // side of its response or upload.
    conns.abort_all();
    let _ = tokio::time::timeout_at(deadline, drain(&mut conns)).await;
    deadline
}

/// Wait until every task of `conns` has ended.
async fn drain(conns: &mut tokio::task::JoinSet<()>) {
    while conns.join_next().await.is_some() {}
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: Router,
    t: Timeouts,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    let svc = hyper_util::service::TowerToHyperService::new(app);
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(t.header_read);
    let conn = b.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = stop.changed(), if !stopping => {
                // Finish the request in flight, take no new one; the
                // caller's grace period bounds how long that may take.
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        // If the handler cannot be installed, only SIGTERM stops us.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
