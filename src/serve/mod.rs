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

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

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

pub(crate) struct AppState {
    pub(crate) config: ServeConfig,
}

/// The axum router of the protocol.
pub fn router(config: ServeConfig) -> Router {
    // Binary id lists (has/get) are the largest buffered bodies; uploads
    // stream and are limited by `max_put_bytes`.
    let body_limit = config.limits.max_ids * 32 + 1024;
    let state = Arc::new(AppState { config });
    Router::new()
        .route("/v1/info", get(handlers::info))
        .route("/v1/refs", get(handlers::list_refs))
        .route("/v1/refs/update", post(handlers::update_ref))
        .route("/v1/has", post(handlers::has))
        .route("/v1/get", post(stream::get_objects))
        .route("/v1/put", post(stream::put_objects))
        .fallback(handlers::not_found)
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
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
    rt.block_on(async move {
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(io("registering the listener"))?;
        let app = router(config).into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(io("serving"))
    })
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
