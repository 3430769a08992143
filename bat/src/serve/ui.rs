//! `bat serve --ui`: a read-only web page of the ledger under `/ui` —
//! branches, the rounds table, the report's plots, and a panel per
//! campaign in progress fed by the live files of `bat run`
//! ([`crate::engine::live`]).
//!
//! Authentication is the protocol's: a read (or write) token, or the
//! anonymous scope. A browser presents the token once as `/ui?token=T`; the
//! server answers with an `HttpOnly; SameSite=Strict` cookie (scoped to
//! `/ui`) and a redirect to `/ui`, so the token leaves the address bar.
//! The cookie is accepted by the `/ui` routes only: every protocol path
//! still wants `Authorization: Bearer`.
//!
//! The page is one static document with an inline script (allowed by a
//! per-response nonce in its Content-Security-Policy) that polls
//! `/ui/state` (JSON) every second and builds the tables with text nodes
//! only; no string from the ledger is ever parsed as HTML. The plots are
//! the `bat report` page, served at `/ui/report` (its own inline scripts
//! allowed by hash) in a frame that is reloaded when a branch moves.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bat_ledger::Ledger;
use serde::Serialize;

use super::auth::Scope;
use super::handlers::{with_ledger, ApiError};
use super::ui_page;
use super::AppState;
use crate::engine::live::{self, LiveState, RunStatus};
use crate::inspect::rounds::{round_rows, RoundRow};

/// The cookie that carries a browser's token (hex-encoded).
pub const COOKIE: &str = "bat_ui";

/// Most rounds per branch sent to the page (the newest).
pub const MAX_ROWS: usize = 500;

/// Most runs shown in the live panel (newest first).
pub const MAX_RUNS: usize = 6;

/// The `/ui` routes; none when `enabled` is false.
pub(crate) fn routes(enabled: bool) -> Router<Arc<AppState>> {
    if !enabled {
        return Router::new();
    }
    Router::new()
        .route("/ui", get(page))
        .route("/ui/", get(page))
        .route("/ui/state", get(state))
        .route("/ui/report", get(report))
}

/// Who the caller is, for the UI.
enum Caller {
    /// May read.
    Reader,
    /// No token, or one that does not allow reading.
    Refused(&'static str),
}

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    for value in headers.get_all(header::COOKIE) {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(';') {
            if let Some((k, v)) = pair.trim().split_once('=') {
                if k == COOKIE {
                    return hex::decode(v).ok().and_then(|b| String::from_utf8(b).ok());
                }
            }
        }
    }
    None
}

fn bearer_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(|t| t.trim().to_string())
}

fn caller(app: &AppState, headers: &HeaderMap) -> Caller {
    let scope = match bearer_token(headers).or_else(|| cookie_token(headers)) {
        Some(t) => match app.config.tokens.scope_of(&t) {
            Scope::None => return Caller::Refused("unknown token"),
            s => s,
        },
        None => app.config.anonymous,
    };
    if scope >= Scope::Read {
        Caller::Reader
    } else {
        Caller::Refused("this server needs a token")
    }
}

/// Headers every UI response carries.
fn harden(resp: &mut Response, csp: &str, frame: &'static str) {
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static(frame));
}

fn html(status: StatusCode, body: String, csp: &str, frame: &'static str) -> Response {
    let mut resp = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response();
    harden(&mut resp, csp, frame);
    resp
}

/// The 401 page: what is missing and how to present a token.
fn refused(why: &str) -> Response {
    let mut resp = html(
        StatusCode::UNAUTHORIZED,
        ui_page::refused_page(why),
        ui_page::STATIC_CSP,
        "DENY",
    );
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

/// `GET /ui`: the page, or (with `?token=`) the cookie and a redirect.
async fn page(
    State(app): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    if let Some(token) = query.get("token") {
        if app.config.tokens.scope_of(token) < Scope::Read {
            return refused("unknown token");
        }
        let cookie = format!(
            "{COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict",
            hex::encode(token.as_bytes())
        );
        let mut resp = StatusCode::SEE_OTHER.into_response();
        let h = resp.headers_mut();
        h.insert(header::LOCATION, HeaderValue::from_static("/ui"));
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            h.insert(header::SET_COOKIE, v);
        }
        harden(&mut resp, ui_page::STATIC_CSP, "DENY");
        return resp;
    }
    match caller(&app, &headers) {
        Caller::Refused(why) => refused(why),
        Caller::Reader => {
            let nonce = ui_page::nonce();
            html(
                StatusCode::OK,
                ui_page::live_page(&nonce),
                &ui_page::page_csp(&nonce),
                "DENY",
            )
        }
    }
}

