//! `bat mirror mlflow`: a ledger's rounds as MLflow runs, through the
//! tracking server's REST API (`/api/2.0/mlflow/...`).
//!
//! One experiment per ledger, one run per branch (found again by its
//! `bat.branch` tag), one metric point per round scalar at step = the
//! round number and timestamp = the round commit's time (the same scalars
//! as the TensorBoard export: [`super::tensorboard::round_points`]), step
//! metrics at their global step. The round's facts become params (set
//! once, when the run is created) and tags (`bat.round.NNN.*`, one set per
//! round).
//!
//! The mirror's state lives in MLflow itself, so two machines mirroring
//! the same ledger agree: the run's `bat.last_commit` tag names the newest
//! round already logged, and a mirror logs only the rounds after it. The
//! tag is written in the same `log-batch` call as that round's metrics.
//! When `bat.last_commit` is not in the branch's history any more (the
//! branch was reset to an older commit, or replaced), the mirror stops
//! with [`MlflowError::Diverged`] instead of mixing two histories in one
//! run; with [`MirrorOptions::restart_diverged`] the old run is retired
//! (its `bat.branch` tag moved to `bat.superseded_branch`) and a new run
//! receives the branch's current history.

use std::time::Duration;

use bat_ledger::Ledger;
use serde_json::{json, Value};

use super::export::{export_rows, ExportRow};
use super::html::{facts, ReportError};
use super::tensorboard::{round_points, RoundPoints};
use super::Source;
use crate::inspect::rounds::RoundsError;
use crate::inspect::RoundTree;
use crate::remote::http::redact_url;

/// MLflow's limits for one `runs/log-batch` call.
pub const MAX_BATCH_METRICS: usize = 1000;
/// Tags per `runs/log-batch` call.
pub const MAX_BATCH_TAGS: usize = 100;
/// Params per `runs/log-batch` call.
pub const MAX_BATCH_PARAMS: usize = 100;

/// The tag a branch's run is found by.
pub const BRANCH_TAG: &str = "bat.branch";
/// The tag naming the newest round commit a run holds.
pub const LAST_COMMIT_TAG: &str = "bat.last_commit";
/// The tag naming that round's number.
pub const LAST_ROUND_TAG: &str = "bat.last_round";
/// The tag a retired run's branch moves to.
pub const SUPERSEDED_TAG: &str = "bat.superseded_branch";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// How much of an error answer's body a message quotes.
const BODY_QUOTE: usize = 2000;

/// Why a mirror did not finish.
#[derive(Debug, thiserror::Error)]
pub enum MlflowError {
    /// Reading the rounds failed.
    #[error(transparent)]
    Rounds(#[from] RoundsError),
    /// Reading an arm's facts failed (boxed: large and rare).
    #[error(transparent)]
    Report(Box<ReportError>),
    /// The tracking URI is not an http(s) URL.
    #[error("the MLflow tracking URI {uri} is not an http:// or https:// URL")]
    NotHttp {
        /// The URI as given.
        uri: String,
    },
    /// The tracking URI carries a user or password.
    #[error("the MLflow tracking URI {uri} carries credentials")]
    CredentialsInUri {
        /// The URI, its credentials replaced by `***`.
        uri: String,
    },
    /// The client could not be set up.
    #[error("cannot start the HTTP client for {uri}: {reason}")]
    Client {
        /// The tracking URI.
        uri: String,
        /// Why.
        reason: String,
    },
    /// The server could not be reached or the answer not read.
    #[error("cannot reach the MLflow server at {uri} ({endpoint}): {reason}")]
    Unreachable {
        /// The tracking URI.
        uri: String,
        /// The REST endpoint.
        endpoint: String,
        /// The transport error and its causes.
        reason: String,
    },
    /// The server refused a request (its answer quoted).
    #[error("the MLflow server at {uri} answered {status} to {endpoint}: {body}")]
    Refused {
        /// The tracking URI.
        uri: String,
        /// The REST endpoint.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// The answer's body (cut at 2000 bytes).
        body: String,
    },
    /// A success answer without the expected members.
    #[error("the MLflow server at {uri} sent an unexpected answer to {endpoint}: {reason}")]
    BadAnswer {
        /// The tracking URI.
        uri: String,
        /// The REST endpoint.
        endpoint: String,
        /// What was missing.
        reason: String,
    },
    /// The experiment exists but is deleted.
    #[error("the MLflow experiment {name} (id {id}) is deleted")]
    ExperimentDeleted {
        /// Its name.
        name: String,
        /// Its id.
        id: String,
    },
    /// The run's last mirrored round is not in the branch any more.
    #[error(
        "the MLflow run {run_id} of branch {branch} holds rounds up to commit {commit}, which is no longer in the branch's history (the branch was reset or replaced)"
    )]
    Diverged {
        /// The branch.
        branch: String,
        /// The run.
        run_id: String,
        /// Its `bat.last_commit`.
        commit: String,
    },
    /// The caller cancelled the mirror.
    #[error("the MLflow mirror was cancelled; the rounds logged so far are recorded in their runs and the next mirror continues after them")]
    Cancelled,
}

