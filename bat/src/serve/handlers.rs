//! The request handlers. Each checks the caller's scope before touching the
//! ledger and runs ledger work on the blocking pool.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bat_ledger::{CommitId, Head, Ledger, ObjectId};
use serde::{Deserialize, Serialize};

use super::auth::Scope;
use super::check::{check_update, RefCheckError};
use super::AppState;

/// The protocol version this server speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// An error response: HTTP status plus a JSON body
/// `{"error": CODE, "message": TEXT}`.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Machine-readable code (see PROTOCOL.d/http.md).
    pub error: String,
    /// Human-readable explanation.
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: self.code.to_string(),
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

pub(crate) fn ledger_error(e: bat_ledger::Error) -> ApiError {
    match e {
        bat_ledger::Error::Busy { .. } => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy", e.to_string())
        }
        bat_ledger::Error::ObjectMissing { .. } => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
        }
        bat_ledger::Error::BranchMoved { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "ref_moved",
            format!("{e}: pull first"),
        ),
        bat_ledger::Error::InvalidRefName { .. } => ApiError::bad_request(e.to_string()),
        // The import policy (a put's trees, a ref update's commit).
        bat_ledger::Error::TreeRefused { .. } => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "tree_refused",
            e.to_string(),
        ),
        other => ApiError::internal(other.to_string()),
    }
}

/// The caller's scope from `Authorization: Bearer TOKEN`, or the anonymous
/// scope when no token was sent. A token that is sent but unknown is
/// refused outright rather than downgraded, so typos are noticed.
fn scope_of(state: &AppState, headers: &HeaderMap) -> Result<Scope, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(state.config.anonymous);
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the Authorization header must be `Bearer TOKEN`",
            )
        })?;
    match state.config.tokens.scope_of(token) {
        Scope::None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unknown token",
        )),
        s => Ok(s),
    }
}

/// Check that the caller may do something needing `need`.
pub(crate) fn authorize(
    state: &AppState,
    headers: &HeaderMap,
    need: Scope,
) -> Result<Scope, ApiError> {
    let have = scope_of(state, headers)?;
    if need == Scope::Write && state.config.read_only {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "this server was started with --read-only",
        ));
    }
    if have >= need {
        return Ok(have);
    }
    if have == Scope::None {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs a token (pass --token or set BAT_TOKEN)",
        ));
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "a {} token cannot {}",
            have.name(),
            if need == Scope::Write {
                "write"
            } else {
                "read"
            }
        ),
    ))
}

/// Run ledger work on the blocking pool with a fresh handle.
pub(crate) async fn with_ledger<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&mut Ledger) -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let dir = state.config.ledger_dir.clone();
    tokio::task::spawn_blocking(move || {
        let mut l = Ledger::open(&dir).map_err(ledger_error)?;
        f(&mut l)
    })
    .await
    .map_err(|e| ApiError::internal(format!("worker failed: {e}")))?
}

/// `GET /v1/info` body.
#[derive(Debug, Serialize, Deserialize)]
pub struct InfoBody {
    /// Protocol version (1).
    pub protocol: u32,
    /// The scope the caller has.
    pub scope: String,
    /// The server refuses writes.
    pub read_only: bool,
    /// Most ids per `has`/`get` request.
    pub max_ids: usize,
    /// Most bytes per `put` request.
    pub max_put_bytes: u64,
}

pub(crate) async fn info(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<InfoBody>, ApiError> {
    let scope = authorize(&state, &headers, Scope::Read)?;
    Ok(Json(InfoBody {
        protocol: PROTOCOL_VERSION,
        scope: scope.name().to_string(),
        read_only: state.config.read_only,
        max_ids: state.config.limits.max_ids,
        max_put_bytes: state.config.limits.max_put_bytes,
    }))
}

/// One ref in `GET /v1/refs`.
#[derive(Debug, Serialize, Deserialize)]
pub struct RefEntry {
    /// Full name, `refs/heads/main`.
    pub name: String,
    /// Commit id, 64 hex digits.
    pub commit: String,
}

/// `GET /v1/refs` body.
#[derive(Debug, Serialize, Deserialize)]
pub struct RefsBody {
    /// Every ref under `refs/`, sorted by name.
    pub refs: Vec<RefEntry>,
    /// The branch HEAD is attached to (full name), if any.
    pub head: Option<String>,
}

pub(crate) async fn list_refs(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Json<RefsBody>, ApiError> {
    authorize(&state, &headers, Scope::Read)?;
    let body = with_ledger(&state, |l| {
        let refs = l
            .list_refs("refs/")
            .map_err(ledger_error)?
            .into_iter()
            .map(|(n, c)| RefEntry {
                name: format!("refs/{n}"),
                commit: c.to_string(),
            })
            .collect();
        let head = match l.head().map_err(ledger_error)? {
            Head::Branch { name, .. } => Some(name),
            Head::Detached { .. } => None,
        };
        Ok(RefsBody { refs, head })
    })
    .await?;
    Ok(Json(body))
}

/// Split a body of concatenated 32-byte ids.
pub(crate) fn parse_ids(body: &[u8], max: usize) -> Result<Vec<ObjectId>, ApiError> {
    if body.len() % 32 != 0 {
        return Err(ApiError::bad_request(format!(
            "the body must be whole 32-byte ids, got {} bytes",
            body.len()
        )));
    }
    let n = body.len() / 32;
    if n > max {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "limit_exceeded",
            format!("{n} ids in one request, the limit is {max}"),
        ));
    }
    Ok(body
        .chunks_exact(32)
        .map(|c| ObjectId::from_slice(c).expect("chunks_exact yields 32-byte slices"))
        .collect())
}

