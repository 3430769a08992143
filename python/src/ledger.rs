//! `Ledger` and `Commit`: the reading and writing API. Each method calls
//! the same library functions as the CLI verb of the same name.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};

use bat::inspect::audit::{attach_audit, AttachRequest};
use bat::inspect::diff::{diff_commits, DiffOptions, Section};
use bat::round::{commit_round, CommitRoundOptions};
use bat_contract::pack::Pack;
use bat_ledger::{Commit, CommitId, CommitRequest, Error, FieldValue, Ledger, Mode, NoProgress};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::{json, Value};

use crate::convert::{from_py, to_py};
use crate::errors::{Class, Failure, Outcome};

/// One commit of the history.
#[pyclass(module = "batledger", name = "Commit", frozen)]
pub struct PyCommit {
    /// Full commit id (64 hex digits).
    #[pyo3(get)]
    id: String,
    /// Parent commit ids.
    #[pyo3(get)]
    parents: Vec<String>,
    /// Root tree id.
    #[pyo3(get)]
    tree: String,
    /// The commit message.
    #[pyo3(get)]
    message: String,
    /// Unix seconds.
    #[pyo3(get)]
    time: i64,
    /// Who recorded it.
    #[pyo3(get)]
    author: String,
    metadata: Value,
    fields: Value,
}

impl PyCommit {
    fn new(id: &CommitId, c: &Commit) -> Outcome<PyCommit> {
        Ok(PyCommit {
            id: id.to_string(),
            parents: c.parents.iter().map(ToString::to_string).collect(),
            tree: c.tree.to_string(),
            message: c.message.clone(),
            time: c.time,
            author: c.author.clone(),
            metadata: c.metadata.clone(),
            fields: serde_json::to_value(&c.fields).map_err(|e| Failure::msg(e.to_string()))?,
        })
    }
}

#[pymethods]
impl PyCommit {
    /// The commit's metadata (a dict for rounds: kind, round_id, scores, ...).
    #[getter]
    fn metadata(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.metadata)
    }

    /// The indexed fields (`scores.overall`, `round_id`, ...).
    #[getter]
    fn fields(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.fields)
    }

    fn __repr__(&self) -> String {
        let first = self.message.lines().next().unwrap_or("");
        format!("<Commit {} {:?}>", &self.id[..12.min(self.id.len())], first)
    }
}

/// A bat ledger, found from `path` upwards as the CLI does.
#[pyclass(module = "batledger", name = "Ledger", frozen, subclass)]
pub struct PyLedger {
    inner: Mutex<Ledger>,
    dir: PathBuf,
}

impl PyLedger {
    fn lock(&self) -> Outcome<MutexGuard<'_, Ledger>> {
        self.inner.lock().map_err(|_| {
            Failure::msg("the ledger handle is unusable: an earlier call panicked while holding it")
        })
    }

    /// Run `f` on the ledger with the GIL released, then raise or convert.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Ledger) -> Outcome<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut l = self.lock()?;
            f(&mut l)
        })
        .map_err(|e| e.into_py(py))
    }

    /// [`Self::with`] for a JSON result.
    fn with_json(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Ledger) -> Outcome<Value> + Send,
    ) -> PyResult<Py<PyAny>> {
        let v = self.with(py, f)?;
        to_py(py, &v)
    }
}

/// As the CLI's `resolve`: a ledger error keeps its hint.
fn resolve(l: &Ledger, rev: &str) -> Outcome<CommitId> {
    bat::round::resolve_rev(l, rev).map_err(|e| match e {
        bat::round::RoundError::Ledger(le) => le.into(),
        other => other.into(),
    })
}

fn usage(msg: impl Into<String>, hint: &str) -> Failure {
    Failure::msg(msg).with_hint(hint)
}