/// One branch and its rounds, as the page gets them.
#[derive(Debug, Serialize)]
pub struct BranchState {
    /// The branch name.
    pub name: String,
    /// Its tip commit.
    pub tip: String,
    /// How many round commits it has.
    pub round_count: usize,
    /// Its rounds, oldest first (the newest [`MAX_ROWS`]).
    pub rounds: Vec<RoundRow>,
}

/// One run of the live panel.
#[derive(Debug, Serialize)]
pub struct RunState {
    /// The live file's content.
    #[serde(flatten)]
    pub live: LiveState,
    /// The status to show (`stopped` for a killed run).
    pub shown_status: RunStatus,
}

/// `GET /ui/state` body.
#[derive(Debug, Serialize)]
pub struct UiState {
    /// The server's clock (Unix ms), for elapsed times.
    pub now_unix_ms: u64,
    /// Changes whenever a branch moves: the page reloads its plots then.
    pub report_key: String,
    /// Local branches, by name.
    pub branches: Vec<BranchState>,
    /// Runs with a live file, newest first.
    pub runs: Vec<RunState>,
}

fn collect_state(ledger: &Ledger) -> Result<UiState, ApiError> {
    let refs = ledger
        .list_refs("refs/heads/")
        .map_err(super::handlers::ledger_error)?;
    let mut key = blake3::Hasher::new();
    let mut branches = Vec::with_capacity(refs.len());
    for (name, tip) in refs {
        key.update(name.as_bytes());
        key.update(tip.to_string().as_bytes());
        let mut rounds = round_rows(ledger, &name, tip)
            .map_err(|e| ApiError::internal(format!("listing the rounds of {name}: {e}")))?;
        let round_count = rounds.len();
        if rounds.len() > MAX_ROWS {
            rounds.drain(..rounds.len() - MAX_ROWS);
        }
        branches.push(BranchState {
            name,
            tip: tip.to_string(),
            round_count,
            rounds,
        });
    }
    let runs = live::read_all(ledger.dir())
        .into_iter()
        .take(MAX_RUNS)
        .map(|l| RunState {
            shown_status: l.effective_status(),
            live: l,
        })
        .collect();
    Ok(UiState {
        now_unix_ms: live::now_unix_ms(),
        report_key: key.finalize().to_hex()[..16].to_string(),
        branches,
        runs,
    })
}

/// `GET /ui/state`: branches, rounds and live runs as JSON.
async fn state(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Caller::Refused(why) = caller(&app, &headers) {
        return ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", why).into_response();
    }
    let mut resp = match with_ledger(&app, |l| collect_state(l)).await {
        Ok(s) => axum::Json(s).into_response(),
        Err(e) => e.into_response(),
    };
    harden(&mut resp, ui_page::STATIC_CSP, "DENY");
    resp
}

/// The report page of every branch that has rounds, or a short page
/// saying there are none yet.
fn report_html(ledger: &Ledger) -> Result<String, ApiError> {
    use crate::report::html::{collect, render, ReportOptions};
    let all = crate::report::sources(ledger, &[])
        .map_err(|e| ApiError::internal(format!("listing branches: {e}")))?;
    let mut sources = Vec::with_capacity(all.len());
    for s in all {
        let rows = round_rows(ledger, &s.name, s.tip)
            .map_err(|e| ApiError::internal(format!("listing the rounds of {}: {e}", s.name)))?;
        if !rows.is_empty() {
            sources.push(s);
        }
    }
    if sources.is_empty() {
        return Ok(ui_page::no_rounds_page());
    }
    let opts = ReportOptions {
        drift: false,
        ledger_location: ledger.dir().display().to_string(),
        generated: format!("{} ms after the Unix epoch", live::now_unix_ms()),
        bootstrap: Default::default(),
        metrics: Vec::new(),
        allow: Vec::new(),
    };
    let data = collect(ledger, &sources, &opts)
        .map_err(|e| ApiError::internal(format!("building the report: {e}")))?;
    Ok(render(&data))
}

/// `GET /ui/report`: the `bat report` page (plots, tables, facts).
async fn report(State(app): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if let Caller::Refused(why) = caller(&app, &headers) {
        return refused(why);
    }
    match with_ledger(&app, |l| report_html(l)).await {
        Ok(body) => {
            let csp = ui_page::report_csp(&body);
            html(StatusCode::OK, body, &csp, "SAMEORIGIN")
        }
        Err(e) => html(
            e.status,
            ui_page::message_page("The report could not be built", &e.message),
            ui_page::STATIC_CSP,
            "SAMEORIGIN",
        ),
    }
}