impl From<ReportError> for MlflowError {
    fn from(e: ReportError) -> Self {
        MlflowError::Report(Box::new(e))
    }
}

impl bat_ledger::Diagnostic for MlflowError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        use bat_ledger::ErrorKind;
        match self {
            MlflowError::Rounds(e) => e.kind(),
            MlflowError::Report(e) => e.kind(),
            MlflowError::NotHttp { .. } | MlflowError::CredentialsInUri { .. } => ErrorKind::Usage,
            MlflowError::Cancelled => ErrorKind::Interrupted,
            _ => ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            MlflowError::Rounds(e) => e.hint(),
            MlflowError::Report(e) => e.hint(),
            MlflowError::NotHttp { .. } => Some(
                "give the tracking server's address, e.g. --tracking-uri http://127.0.0.1:5000 (file and database URIs are not served over REST)".to_string(),
            ),
            MlflowError::CredentialsInUri { .. } => Some(
                "drop them from the URI and set MLFLOW_TRACKING_TOKEN (sent as a bearer token)"
                    .to_string(),
            ),
            MlflowError::Unreachable { .. } => Some(
                "check that `mlflow server` is running and listening at that address".to_string(),
            ),
            MlflowError::Refused { status: 401 | 403, .. } => Some(
                "the server wants credentials: set MLFLOW_TRACKING_TOKEN to a token it accepts"
                    .to_string(),
            ),
            MlflowError::ExperimentDeleted { .. } => Some(
                "restore it (`mlflow experiments restore`) or pick another name with --experiment"
                    .to_string(),
            ),
            MlflowError::Diverged { .. } => Some(
                "rerun with --restart-diverged to retire that run (its bat.branch tag becomes bat.superseded_branch) and mirror the branch's current history into a new run".to_string(),
            ),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            MlflowError::Rounds(e) => e.code(),
            MlflowError::Report(e) => e.code(),
            _ => None,
        }
    }
}

/// What to mirror where.
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// The tracking server (`http://HOST:PORT`, optionally with a path).
    pub tracking_uri: String,
    /// The experiment's name.
    pub experiment: String,
    /// A bearer token for the server.
    pub token: Option<String>,
    /// Read the server's state and report what would be logged, log nothing.
    pub dry_run: bool,
    /// Retire a run whose history the branch no longer has and start anew.
    pub restart_diverged: bool,
}

/// What a mirror did (or, dry, would do) for one branch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunMirror {
    /// The branch.
    pub branch: String,
    /// Its MLflow run (`None` on a dry run that would create it).
    pub run_id: Option<String>,
    /// Whether the run was (would be) created.
    pub created: bool,
    /// The run retired because the branch diverged from it.
    pub superseded_run: Option<String>,
    /// Rounds in the branch.
    pub rounds: usize,
    /// Round numbers logged now, oldest first.
    pub rounds_added: Vec<i64>,
    /// Metric points logged now.
    pub metrics_added: usize,
    /// The newest round commit the run holds afterwards.
    pub last_commit: Option<String>,
}

/// What a mirror did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MirrorReport {
    /// The tracking server.
    pub tracking_uri: String,
    /// The experiment's name.
    pub experiment: String,
    /// Its id (`None` on a dry run that would create it).
    pub experiment_id: Option<String>,
    /// Whether the experiment was (would be) created.
    pub experiment_created: bool,
    /// Nothing was written.
    pub dry_run: bool,
    /// One entry per branch, in the order given.
    pub runs: Vec<RunMirror>,
}

