//! `bat query`: read-only SQL over a campaign, in an in-memory SQLite
//! database built from the ledger for one query. The catalog's own tables
//! are never exposed: the database holds seven documented tables
//! (`docs/rounds.md` has the `rounds` columns, `docs/query.md` the rest):
//!
//! - `rounds`: one row per round per listed branch ([`RoundRow`]);
//! - `commits`: every commit of the listed histories (`id`, `parents`
//!   (space-separated), `first_parent`, `author`, `time`, `message`,
//!   `kind`, `round_id`, `branch`: the first listed branch it was found on);
//! - `files`: the files of those commits (`commit`, `path`, `size`,
//!   `object_id`, `mode`); bounded by the histories listed, and skipped
//!   entirely when the caller says so;
//! - `evals`: the audit evaluations attached to those round commits
//!   (`commit`, `round_id`, `protocol_id`, `audit_commit`, `overall`,
//!   `task`, `agentic`, `S1`…`S5`, `gating_overall`, `gap`: audit − gating
//!   Overall);
//! - `metrics`: the custom metrics of every round in `rounds`, long form
//!   (`commit`, `branch`, `round_id`, `round_number`, `source`, `key`,
//!   `value`; see [`super::metrics`]);
//! - `steps`: the step metrics of every round in `rounds`, long form
//!   (`commit`, `branch`, `round_id`, `round_number`, `step`, `key`,
//!   `value`; see [`crate::round::steps`]);
//! - `arm_scores`: per arm group, per round and for the final checkpoint,
//!   each score's mean and bootstrap interval ([`super::arm_scores`]),
//!   filled when [`BuildOptions::arm_scores`] asks for it.
//!
//! The user's statement runs with `PRAGMA query_only=ON`, at most one
//! statement, refused unless SQLite reports it read-only, and with
//! attaching other databases disabled, so a query can neither change the
//! scratch database nor write a file.
//!
//! A statement is also bounded ([`QueryLimits`]): SQLite is interrupted
//! when the time limit passes or the caller's cancel flag is set, SQLite's
//! own heap is capped (`PRAGMA hard_heap_limit`, which covers the loaded
//! tables too) and so is the size of the result held for the caller, so a
//! recursive CTE without end or a string-building one stops with an error
//! naming the limit instead of running until the machine gives out.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bat_ledger::{CommitId, Ledger, Mode};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{params_from_iter, Connection};
use serde::Deserialize;

use crate::inspect::audit::audit_gap;
use crate::inspect::rounds::{RoundRows, RoundsError, COLUMNS};
use crate::inspect::InspectError;

use super::arm_scores::arm_scores;
use super::metrics::round_metrics;
use super::Source;
use crate::experiment::stats::Bootstrap;

/// Errors of `bat query`.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Reading the ledger failed.
    #[error(transparent)]
    Rounds(#[from] RoundsError),
    /// The scratch database failed while being built.
    #[error("building the query database: {0}")]
    Build(rusqlite::Error),
    /// The statement is not valid SQL for these tables.
    #[error("{0}")]
    Sql(rusqlite::Error),
    /// The arms of `arm_scores` could not be read (boxed: large, rare).
    #[error(transparent)]
    Arms(Box<crate::experiment::ExperimentError>),
    /// The statement would change data.
    #[error("only read-only statements are allowed (SELECT, WITH … SELECT, read-only PRAGMA)")]
    NotReadOnly,
    /// The statement ran longer than its time limit and was stopped.
    #[error("the query ran longer than its time limit of {}", human_duration(*limit))]
    TimeLimit {
        /// The limit that was reached.
        limit: Duration,
    },
    /// The statement (or its result) needed more memory than its limit.
    #[error("the query needed more than its memory limit of {} ({what})", human_bytes(*limit))]
    MemoryLimit {
        /// The limit that was reached, in bytes.
        limit: u64,
        /// What outgrew it: SQLite's working memory or the result.
        what: &'static str,
    },
    /// The caller's cancel flag stopped the statement.
    #[error("the query was interrupted")]
    Cancelled,
}

/// `30s`, `1m30s`, `250ms`: a duration as a person writes it.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// `512 MiB`, `1536 KiB`, `100 B`: a byte count in the largest binary unit
/// that divides it.
pub fn human_bytes(n: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} B")
}