pub(crate) async fn has(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&state, &headers, Scope::Read)?;
    let ids = parse_ids(&body, state.config.limits.max_ids)?;
    let bitmap = with_ledger(&state, move |l| {
        let mut bits = vec![0u8; ids.len().div_ceil(8)];
        for (i, id) in ids.iter().enumerate() {
            if l.contains(id).map_err(ledger_error)? {
                bits[i / 8] |= 1 << (i % 8);
            }
        }
        Ok(bits)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bitmap).into_response())
}

/// `POST /v1/refs/update` request.
#[derive(Debug, Serialize, Deserialize)]
pub struct UpdateRefBody {
    /// Full ref name, `refs/heads/main` or `refs/tags/v1`.
    pub name: String,
    /// The value the client saw (null: the ref must not exist).
    pub expected: Option<String>,
    /// The new commit.
    pub new: String,
    /// Allow a move that is not a fast-forward.
    #[serde(default)]
    pub force: bool,
}

fn parse_commit(s: &str, what: &str) -> Result<CommitId, ApiError> {
    ObjectId::from_hex(s)
        .map(CommitId)
        .ok_or_else(|| ApiError::bad_request(format!("{what} must be 64 hex digits")))
}

pub(crate) async fn update_ref(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&state, &headers, Scope::Write)?;
    if body.len() > state.config.limits.max_json_bytes {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "limit_exceeded",
            "ref update body too large",
        ));
    }
    let req: UpdateRefBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("ref update body: {e}")))?;
    if !req.name.starts_with("refs/") {
        return Err(ApiError::bad_request(
            "only refs/<namespace>/<name> can be updated",
        ));
    }
    let expected = req
        .expected
        .as_deref()
        .map(|s| parse_commit(s, "expected"))
        .transpose()?;
    let new = parse_commit(&req.new, "new")?;
    with_ledger(&state, move |l| {
        let name = req.name;
        let current = l
            .list_refs(&name)
            .map_err(ledger_error)?
            .into_iter()
            .find(|(rest, _)| rest.is_empty())
            .map(|(_, c)| c);
        if current != expected {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "ref_moved",
                format!(
                    "{name} moved on the server (expected {}, found {}): pull first",
                    show(expected),
                    show(current)
                ),
            ));
        }
        let fast_forward = check_update(l, new, current).map_err(|e| match e {
            RefCheckError::Ledger(le) => ledger_error(le),
            missing @ RefCheckError::Missing { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "missing_object",
                missing.to_string(),
            ),
            invalid @ RefCheckError::Invalid { .. } => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_object",
                invalid.to_string(),
            ),
        })?;
        // One round id, one round commit per branch (as `bat commit` and
        // fetch/clone hold it): a history recording one twice is refused.
        if let Some(d) = crate::round::unique::duplicate_round(l, new).map_err(ledger_error)? {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "duplicate_round_id",
                format!(
                    "{name}: the history of {new} records round {} in {} commits; \
                     a branch records each round id once",
                    d.round_id,
                    d.commits.len()
                ),
            ));
        }
        if !fast_forward && !req.force {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "non_fast_forward",
                format!(
                    "{name}: {} is not an ancestor of {new}; pull first or push with --force",
                    show(current)
                ),
            ));
        }
        l.update_ref(
            &name,
            current,
            Some(new),
            if req.force {
                "push (forced) via bat serve"
            } else {
                "push via bat serve"
            },
        )
        .map_err(ledger_error)?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn show(c: Option<CommitId>) -> String {
    c.map_or_else(|| "(none)".to_string(), |c| c.to_string())
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_such_endpoint",
        "no such endpoint (this server speaks /v1)",
    )
}