/// The default experiment name: `bat-` and the name of the folder that
/// holds the ledger's `.bat` directory.
pub fn default_experiment(ledger: &Ledger) -> String {
    let name = ledger
        .dir()
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ledger".to_string());
    format!("bat-{name}")
}

// ---------------------------------------------------------------- client

/// A small blocking client of the tracking server's REST API.
struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

/// An error and its sources on one line (reqwest hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

impl Client {
    fn new(uri: &str, token: Option<String>) -> Result<Client, MlflowError> {
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            return Err(MlflowError::NotHttp {
                uri: redact_url(uri),
            });
        }
        if redact_url(uri) != uri {
            return Err(MlflowError::CredentialsInUri {
                uri: redact_url(uri),
            });
        }
        let client_err = |reason: String| MlflowError::Client {
            uri: uri.to_string(),
            reason,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| client_err(e.to_string()))?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("bat/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|e| client_err(error_chain(&e)))?;
        Ok(Client {
            base: uri.trim_end_matches('/').to_string(),
            token,
            http,
            rt,
        })
    }

    /// Call `endpoint` (below `/api/2.0/mlflow/`): GET with `query`, or
    /// POST with `body`; a refusal is [`MlflowError::Refused`] with the
    /// status, so callers can accept the ones they expect.
    fn call(
        &self,
        endpoint: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, MlflowError> {
        let url = format!("{}/api/2.0/mlflow/{endpoint}", self.base);
        let rb = match body {
            Some(b) => self.http.post(&url).json(b),
            None => {
                let url = reqwest::Url::parse_with_params(&url, query).map_err(|e| {
                    MlflowError::NotHttp {
                        uri: format!("{} ({e})", self.base),
                    }
                })?;
                self.http.get(url)
            }
        };
        let rb = match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        };
        let unreachable = |e: reqwest::Error| MlflowError::Unreachable {
            uri: self.base.clone(),
            endpoint: endpoint.to_string(),
            reason: error_chain(&e),
        };
        let (status, bytes) = self.rt.block_on(async {
            let resp = rb.send().await.map_err(unreachable)?;
            let status = resp.status();
            let bytes = resp.bytes().await.map_err(unreachable)?;
            Ok::<_, MlflowError>((status, bytes))
        })?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let mut cut = text.len().min(BODY_QUOTE);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            return Err(MlflowError::Refused {
                uri: self.base.clone(),
                endpoint: endpoint.to_string(),
                status: status.as_u16(),
                body: text[..cut].trim().to_string(),
            });
        }
        if bytes.is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_slice(&bytes).map_err(|e| self.bad(endpoint, e.to_string()))
    }

    fn post(&self, endpoint: &str, body: &Value) -> Result<Value, MlflowError> {
        self.call(endpoint, &[], Some(body))
    }

    fn bad(&self, endpoint: &str, reason: impl Into<String>) -> MlflowError {
        MlflowError::BadAnswer {
            uri: self.base.clone(),
            endpoint: endpoint.to_string(),
            reason: reason.into(),
        }
    }

    /// The experiment's id and whether it is deleted; `None` when there is
    /// no experiment of that name.
    fn experiment(&self, name: &str) -> Result<Option<(String, bool)>, MlflowError> {
        const EP: &str = "experiments/get-by-name";
        match self.call(EP, &[("experiment_name", name)], None) {
            Ok(v) => {
                let e = &v["experiment"];
                let id = e["experiment_id"]
                    .as_str()
                    .ok_or_else(|| self.bad(EP, "no experiment.experiment_id"))?;
                Ok(Some((
                    id.to_string(),
                    e["lifecycle_stage"].as_str() == Some("deleted"),
                )))
            }
            // MLflow answers RESOURCE_DOES_NOT_EXIST with 404.
            Err(MlflowError::Refused { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create_experiment(&self, name: &str) -> Result<String, MlflowError> {
        const EP: &str = "experiments/create";
        let v = self.post(
            EP,
            &json!({"name": name, "tags": [{"key": "bat.source", "value": "bat mirror mlflow"}]}),
        )?;
        v["experiment_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.bad(EP, "no experiment_id"))
    }

    /// The active runs of `experiment` tagged with `branch`, oldest first.
    fn branch_runs(&self, experiment: &str, branch: &str) -> Result<Vec<FoundRun>, MlflowError> {
        const EP: &str = "runs/search";
        let filter = format!("tags.`{BRANCH_TAG}` = {}", quote_filter(branch));
        let v = self.post(
            EP,
            &json!({
                "experiment_ids": [experiment],
                "filter": filter,
                "run_view_type": "ACTIVE_ONLY",
                "max_results": 100,
                "order_by": ["attributes.start_time ASC"],
            }),
        )?;
        let Some(runs) = v.get("runs") else {
            return Ok(Vec::new());
        };
        let runs = runs
            .as_array()
            .ok_or_else(|| self.bad(EP, "runs is not a list"))?;
        runs.iter()
            .map(|r| {
                let id = r["info"]["run_id"]
                    .as_str()
                    .ok_or_else(|| self.bad(EP, "a run without info.run_id"))?;
                let tag = |key: &str| {
                    r["data"]["tags"].as_array().and_then(|tags| {
                        tags.iter()
                            .find(|t| t["key"].as_str() == Some(key))
                            .and_then(|t| t["value"].as_str())
                            .map(str::to_string)
                    })
                };
                Ok(FoundRun {
                    id: id.to_string(),
                    last_commit: tag(LAST_COMMIT_TAG),
                })
            })
            .collect()
    }

    fn create_run(
        &self,
        experiment: &str,
        branch: &str,
        start_ms: i64,
        tags: &[(String, String)],
    ) -> Result<String, MlflowError> {
        const EP: &str = "runs/create";
        let v = self.post(
            EP,
            &json!({
                "experiment_id": experiment,
                "run_name": branch,
                "start_time": start_ms,
                "tags": key_values(tags),
            }),
        )?;
        v["run"]["info"]["run_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.bad(EP, "no run.info.run_id"))
    }

    fn log_batch(&self, run: &str, batch: &Batch) -> Result<(), MlflowError> {
        let metrics: Vec<Value> = batch
            .metrics
            .iter()
            .map(|m| json!({"key": m.key, "value": m.value, "timestamp": m.timestamp, "step": m.step}))
            .collect();
        self.post(
            "runs/log-batch",
            &json!({
                "run_id": run,
                "metrics": metrics,
                "params": key_values(&batch.params),
                "tags": key_values(&batch.tags),
            }),
        )?;
        Ok(())
    }

    fn finish_run(&self, run: &str, end_ms: i64) -> Result<(), MlflowError> {
        self.post(
            "runs/update",
            &json!({"run_id": run, "status": "FINISHED", "end_time": end_ms}),
        )?;
        Ok(())
    }

    /// Retire a run: its branch tag moves to [`SUPERSEDED_TAG`].
    fn retire(&self, run: &str, branch: &str) -> Result<(), MlflowError> {
        self.post(
            "runs/set-tag",
            &json!({"run_id": run, "key": SUPERSEDED_TAG, "value": branch}),
        )?;
        self.post(
            "runs/delete-tag",
            &json!({"run_id": run, "key": BRANCH_TAG}),
        )?;
        Ok(())
    }
}

/// A run found by its branch tag.
struct FoundRun {
    id: String,
    last_commit: Option<String>,
}

/// A string literal of MLflow's search filter grammar.
fn quote_filter(s: &str) -> String {
    if s.contains('\'') {
        format!("\"{}\"", s.replace('"', "\\\""))
    } else {
        format!("'{s}'")
    }
}

fn key_values(pairs: &[(String, String)]) -> Vec<Value> {
    pairs
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect()
}

// ---------------------------------------------------------------- batches

/// One metric point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The metric name.
    pub key: String,
    /// Its value.
    pub value: f64,
    /// Milliseconds since the Unix epoch (the round commit's time).
    pub timestamp: i64,
    /// The step.
    pub step: i64,
}

/// One `log-batch` call's content.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Metric points.
    pub metrics: Vec<Point>,
    /// Params.
    pub params: Vec<(String, String)>,
    /// Tags.
    pub tags: Vec<(String, String)>,
}

/// What one round logs: its metric points and its tags.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundLog {
    /// The round's metric points (round scalars, then step metrics).
    pub points: Vec<Point>,
    /// `bat.round.NNN.*` tags and the run's state tags after this round.
    pub tags: Vec<(String, String)>,
}

/// A metric name MLflow accepts: letters, digits, `_ - . / :` and spaces
/// are kept, anything else (from a health file's keys) becomes `_`.
pub fn metric_key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':' | ' ') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The points and tags of one round.
pub fn round_log(row: &ExportRow, p: &RoundPoints) -> RoundLog {
    let ms = p.time.saturating_mul(1000);
    let mut points: Vec<Point> = p
        .values
        .iter()
        .map(|(k, v)| Point {
            key: metric_key(k),
            value: *v,
            timestamp: ms,
            step: p.step,
        })
        .collect();
    for (g, values) in &p.steps {
        points.extend(values.iter().map(|(k, v)| Point {
            key: metric_key(k),
            value: *v,
            timestamp: ms,
            step: *g,
        }));
    }
    let r = &row.row;
    let prefix = format!("bat.round.{:03}", p.step);
    let mut tags = vec![
        (format!("{prefix}.commit"), r.commit.to_string()),
        (format!("{prefix}.round_id"), r.round_id.clone()),
    ];
    if let Some(g) = r.gate_status {
        tags.push((format!("{prefix}.gate"), g.as_str().to_string()));
    }
    if let Some(v) = &r.bat_version {
        tags.push((format!("{prefix}.bat_version"), v.clone()));
    }
    tags.push((LAST_COMMIT_TAG.to_string(), r.commit.to_string()));
    tags.push((LAST_ROUND_TAG.to_string(), p.step.to_string()));
    RoundLog { points, tags }
}

/// Pack rounds into `log-batch` calls within MLflow's limits. A round's
/// tags (which carry the run's new `bat.last_commit`) go in the call with
/// its last metric points, so a call that fails leaves the state tag at
/// the last round fully logged. `params` go in the first call.
pub fn batches(rounds: &[RoundLog], params: &[(String, String)]) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut cur = Batch {
        params: params.iter().take(MAX_BATCH_PARAMS).cloned().collect(),
        ..Batch::default()
    };
    let room = |b: &Batch| {
        MAX_BATCH_METRICS.saturating_sub(b.metrics.len() + b.params.len() + b.tags.len())
    };
    for r in rounds {
        let fits = |b: &Batch| {
            r.points.len() + r.tags.len() <= room(b)
                && b.tags.len() + r.tags.len() <= MAX_BATCH_TAGS
                && b.metrics.len() + r.points.len() <= MAX_BATCH_METRICS
        };
        if !fits(&cur) && cur != Batch::default() {
            out.push(std::mem::take(&mut cur));
        }
        // A round too large for one call: its points in full calls first.
        let mut points = r.points.as_slice();
        while points.len() + r.tags.len() > room(&cur) {
            let n = room(&cur).min(MAX_BATCH_METRICS - cur.metrics.len());
            let (head, rest) = points.split_at(n.min(points.len()));
            cur.metrics.extend_from_slice(head);
            points = rest;
            out.push(std::mem::take(&mut cur));
        }
        cur.metrics.extend_from_slice(points);
        // Same-key state tags: the newest round's values win.
        cur.tags
            .retain(|(k, _)| !r.tags.iter().any(|(t, _)| t == k));
        cur.tags.extend_from_slice(&r.tags);
    }
    if cur != Batch::default() {
        out.push(cur);
    }
    out
}