fn default_author() -> String {
    // The CLI's default: $BAT_AUTHOR, else $USER, else "unknown".
    ["BAT_AUTHOR", "USER"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

fn load_pack(pack: Option<&Path>) -> Outcome<Pack> {
    Pack::load_or_default(pack).map_err(|e| Failure::from_library(Class::Base, &e))
}

#[pymethods]
impl PyLedger {
    /// Open the ledger at `path` or in the nearest folder above it that
    /// holds one (as `bat -C PATH` does). A partial clone fetches promised
    /// files on demand from its remote (public remotes only: no token).
    #[new]
    #[pyo3(signature = (path = PathBuf::from(".")))]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        py.detach(|| -> Outcome<Self> {
            let mut l = Ledger::discover(&path)?;
            bat::remote::attach_promisor(&mut l, bat::remote::RemoteOptions::default())?;
            let dir = l.dir().to_path_buf();
            Ok(PyLedger {
                inner: Mutex::new(l),
                dir,
            })
        })
        .map_err(|e| e.into_py(py))
    }

    /// The ledger's `.bat` directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.dir.clone()
    }

    fn __repr__(&self) -> String {
        format!("<Ledger {}>", self.dir.display())
    }

    /// The full commit id a revision names (branch, tag, HEAD, round id
    /// such as `r02`, id prefix, with `~N`/`^` suffixes).
    fn resolve(&self, py: Python<'_>, rev: &str) -> PyResult<String> {
        self.with(py, |l| Ok(resolve(l, rev)?.to_string()))
    }

    /// History from `rev`, newest first, at most `limit` commits, as a list
    /// of `Commit`.
    #[pyo3(signature = (rev = "HEAD", limit = None))]
    fn log(&self, py: Python<'_>, rev: &str, limit: Option<usize>) -> PyResult<Vec<PyCommit>> {
        self.with(py, |l| {
            let start = resolve(l, rev)?;
            let mut out = Vec::new();
            for item in l.history(start, limit)? {
                let (id, c) = item?;
                out.push(PyCommit::new(&id, &c)?);
            }
            Ok(out)
        })
    }

    /// One commit with its metadata and file list (`bat show --json`).
    #[pyo3(signature = (rev = "HEAD"))]
    fn show(&self, py: Python<'_>, rev: &str) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let id = resolve(l, rev)?;
            let c = l.read_commit(&id)?;
            let (mut files, mut links) = (Vec::new(), Vec::new());
            for e in l.walk_files(&c.tree)? {
                if e.mode == Mode::Symlink {
                    let t = l.read_bytes(&e.id)?;
                    links.push(json!({"path": e.path, "target": String::from_utf8_lossy(&t)}));
                } else {
                    files.push(json!({"path": e.path, "size": e.size, "id": e.id,
                        "executable": e.mode == Mode::Executable}));
                }
            }
            Ok(json!({
                "id": id, "parents": c.parents, "tree": c.tree, "author": c.author,
                "time": c.time, "message": c.message, "metadata": c.metadata,
                "fields": c.fields, "files": files, "symlinks": links,
            }))
        })
    }

    /// Every file of a commit: dicts with `path`, `id` (BLAKE3 of the
    /// bytes), `size` and `mode` (`file`, `executable`, `symlink`).
    #[pyo3(signature = (rev = "HEAD"))]
    fn files(&self, py: Python<'_>, rev: &str) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let id = resolve(l, rev)?;
            let c = l.read_commit(&id)?;
            let rows: Vec<Value> = l
                .walk_files(&c.tree)?
                .into_iter()
                .map(|e| json!({"path": e.path, "id": e.id, "size": e.size, "mode": e.mode}))
                .collect();
            Ok(Value::Array(rows))
        })
    }

    /// The bytes of one file of a commit (every chunk verified).
    fn read<'py>(&self, py: Python<'py>, rev: &str, path: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with(py, |l| {
            let id = resolve(l, rev)?;
            let c = l.read_commit(&id)?;
            let e = l
                .lookup_path(&c.tree, path)?
                .ok_or_else(|| Error::PathNotFound {
                    rev: rev.into(),
                    path: path.into(),
                })?;
            if e.mode == Mode::Tree {
                return Err(Error::WrongKind {
                    path: path.into(),
                    what: "a directory, not a file",
                }
                .into());
            }
            Ok(l.read_bytes(&e.id)?)
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Write a commit's files into `to` (new or empty). Nothing appears in
    /// `to` unless the whole tree verified. Returns counts.
    fn checkout(&self, py: Python<'_>, rev: &str, to: PathBuf) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let id = resolve(l, rev)?;
            let st = l.checkout(&id, &to, &NoProgress, &AtomicBool::new(false))?;
            Ok(json!({"commit": id, "to": to, "stats": st}))
        })
    }

    /// Compare two commits: the sections of `bat diff --json` (curriculum,
    /// mixture, reward, checkpoint, eval, gate, audit, files), or only
    /// those named in `sections`.
    #[pyo3(signature = (a, b, sections = None))]
    fn diff(
        &self,
        py: Python<'_>,
        a: &str,
        b: &str,
        sections: Option<Vec<String>>,
    ) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let sections = sections
                .unwrap_or_default()
                .iter()
                .map(|s| s.parse::<Section>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| usage(e, "sections are named as for `bat diff --section`"))?;
            let (ia, ib) = (resolve(l, a)?, resolve(l, b)?);
            for c in [ia, ib] {
                bat::remote::prefetch_checkpoints(l, &c, &NoProgress, &AtomicBool::new(false))?;
            }
            let opts = DiffOptions {
                sections,
                ..DiffOptions::default()
            };
            Ok(diff_commits(l, ia, ib, &opts, &bat::Ctx::quiet())?)
        })
    }

    /// Object counts and sizes (`bat stats --json`).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        // As `bat stats --json`: scratch folders apart from stored bytes.
        self.with_json(py, |l| Ok(bat::retention::stats(l)?.to_json()))
    }

    /// Local branches: `{name: commit id}`.
    fn branches(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| refs_map(l, "refs/heads/"))
    }

    /// Tags: `{name: commit id}` (audit tags included).
    fn tags(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| refs_map(l, "refs/tags/"))
    }

    /// The branch HEAD is on, or None when detached.
    #[getter]
    fn head(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |l| {
            Ok(match l.head()? {
                bat_ledger::Head::Branch { name, .. } => Some(
                    name.strip_prefix("refs/heads/")
                        .unwrap_or(&name)
                        .to_string(),
                ),
                bat_ledger::Head::Detached { .. } => None,
            })
        })
    }

    /// One record per round commit reachable from `branch` (any
    /// revision), oldest first: the shared round rows of `bat export`
    /// (`bat::inspect::rounds`; columns in docs/rounds.md).
    /// `branch` may be an arm group (a glob such as `'bat/*'` or a comma
    /// list): its branches' rows, branch by branch.
    #[pyo3(signature = (branch = "main"))]
    fn rounds(&self, py: Python<'_>, branch: &str) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let mut rows = Vec::new();
            for s in bat::report::sources(l, &[branch.to_string()])? {
                rows.extend(bat::inspect::rounds::round_rows(l, &s.name, s.tip)?);
            }
            serde_json::to_value(rows).map_err(|e| Failure::msg(e.to_string()))
        })
    }

    /// Arm scores with confidence intervals (`bat export --ci`, `bat
    /// query`'s `arm_scores`): each element of `arms` is one arm (a branch,
    /// a glob such as `'bat/*'` or a comma list; its branches are the
    /// seeds). One record per arm and score, per round (Overall, audit
    /// gap) and at the final checkpoint (every score), plus the audit gap's
    /// slope: arm, members, round, round_ids, score, mean, ci_low, ci_high,
    /// iqm, runs, scheme, resamples, seed, level.
    #[pyo3(signature = (arms, resamples = 10_000, seed = 0, scheme = "runs"))]
    fn arm_scores(
        &self,
        py: Python<'_>,
        arms: Vec<String>,
        resamples: usize,
        seed: u64,
        scheme: &str,
    ) -> PyResult<Py<PyAny>> {
        let scheme = bat::experiment::stats::Scheme::parse(scheme).ok_or_else(|| {
            usage(
                format!("unknown resampling scheme {scheme:?}"),
                "scheme is \"runs\" (within each (track, task) stratum) or \"tasks\"",
            )
            .into_py(py)
        })?;
        let cfg = bat::experiment::stats::Bootstrap {
            resamples: resamples.max(1),
            seed,
            scheme,
            ..bat::experiment::stats::Bootstrap::default()
        };
        self.with_json(py, move |l| {
            let rows = bat::report::arm_scores::arm_scores(l, &arms, &cfg, &bat::Ctx::quiet())?;
            serde_json::to_value(rows).map_err(|e| Failure::msg(e.to_string()))
        })
    }

    /// The custom metrics of every round commit reachable from `branch`
    /// (any revision), oldest first, long form: one record per round and
    /// metric (`commit`, `branch`, `round_id`, `round_number`, `source`,
    /// `key`, `value`), the rows of `bat query`'s `metrics` table. Keys are
    /// `health.<path>` (numbers of the training-health file, nested keys
    /// joined with dots), `eval.track.<name>` and `eval.stage.<S>`.
    /// `branch` may be an arm group (a glob or a comma list).
    #[pyo3(signature = (branch = "main"))]
    fn metrics(&self, py: Python<'_>, branch: &str) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let mut out = Vec::new();
            let rows = bat::report::sources(l, &[branch.to_string()])?
                .into_iter()
                .map(|s| bat::inspect::rounds::round_rows(l, &s.name, s.tip))
                .collect::<Result<Vec<_>, _>>()?;
            for row in rows.into_iter().flatten() {
                for (k, v) in bat::report::metrics::round_metrics(l, row.commit)? {
                    out.push(serde_json::json!({
                        "commit": row.commit.to_string(),
                        "branch": row.branch,
                        "round_id": row.round_id,
                        "round_number": row.round_number,
                        "source": k.source.as_str(),
                        "key": k.to_string(),
                        "value": v,
                    }));
                }
            }
            Ok(Value::Array(out))
        })
    }

    /// The step metrics (the trainer's `{metrics}` file) of every round
    /// commit reachable from `branch`, oldest first: one record per step
    /// with `branch`, `round_id`, `round_number`, `commit`, `step` and one
    /// member per metric name (None where a step lacks it), the rows of
    /// `bat export --steps`. `branch` may be an arm group.
    #[pyo3(signature = (branch = "main"))]
    fn steps(&self, py: Python<'_>, branch: &str) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let sources = bat::report::sources(l, &[branch.to_string()])?;
            let (_, rows) = bat::report::export::step_rows(l, &sources)?;
            Ok(Value::Array(rows.into_iter().map(Value::Object).collect()))
        })
    }

    /// Create tag `name` at `rev`; returns the commit id.
    #[pyo3(signature = (name, rev = "HEAD"))]
    fn tag(&self, py: Python<'_>, name: &str, rev: &str) -> PyResult<String> {
        self.with(py, |l| {
            let at = resolve(l, rev)?;
            l.create_tag(name, at)?;
            Ok(at.to_string())
        })
    }

    /// Create branch `name` at `rev`; returns the commit id.
    #[pyo3(signature = (name, rev = "HEAD"))]
    fn branch(&self, py: Python<'_>, name: &str, rev: &str) -> PyResult<String> {
        self.with(py, |l| {
            let at = resolve(l, rev)?;
            l.create_branch(name, at)?;
            Ok(at.to_string())
        })
    }

    /// Record `dir` as a plain commit (`bat commit DIR -m MSG --meta`).
    /// `metadata` (JSON-representable) is stored with the commit; scalars
    /// under its `"fields"` key become indexed fields. Returns the outcome
    /// (`commit`, `refname`, counts).
    #[pyo3(signature = (dir, message, metadata = None, branch = None, author = None))]
    fn commit(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        message: String,
        metadata: Option<Bound<'_, PyAny>>,
        branch: Option<String>,
        author: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let meta = match metadata {
            Some(m) => from_py(&m)?,
            None => Value::Null,
        };
        self.with_json(py, |l| {
            let req = plain_request(message, meta, branch, author)?;
            if !dir.is_dir() {
                return Err(usage(
                    format!("{} is not a directory", dir.display()),
                    "give the directory to record",
                ));
            }
            let out = l.commit_dir(&dir, &req, &NoProgress, &AtomicBool::new(false))?;
            serde_json::to_value(out).map_err(|e| Failure::msg(e.to_string()))
        })
    }

    /// Validate a round directory and record it as a round commit, exactly
    /// as `bat commit ROUND_DIR` does (same checks, same refusals: raises
    /// `RoundRejected` with the failed check). `code_repo` is the training
    /// code's git repository recorded in provenance (default: the one
    /// around the current directory, if any; `False` records none).
    #[pyo3(signature = (round_dir, message = None, branch = None, code_repo = None,
        baseline_summary = None, pack = None, heldout_markers = None,
        keep_raw_eval = false, author = None))]
    #[allow(clippy::too_many_arguments)]
    fn commit_round(
        &self,
        py: Python<'_>,
        round_dir: PathBuf,
        message: Option<String>,
        branch: Option<String>,
        code_repo: Option<Bound<'_, PyAny>>,
        baseline_summary: Option<PathBuf>,
        pack: Option<PathBuf>,
        heldout_markers: Option<PathBuf>,
        keep_raw_eval: bool,
        author: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let code_repo = code_repo_arg(code_repo)?;
        self.with_json(py, |l| {
            let opts = CommitRoundOptions {
                message,
                branch,
                code_repo,
                heldout_markers,
                keep_raw_eval,
                pack: load_pack(pack.as_deref())?,
                baseline_summary,
                author: Some(author.unwrap_or_else(default_author)),
                ..Default::default()
            };
            let out = commit_round(l, &round_dir, &opts, &bat::Ctx::quiet())?;
            serde_json::to_value(&out)
                .map_err(|e| Failure::msg(format!("cannot encode the round commit: {e}")))
        })
    }

    /// Record an audit evaluation summary for round `rev`
    /// (`bat eval attach`). Audits never drive gating; a second audit with
    /// the same protocol id is refused. `allow_mismatch_reason` records a
    /// summary of another checkpoint than the round's candidate.
    #[pyo3(signature = (rev, summary, protocol_id, role = "audit", pack = None,
        author = None, allow_mismatch_reason = None))]
    #[allow(clippy::too_many_arguments)]
    fn eval_attach(
        &self,
        py: Python<'_>,
        rev: &str,
        summary: PathBuf,
        protocol_id: &str,
        role: &str,
        pack: Option<PathBuf>,
        author: Option<String>,
        allow_mismatch_reason: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        self.with_json(py, |l| {
            let pack = load_pack(pack.as_deref())?;
            let bytes = bat_contract::fsutil::read_json_input(&summary).map_err(|e| {
                usage(
                    format!("cannot read {}: {e}", summary.display()),
                    "give the audit's summary.json",
                )
            })?;
            let req = AttachRequest {
                rev: resolve(l, rev)?,
                summary: &bytes,
                role,
                protocol_id,
                pack: &pack,
                author: author.unwrap_or_else(default_author),
                time: None,
                allow_mismatch: allow_mismatch_reason.as_deref(),
            };
            let out = attach_audit(l, &req)?;
            serde_json::to_value(out).map_err(|e| Failure::msg(e.to_string()))
        })
    }
}