/// How long a statement may run and how much memory it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Wall-clock time from the start of the statement to its last row.
    pub timeout: Duration,
    /// SQLite's heap (the loaded tables included) and, separately, the
    /// bytes of the result held for the caller.
    pub max_memory: u64,
}

impl QueryLimits {
    /// The default time limit: long enough for any statement over a real
    /// campaign (they take milliseconds), short enough that a runaway one
    /// is noticed.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default memory limit: a campaign's tables are a few megabytes.
    pub const DEFAULT_MAX_MEMORY: u64 = 512 << 20;
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            timeout: Self::DEFAULT_TIMEOUT,
            max_memory: Self::DEFAULT_MAX_MEMORY,
        }
    }
}

impl bat_ledger::Diagnostic for QueryError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            QueryError::Rounds(e) => e.kind(),
            QueryError::Arms(e) => e.kind(),
            QueryError::Sql { .. } => bat_ledger::ErrorKind::Usage,
            QueryError::NotReadOnly => bat_ledger::ErrorKind::Usage,
            QueryError::Cancelled => bat_ledger::ErrorKind::Interrupted,
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            QueryError::Rounds(e) => e.hint(),
            QueryError::Sql { .. } => Some(
                "tables: rounds, commits, files, evals, metrics, steps, arm_scores (see docs/query.md)"
                    .to_string(),
            ),
            QueryError::NotReadOnly => Some(
                "tables: rounds, commits, files, evals, metrics, steps, arm_scores (see docs/query.md)"
                    .to_string(),
            ),
            QueryError::TimeLimit { .. } => Some(
                "a recursive CTE needs a condition that ends it (WHERE n < 100) or a LIMIT; \
                 raise the limit with `bat query --timeout 2m` if the statement is meant to run long"
                    .to_string(),
            ),
            QueryError::MemoryLimit { .. } => Some(
                "select fewer rows or narrower values (LIMIT, substr()); \
                 raise the limit with `bat query --max-memory 2GiB` if the result is meant to be large"
                    .to_string(),
            ),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            QueryError::Rounds(e) => e.code(),
            QueryError::Arms(e) => e.code(),
            _ => None,
        }
    }
}

impl From<bat_ledger::Error> for QueryError {
    fn from(e: bat_ledger::Error) -> Self {
        QueryError::Rounds(RoundsError::Ledger(e))
    }
}

impl From<InspectError> for QueryError {
    fn from(e: InspectError) -> Self {
        QueryError::Rounds(RoundsError::from(e))
    }
}

/// What to load.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Leave the `files` table empty (large trees, many commits).
    pub skip_files: bool,
    /// Fill `arm_scores` for these arms (arm specifications, one arm
    /// each); `None` leaves it empty (the bootstrap is the slow part, so
    /// the CLI fills it only when the statement names it).
    pub arm_scores: Option<(Vec<String>, Bootstrap)>,
}

/// The result of a query: column names and rows of SQLite values as JSON
/// (`NULL` → null, integers and reals as numbers, text as strings, blobs as
/// lower-case hex strings).
#[derive(Debug, Clone, serde::Serialize)]
pub struct QueryResult {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Rows, each as many values as there are columns.
    pub rows: Vec<Vec<serde_json::Value>>,
}

impl QueryResult {
    /// The rows as objects keyed by column name (the `--json` form).
    pub fn objects(&self) -> Vec<serde_json::Map<String, serde_json::Value>> {
        self.rows
            .iter()
            .map(|r| {
                self.columns
                    .iter()
                    .cloned()
                    .zip(r.iter().cloned())
                    .collect()
            })
            .collect()
    }
}

/// The schema of the query database (also `docs/query.md`).
pub const SCHEMA: &str = "
CREATE TABLE commits (id TEXT NOT NULL, parents TEXT NOT NULL, first_parent TEXT,
  author TEXT NOT NULL, time INTEGER NOT NULL, message TEXT NOT NULL, kind TEXT,
  round_id TEXT, branch TEXT NOT NULL);
CREATE TABLE files (\"commit\" TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL,
  object_id TEXT NOT NULL, mode TEXT NOT NULL);