// ---------------------------------------------------------------- mirror

/// The run-level params of a branch: its campaign's facts (from its first
/// round).
fn run_params(
    ledger: &Ledger,
    rows: &[&ExportRow],
    arm: &str,
) -> Result<Vec<(String, String)>, MlflowError> {
    let plain: Vec<_> = rows.iter().map(|r| r.row.clone()).collect();
    let Some(first) = plain.first() else {
        return Ok(Vec::new());
    };
    let f = facts(ledger, &plain)?;
    let tree = RoundTree::open(ledger, first.commit)
        .map_err(|e| MlflowError::from(ReportError::Inspect(Box::new(e))))?;
    let lm = tree.round.as_ref().and_then(|m| m.loop_meta.as_ref());
    let mut p = vec![
        ("bat.arm".to_string(), arm.to_string()),
        ("bat.first_commit".to_string(), first.commit.to_string()),
        ("bat.pack".to_string(), f.pack),
    ];
    let mut opt = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            p.push((k.to_string(), v));
        }
    };
    opt("bat.protocol_id", f.protocol_id);
    opt("bat.reward_version", f.reward_version);
    opt("bat.run_id", f.run_id);
    opt("bat.source_sha256", f.source_digest);
    opt("bat.reward_mode", first.reward_mode.clone());
    opt("bat.pack_blake3", lm.and_then(|l| l.pack_blake3.clone()));
    opt("bat.seed", lm.map(|l| l.campaign.seed().to_string()));
    Ok(p)
}