fn refs_map(l: &Ledger, prefix: &str) -> Outcome<Value> {
    let mut m = serde_json::Map::new();
    for (name, id) in l.list_refs(prefix)? {
        m.insert(name, json!(id));
    }
    Ok(Value::Object(m))
}

/// The request `bat commit DIR -m MSG --meta FILE` builds.
fn plain_request(
    message: String,
    meta: Value,
    branch: Option<String>,
    author: Option<String>,
) -> Outcome<CommitRequest> {
    if message.trim().is_empty() {
        return Err(usage("a commit message is required", "pass message=..."));
    }
    let mut req = CommitRequest::new(message);
    req.branch = branch;
    req.author = author.unwrap_or_else(default_author);
    if let Some(fields) = meta.get("fields").and_then(Value::as_object) {
        for (k, val) in fields {
            let fv = FieldValue::from_json(val).ok_or_else(|| {
                usage(
                    format!("metadata field {k:?} is not a scalar (string, number, bool)"),
                    "indexed fields must be scalars; nest other data outside \"fields\"",
                )
            })?;
            req.fields.insert(k.clone(), fv);
        }
    }
    req.metadata = meta;
    Ok(req)
}

/// `code_repo`: a path, `False` for none, or None for the git repository
/// around the current directory (as the CLI's default).
fn code_repo_arg(arg: Option<Bound<'_, PyAny>>) -> PyResult<Option<PathBuf>> {
    match arg {
        None => Ok(std::env::current_dir()
            .ok()
            .filter(|d| bat::round::code_provenance(d).is_ok())),
        Some(a) if a.is_instance_of::<pyo3::types::PyBool>() => {
            if a.extract::<bool>()? {
                Err(pyo3::exceptions::PyValueError::new_err(
                    "code_repo=True is ambiguous: pass a path, None (the current repository) or False",
                ))
            } else {
                Ok(None)
            }
        }
        Some(a) => Ok(Some(a.extract::<PathBuf>()?)),
    }
}