CREATE TABLE evals (\"commit\" TEXT NOT NULL, round_id TEXT, protocol_id TEXT NOT NULL,
  audit_commit TEXT NOT NULL, overall REAL, task REAL, agentic REAL,
  S1 REAL, S2 REAL, S3 REAL, S4 REAL, S5 REAL, gating_overall REAL, gap REAL);
CREATE TABLE arm_scores (arm TEXT NOT NULL, members TEXT NOT NULL, round INTEGER,
  round_ids TEXT, score TEXT NOT NULL, mean REAL, ci_low REAL, ci_high REAL, iqm REAL,
  runs INTEGER, scheme TEXT NOT NULL, resamples INTEGER NOT NULL, seed INTEGER NOT NULL,
  level REAL NOT NULL);
CREATE TABLE metrics (\"commit\" TEXT NOT NULL, branch TEXT NOT NULL, round_id TEXT NOT NULL,
  round_number INTEGER, source TEXT NOT NULL, key TEXT NOT NULL, value REAL NOT NULL);
CREATE TABLE steps (\"commit\" TEXT NOT NULL, branch TEXT NOT NULL, round_id TEXT NOT NULL,
  round_number INTEGER, step INTEGER NOT NULL, key TEXT NOT NULL, value REAL NOT NULL);
";

/// SQL type of each round column (`docs/rounds.md`).
fn round_column_type(c: &str) -> &'static str {
    match c {
        "round_number" | "time" | "audit_count" | "promoted" | "reverted" => "INTEGER",
        "overall"
        | "task"
        | "agentic"
        | "S1"
        | "S2"
        | "S3"
        | "S4"
        | "S5"
        | "audit_overall"
        | "audit_gap"
        | "steps"
        | "rollouts"
        | "tokens"
        | "wall_seconds"
        | "trainer_wall_seconds"
        | "budget_steps" => "REAL",
        _ => "TEXT",
    }
}

/// The `kind` member of any commit's metadata.
#[derive(Deserialize)]
struct KindOnly {
    kind: Option<String>,
}