/// Mirror every source's rounds into the experiment `opts.experiment` of
/// the tracking server; see the module documentation.
pub fn mirror_mlflow(
    ledger: &Ledger,
    sources: &[Source],
    opts: &MirrorOptions,
    ctx: &crate::Ctx<'_>,
) -> Result<MirrorReport, MlflowError> {
    let client = Client::new(&opts.tracking_uri, opts.token.clone())?;
    let (_, rows) = export_rows(ledger, sources)?;
    let (experiment_id, experiment_created) = match client.experiment(&opts.experiment)? {
        Some((id, true)) => {
            return Err(MlflowError::ExperimentDeleted {
                name: opts.experiment.clone(),
                id,
            })
        }
        Some((id, false)) => (Some(id), false),
        None if opts.dry_run => (None, true),
        None => (Some(client.create_experiment(&opts.experiment)?), true),
    };
    let mut report = MirrorReport {
        tracking_uri: client.base.clone(),
        experiment: opts.experiment.clone(),
        experiment_id: experiment_id.clone(),
        experiment_created,
        dry_run: opts.dry_run,
        runs: Vec::new(),
    };
    for s in sources {
        if ctx.cancelled() {
            return Err(MlflowError::Cancelled);
        }
        let mine: Vec<&ExportRow> = rows.iter().filter(|r| r.row.branch == s.name).collect();
        report.runs.push(mirror_branch(
            &client,
            ledger,
            s,
            &mine,
            experiment_id.as_deref(),
            opts,
            ctx,
        )?);
    }
    Ok(report)
}

/// Mirror one branch (`experiment` is `None` only on a dry run).
fn mirror_branch(
    client: &Client,
    ledger: &Ledger,
    s: &Source,
    rows: &[&ExportRow],
    experiment: Option<&str>,
    opts: &MirrorOptions,
    ctx: &crate::Ctx<'_>,
) -> Result<RunMirror, MlflowError> {
    let found = match experiment {
        Some(e) => client.branch_runs(e, &s.name)?.into_iter().next(),
        None => None,
    };
    let mut out = RunMirror {
        branch: s.name.clone(),
        run_id: found.as_ref().map(|r| r.id.clone()),
        created: found.is_none(),
        superseded_run: None,
        rounds: rows.len(),
        rounds_added: Vec::new(),
        metrics_added: 0,
        last_commit: found.as_ref().and_then(|r| r.last_commit.clone()),
    };
    // Where to start: after the run's last commit.
    let start = match found.as_ref().and_then(|r| r.last_commit.as_deref()) {
        None => 0,
        Some(last) => match rows.iter().position(|r| r.row.commit.to_string() == last) {
            Some(i) => i + 1,
            None if opts.restart_diverged => {
                let old = found.as_ref().map(|r| r.id.clone()).unwrap_or_default();
                if !opts.dry_run {
                    client.retire(&old, &s.name)?;
                }
                out.superseded_run = Some(old);
                out.run_id = None;
                out.created = true;
                out.last_commit = None;
                0
            }
            None => {
                return Err(MlflowError::Diverged {
                    branch: s.name.clone(),
                    run_id: out.run_id.clone().unwrap_or_default(),
                    commit: last.to_string(),
                })
            }
        },
    };
    let new = &rows[start..];
    let points = round_points(ledger, rows)?;
    let logs: Vec<RoundLog> = new
        .iter()
        .zip(&points[start..])
        .map(|(r, p)| round_log(r, p))
        .collect();
    out.rounds_added = points[start..].iter().map(|p| p.step).collect();
    out.metrics_added = logs.iter().map(|l| l.points.len()).sum();
    out.last_commit = rows.last().map(|r| r.row.commit.to_string());
    if new.is_empty() {
        // Nothing to log: no empty run is created for a branch without rounds.
        out.created = false;
        return Ok(out);
    }
    if opts.dry_run {
        return Ok(out);
    }
    let params = if out.created {
        run_params(ledger, rows, &s.arm)?
    } else {
        Vec::new()
    };
    let run = match &out.run_id {
        Some(id) => id.clone(),
        None => {
            let e = experiment.expect("the experiment exists unless this is a dry run");
            let start_ms = rows.first().map_or(0, |r| r.row.time.saturating_mul(1000));
            let tags = vec![
                (BRANCH_TAG.to_string(), s.name.clone()),
                ("mlflow.runName".to_string(), s.name.clone()),
                (
                    "mlflow.source.name".to_string(),
                    "bat mirror mlflow".to_string(),
                ),
                (
                    "bat.mirrored_by".to_string(),
                    env!("CARGO_PKG_VERSION").to_string(),
                ),
            ];
            client.create_run(e, &s.name, start_ms, &tags)?
        }
    };
    out.run_id = Some(run.clone());
    let calls = batches(&logs, &params);
    ctx.progress.start(
        &format!("mirroring {} to MLflow", s.name),
        Some(calls.len() as u64),
    );
    for b in &calls {
        if ctx.cancelled() {
            ctx.progress.finish();
            return Err(MlflowError::Cancelled);
        }
        client.log_batch(&run, b)?;
        ctx.progress.inc(1);
    }
    ctx.progress.finish();
    if let Some(last) = rows.last() {
        client.finish_run(&run, last.row.time.saturating_mul(1000))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(n: usize, tags: usize) -> RoundLog {
        RoundLog {
            points: (0..n)
                .map(|i| Point {
                    key: format!("m{i}"),
                    value: i as f64,
                    timestamp: 0,
                    step: 1,
                })
                .collect(),
            tags: (0..tags)
                .map(|i| (format!("t{i}"), String::new()))
                .collect(),
        }
    }

    #[test]
    fn batches_keep_mlflow_s_limits_and_every_point_once() {
        let rounds = vec![round(600, 4), round(600, 4), round(2500, 4), round(10, 4)];
        let params = vec![("p".to_string(), "v".to_string())];
        let b = batches(&rounds, &params);
        for x in &b {
            assert!(x.metrics.len() <= MAX_BATCH_METRICS);
            assert!(x.tags.len() <= MAX_BATCH_TAGS);
            assert!(x.metrics.len() + x.tags.len() + x.params.len() <= MAX_BATCH_METRICS);
        }
        let total: usize = b.iter().map(|x| x.metrics.len()).sum();
        assert_eq!(total, 600 + 600 + 2500 + 10);
        assert_eq!(b[0].params, params);
        assert!(b[1..].iter().all(|x| x.params.is_empty()));
        // The 2500-point round: its tags ride with its last points only.
        let last_of_big = b
            .iter()
            .position(|x| x.metrics.iter().any(|m| m.key == "m2499"))
            .expect("the big round's last point");
        assert!(b[last_of_big].tags.iter().any(|(k, _)| k == "t0"));
        assert!(
            b[last_of_big - 1].tags.is_empty(),
            "{:?}",
            b[last_of_big - 1].tags
        );
    }

    #[test]
    fn many_small_rounds_split_on_the_tag_limit() {
        let rounds: Vec<RoundLog> = (0..120)
            .map(|i| {
                let mut r = round(3, 0);
                r.tags = vec![
                    (format!("bat.round.{i:03}.commit"), "c".into()),
                    (LAST_COMMIT_TAG.into(), format!("c{i}")),
                ];
                r
            })
            .collect();
        let b = batches(&rounds, &[]);
        assert!(b.len() > 1);
        for x in &b {
            assert!(x.tags.len() <= MAX_BATCH_TAGS);
            let last: Vec<_> = x
                .tags
                .iter()
                .filter(|(k, _)| k == LAST_COMMIT_TAG)
                .collect();
            assert_eq!(last.len(), 1, "one state tag per call");
        }
        let final_state = &b.last().expect("a batch").tags;
        assert!(final_state.contains(&(LAST_COMMIT_TAG.to_string(), "c119".to_string())));
    }

    #[test]
    fn metric_keys_keep_mlflow_s_characters() {
        assert_eq!(
            metric_key("health/sim.kl_to ref:1-x"),
            "health/sim.kl_to ref:1-x"
        );
        assert_eq!(metric_key("track/a(b)\"c"), "track/a_b__c");
    }

    #[test]
    fn filter_strings_are_quoted() {
        assert_eq!(quote_filter("main"), "'main'");
        assert_eq!(quote_filter("it's"), "\"it's\"");
    }
}