fn json_to_sql(v: &serde_json::Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    match v {
        serde_json::Value::Null => V::Null,
        serde_json::Value::Bool(b) => V::Integer(i64::from(*b)),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => V::Integer(i),
            None => V::Real(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => V::Text(s.clone()),
        other => V::Text(other.to_string()),
    }
}

/// Build the query database for `sources`.
pub fn build(
    ledger: &Ledger,
    sources: &[Source],
    opts: &BuildOptions,
) -> Result<Connection, QueryError> {
    let conn = Connection::open_in_memory().map_err(QueryError::Build)?;
    let cols: Vec<String> = COLUMNS
        .iter()
        .map(|c| format!("\"{c}\" {}", round_column_type(c)))
        .collect();
    conn.execute_batch(&format!(
        "CREATE TABLE rounds ({});{SCHEMA}",
        cols.join(", ")
    ))
    .map_err(QueryError::Build)?;
    let tx = conn.unchecked_transaction().map_err(QueryError::Build)?;
    let placeholders = vec!["?"; COLUMNS.len()].join(",");
    let mut seen: HashSet<CommitId> = HashSet::new();
    {
        let mut ins_round = tx
            .prepare(&format!("INSERT INTO rounds VALUES ({placeholders})"))
            .map_err(QueryError::Build)?;
        let mut ins_commit = tx
            .prepare("INSERT INTO commits VALUES (?,?,?,?,?,?,?,?,?)")
            .map_err(QueryError::Build)?;
        let mut ins_file = tx
            .prepare("INSERT INTO files VALUES (?,?,?,?,?)")
            .map_err(QueryError::Build)?;
        let mut ins_metric = tx
            .prepare("INSERT INTO metrics VALUES (?,?,?,?,?,?,?)")
            .map_err(QueryError::Build)?;
        let mut ins_step = tx
            .prepare("INSERT INTO steps VALUES (?,?,?,?,?,?,?)")
            .map_err(QueryError::Build)?;
        let mut ins_eval = tx
            .prepare("INSERT INTO evals VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
            .map_err(QueryError::Build)?;
        for s in sources {
            for row in RoundRows::new(ledger, &s.name, s.tip)? {
                let row = row?;
                let vals: Vec<_> = row.values().iter().map(json_to_sql).collect();
                ins_round
                    .execute(params_from_iter(vals))
                    .map_err(QueryError::Build)?;
                for (k, v) in round_metrics(ledger, row.commit)? {
                    ins_metric
                        .execute(rusqlite::params![
                            row.commit.to_string(),
                            row.branch,
                            row.round_id,
                            row.round_number,
                            k.source.as_str(),
                            k.to_string(),
                            v,
                        ])
                        .map_err(QueryError::Build)?;
                }
                let steps = crate::round::steps::round_steps(ledger, row.commit)?;
                for st in steps.iter().flat_map(|m| m.rows.iter()) {
                    for (k, v) in &st.values {
                        ins_step
                            .execute(rusqlite::params![
                                row.commit.to_string(),
                                row.branch,
                                row.round_id,
                                row.round_number,
                                i64::try_from(st.step).unwrap_or(i64::MAX),
                                k,
                                v,
                            ])
                            .map_err(QueryError::Build)?;
                    }
                }
            }
            for item in ledger.history(s.tip, None)? {
                let (id, c) = item?;
                if !seen.insert(id) {
                    continue;
                }
                let kind = serde_json::from_value::<KindOnly>(c.metadata.clone())
                    .ok()
                    .and_then(|k| k.kind);
                let round_id = crate::round::meta::round_id_of(&c.metadata).map(str::to_string);
                let parents: Vec<String> = c.parents.iter().map(ToString::to_string).collect();
                ins_commit
                    .execute(rusqlite::params![
                        id.to_string(),
                        parents.join(" "),
                        parents.first(),
                        c.author,
                        c.time,
                        c.message,
                        kind,
                        round_id,
                        s.name,
                    ])
                    .map_err(QueryError::Build)?;
                if !opts.skip_files {
                    for f in ledger.walk_files(&c.tree)? {
                        let mode = match f.mode {
                            Mode::Executable => "executable",
                            Mode::Symlink => "symlink",
                            _ => "file",
                        };
                        ins_file
                            .execute(rusqlite::params![
                                id.to_string(),
                                f.path,
                                f.size as i64,
                                f.id.to_string(),
                                mode
                            ])
                            .map_err(QueryError::Build)?;
                    }
                }
                if round_id.is_some() {
                    if let Some(g) = audit_gap(ledger, &id)? {
                        for a in &g.audits {
                            let st = |k: &str| a.scores.stages.get(k).copied();
                            ins_eval
                                .execute(rusqlite::params![
                                    id.to_string(),
                                    round_id,
                                    a.protocol_id,
                                    a.audit_commit.to_string(),
                                    a.scores.overall,
                                    a.scores.task,
                                    a.scores.agentic,
                                    st("S1"),
                                    st("S2"),
                                    st("S3"),
                                    st("S4"),
                                    st("S5"),
                                    g.gating.overall,
                                    a.gap.overall,
                                ])
                                .map_err(QueryError::Build)?;
                        }
                    }
                }
            }
        }
    }
    if let Some((arms, cfg)) = &opts.arm_scores {
        let rows = arm_scores(ledger, arms, cfg, &crate::Ctx::quiet())
            .map_err(|e| QueryError::Arms(Box::new(e)))?;
        let mut ins = tx
            .prepare("INSERT INTO arm_scores VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
            .map_err(QueryError::Build)?;
        for r in rows {
            let vals: Vec<_> = r.values().iter().map(json_to_sql).collect();
            ins.execute(params_from_iter(vals))
                .map_err(QueryError::Build)?;
        }
    }
    tx.commit().map_err(QueryError::Build)?;
    // From here on the database is the user's to read, never to change.
    conn.execute_batch("PRAGMA query_only=ON;")
        .map_err(QueryError::Build)?;
    conn.set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
        .map_err(QueryError::Build)?;
    Ok(conn)
}

/// The statement after leading blanks and comments.
fn strip_leading_comments(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        if let Some(r) = s.strip_prefix("--") {
            s = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = s.strip_prefix("/*") {
            s = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else {
            return s;
        }
    }
}

/// PRAGMAs that take an argument in parentheses and only read: the schema
/// introspection ones. Any other PRAGMA with an argument sets something
/// (`query_only(0)` is `query_only=0`) and is refused.
const READING_PRAGMAS_WITH_ARGUMENT: [&str; 7] = [
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
];

/// Whether a PRAGMA statement (the text after the keyword) only reads:
/// `PRAGMA name` reads a setting, `PRAGMA name(arg)` is allowed for the
/// introspection PRAGMAs, `PRAGMA name = v` is always refused.
fn pragma_reads(rest: &str) -> bool {
    let rest = rest.trim_start();
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(rest.len());
    let (name, tail) = rest.split_at(name_len);
    // A schema prefix (`main.table_info`) names the same PRAGMA.
    let name = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    let tail = strip_leading_comments(tail);
    let tail = tail.trim_end().trim_end_matches(';').trim_end();
    if name.is_empty() {
        return false;
    }
    if tail.is_empty() {
        return true;
    }
    tail.starts_with('(')
        && !tail.contains('=')
        && READING_PRAGMAS_WITH_ARGUMENT.contains(&name.as_str())
}

/// Statements a query may be: reads. SQLite calls `PRAGMA x = v` and
/// `ATTACH` read-only (they change the connection, not a file), so the
/// statement kind is checked too: a PRAGMA may only read.
fn allowed_kind(sql: &str) -> bool {
    let s = strip_leading_comments(sql);
    let word: String = s
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_uppercase();
    match word.as_str() {
        "SELECT" | "WITH" | "VALUES" | "EXPLAIN" => true,
        "PRAGMA" => pragma_reads(&s[word.len()..]),
        _ => false,
    }
}

/// Approximate bytes a value takes once held in a result.
fn held_bytes(v: &serde_json::Value) -> u64 {
    let payload = match v {
        serde_json::Value::String(s) => s.len(),
        _ => 8,
    };
    (payload + std::mem::size_of::<serde_json::Value>()) as u64
}

/// The error a failed step of a bounded statement means: an interrupt is
/// the cancel flag or the time limit, an allocation failure or a value
/// over SQLite's length limit is the memory limit.
fn limit_error(
    e: rusqlite::Error,
    limits: &QueryLimits,
    started: Instant,
    cancel: &std::sync::atomic::AtomicBool,
) -> QueryError {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(C::OperationInterrupted) if cancel.load(std::sync::atomic::Ordering::Relaxed) => {
            QueryError::Cancelled
        }
        Some(C::OperationInterrupted) if started.elapsed() >= limits.timeout => {
            QueryError::TimeLimit {
                limit: limits.timeout,
            }
        }
        Some(C::OutOfMemory | C::TooBig) => QueryError::MemoryLimit {
            limit: limits.max_memory,
            what: "SQLite's working memory",
        },
        _ => QueryError::Sql(e),
    }
}

/// Run one read-only statement within `limits`; `ctx.cancel` interrupts
/// it. SQLite's heap limit is process-wide: it stays set after the call
/// (the CLI runs one query per process).
pub fn run(
    conn: &Connection,
    sql: &str,
    limits: &QueryLimits,
    ctx: &crate::Ctx,
) -> Result<QueryResult, QueryError> {
    if !allowed_kind(sql) {
        return Err(QueryError::NotReadOnly);
    }
    let heap = i64::try_from(limits.max_memory).unwrap_or(i64::MAX);
    conn.query_row(&format!("PRAGMA hard_heap_limit={heap}"), [], |_| Ok(()))
        .map_err(QueryError::Build)?;
    // No single value longer than the memory limit (SQLite's own cap is
    // about 1 GB, an int).
    let length = i32::try_from(limits.max_memory).unwrap_or(i32::MAX);
    conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, length.max(1 << 20))
        .map_err(QueryError::Build)?;
    let started = Instant::now();
    let deadline = started + limits.timeout;
    let handle = conn.get_interrupt_handle();
    let (done, stop) = std::sync::mpsc::channel::<()>();
    let cancel = ctx.cancel;
    std::thread::scope(|scope| {
        // The watchdog: interrupts SQLite at the deadline or on cancel,
        // ends when `done` is dropped (the statement finished).
        // An interrupt only reaches a statement already running, so it is
        // repeated until the statement has ended.
        scope.spawn(move || loop {
            let now = Instant::now();
            let wait = if now >= deadline || cancel.load(std::sync::atomic::Ordering::Relaxed) {
                handle.interrupt();
                Duration::from_millis(20)
            } else {
                (deadline - now).min(Duration::from_millis(50))
            };
            match stop.recv_timeout(wait) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
        });
        let res = run_statement(conn, sql, limits, started, ctx);
        drop(done);
        res
    })
}

fn run_statement(
    conn: &Connection,
    sql: &str,
    limits: &QueryLimits,
    started: Instant,
    ctx: &crate::Ctx,
) -> Result<QueryResult, QueryError> {
    let fail = |e| limit_error(e, limits, started, ctx.cancel);
    let mut stmt = conn.prepare(sql).map_err(fail)?;
    if !stmt.readonly() {
        return Err(QueryError::NotReadOnly);
    }
    let columns: Vec<String> = stmt.column_names().map(String::from).collect();
    let n = columns.len();
    let mut rows = Vec::new();
    let mut held: u64 = 0;
    let mut q = stmt.query([]).map_err(fail)?;
    while let Some(r) = q.next().map_err(fail)? {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let v = match r.get_ref(i).map_err(fail)? {
                ValueRef::Null => serde_json::Value::Null,
                ValueRef::Integer(i) => i.into(),
                ValueRef::Real(f) => serde_json::Number::from_f64(f)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number),
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
                ValueRef::Blob(b) => hex::encode(b).into(),
            };
            held += held_bytes(&v);
            out.push(v);
        }
        if held > limits.max_memory {
            return Err(QueryError::MemoryLimit {
                limit: limits.max_memory,
                what: "the rows of the result",
            });
        }
        rows.push(out);
    }
    Ok(QueryResult { columns, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENDLESS: &str =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

    #[test]
    fn an_endless_statement_stops_at_the_time_limit_or_on_cancel() {
        let conn = Connection::open_in_memory().expect("in-memory database");
        let limits = QueryLimits {
            timeout: Duration::from_millis(300),
            ..QueryLimits::default()
        };
        let started = Instant::now();
        let e = run(&conn, ENDLESS, &limits, &crate::Ctx::quiet()).expect_err("endless");
        assert!(matches!(e, QueryError::TimeLimit { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            e.to_string(),
            "the query ran longer than its time limit of 300ms"
        );
        let cancel = std::sync::atomic::AtomicBool::new(true);
        let ctx = crate::Ctx::new(&bat_ledger::NoProgress, &cancel);
        let e = run(&conn, ENDLESS, &QueryLimits::default(), &ctx).expect_err("cancelled");
        assert!(matches!(e, QueryError::Cancelled), "{e}");
        // A statement that ends is unaffected.
        let ok = run(&conn, "SELECT 1 AS one", &limits, &crate::Ctx::quiet()).expect("runs");
        assert_eq!(ok.rows, vec![vec![serde_json::json!(1)]]);
    }

    #[test]
    fn limits_read_as_people_write_them() {
        assert_eq!(human_duration(Duration::from_secs(30)), "30s");
        assert_eq!(human_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(human_duration(Duration::from_secs(300)), "5m");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(human_bytes(512 << 20), "512 MiB");
        assert_eq!(human_bytes(2 << 30), "2 GiB");
        assert_eq!(human_bytes(1536 << 10), "1536 KiB");
        assert_eq!(human_bytes(100), "100 B");
    }

    #[test]
    fn only_reading_statement_kinds_pass() {
        assert!(allowed_kind("  -- note\n/* x */ select 1"));
        assert!(allowed_kind("WITH a AS (SELECT 1) SELECT * FROM a"));
        assert!(allowed_kind("PRAGMA table_info"));
        assert!(allowed_kind("PRAGMA table_info(rounds)"));
        assert!(allowed_kind("pragma main.table_xinfo( 'metrics' );"));
        assert!(allowed_kind("PRAGMA index_list(rounds)"));
        assert!(allowed_kind("PRAGMA query_only;"));
        assert!(!allowed_kind("PRAGMA query_only=OFF"));
        assert!(!allowed_kind("PRAGMA query_only = 0"));
        assert!(!allowed_kind("pragma query_only(0)"));
        assert!(!allowed_kind("PRAGMA main.query_only(false)"));
        assert!(!allowed_kind("PRAGMA table_info(rounds) = 1"));
        assert!(!allowed_kind("PRAGMA"));
        assert!(!allowed_kind("ATTACH 'x' AS y"));
        assert!(!allowed_kind("/* select */ DELETE FROM rounds"));
    }
}
