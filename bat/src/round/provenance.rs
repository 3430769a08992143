//! `provenance.json` of a round commit: the training code's git state (read
//! with libgit2), bat's version, the command templates, timestamps and the
//! compute the trainer measured.
//!
//! Measured compute is read from `training-health.json`: the members
//! `steps`, `rollouts`, `generated_tokens`, `wall_seconds` and
//! `gpu_seconds`, either inside a `"compute"` object or at the top level
//! (the `"compute"` object wins). Each must be a non-negative finite number;
//! absent members are omitted, and with none present `measured_compute` is
//! `null`.
//!
//! Code without git: `"code_files"` lists every file the command templates
//! name and the program they run ([`CodeFileRecord`]: role, argv index, the
//! element as written, the absolute path, BLAKE3 and size, read when the
//! round is committed), and `"environment"` the variables the templates
//! declare ([`EnvRecord`]: the value, or only its BLAKE3 digest for names
//! containing `TOKEN`, `KEY`, `SECRET` or `PASSWORD`). Both members are
//! absent from rounds recorded before them, and from rounds committed
//! without [`CodeInputs`]; readers treat absence as "nothing recorded".

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use git2::{DiffFormat, DiffOptions, Repository, StatusOptions};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::check::RoundCheck;
use super::layout::RoundLayout;
use super::validate::CheckedRound;
use super::{CommitRoundOptions, RoundError};
use bat_contract::json::Value;

/// The compute keys read from the health file, in output order.
pub const COMPUTE_KEYS: [&str; 5] = [
    "steps",
    "rollouts",
    "generated_tokens",
    "wall_seconds",
    "gpu_seconds",
];

/// A file a command template names, or the program it runs (see
/// [`crate::engine::template::code_files`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFile {
    /// `trainer` or `evaluator`.
    pub role: String,
    /// Its argv position (0: the program).
    pub argv_index: usize,
    /// The argv element as written.
    pub named: String,
    /// The absolute path read.
    pub path: std::path::PathBuf,
}

/// A declared environment variable and its value when the campaign started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredVar {
    /// `trainer` or `evaluator`.
    pub role: String,
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
}

/// What a round's code and environment are recorded from: the templates'
/// files (digested when the round is committed) and declared variables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CodeInputs {
    /// Files to digest.
    pub files: Vec<CodeFile>,
    /// Declared variables.
    pub env: Vec<DeclaredVar>,
}

/// One entry of `provenance.json`'s `"code_files"`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CodeFileRecord {
    /// `trainer` or `evaluator`.
    pub role: String,
    /// Its argv position (0: the program).
    pub argv_index: usize,
    /// The argv element as written.
    pub named: String,
    /// The absolute path read.
    pub path: String,
    /// BLAKE3 of the contents (`None`: it could not be read at commit time).
    pub blake3: Option<String>,
    /// Size in bytes (`None` with `blake3`).
    pub bytes: Option<u64>,
}

/// One entry of `provenance.json`'s `"environment"`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EnvRecord {
    /// `trainer` or `evaluator`.
    pub role: String,
    /// The variable.
    pub name: String,
    /// Its value (`None` for a secret-like name).
    pub value: Option<String>,
    /// BLAKE3 of the value, for a secret-like name.
    pub blake3: Option<String>,
}

/// Whether a variable's value is recorded only as a digest: its name
/// contains `TOKEN`, `KEY`, `SECRET` or `PASSWORD` (any case).
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    ["TOKEN", "KEY", "SECRET", "PASSWORD"]
        .iter()
        .any(|w| up.contains(w))
}

/// BLAKE3 and size of the file at `path` (`None` when it cannot be read).
pub fn digest_file(path: &Path) -> Option<(String, u64)> {
    let mut h = blake3::Hasher::new();
    h.update_reader(std::fs::File::open(path).ok()?).ok()?;
    Some((h.finalize().to_hex().to_string(), h.count()))
}

/// The records of `inputs`, digesting the files now.
pub fn code_records(inputs: &CodeInputs) -> (Vec<CodeFileRecord>, Vec<EnvRecord>) {
    let files = inputs
        .files
        .iter()
        .map(|f| {
            let d = digest_file(&f.path);
            CodeFileRecord {
                role: f.role.clone(),
                argv_index: f.argv_index,
                named: f.named.clone(),
                path: f.path.to_string_lossy().into_owned(),
                blake3: d.as_ref().map(|(h, _)| h.clone()),
                bytes: d.map(|(_, n)| n),
            }
        })
        .collect();
    let env = inputs
        .env
        .iter()
        .map(|v| {
            let secret = is_secret_name(&v.name);
            EnvRecord {
                role: v.role.clone(),
                name: v.name.clone(),
                value: (!secret).then(|| v.value.clone()),
                blake3: secret.then(|| blake3::hash(v.value.as_bytes()).to_hex().to_string()),
            }
        })
        .collect();
    (files, env)
}

/// Whether `path` lies in a git work tree (a repository found at or above
/// its folder).
pub fn under_version_control(path: &Path) -> bool {
    let dir = path.parent().unwrap_or(path);
    Repository::discover(dir).is_ok_and(|r| !r.is_bare())
}

/// The training-code repository's state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CodeProvenance {
    /// HEAD's commit id (`None` on an unborn branch).
    pub head_commit: Option<String>,
    /// The branch HEAD is on (`None` when detached).
    pub branch: Option<String>,
    /// Whether tracked files differ from HEAD (index or work tree) or
    /// untracked files exist.
    pub dirty: bool,
    /// Number of untracked (not ignored) files.
    pub untracked_files: usize,
    /// sha256 of the patch text of HEAD → work tree (with the index) for
    /// tracked files; the digest of the empty string when clean.
    pub diff_sha256: String,
    /// Length of that patch text in bytes.
    pub diff_bytes: usize,
}

fn git_err(path: &Path) -> impl Fn(git2::Error) -> RoundError + '_ {
    move |e| RoundError::Provenance {
        path: path.to_path_buf(),
        reason: e.message().to_string(),
    }
}

/// Read the git state of the repository at or above `path`.
pub fn code_provenance(path: &Path) -> Result<CodeProvenance, RoundError> {
    let err = git_err(path);
    let repo = Repository::discover(path).map_err(&err)?;
    let (head_commit, branch, head_tree) = match repo.head() {
        Ok(h) => {
            let commit = h.peel_to_commit().map_err(&err)?;
            let branch = h
                .is_branch()
                .then(|| h.shorthand().ok().map(str::to_string))
                .flatten();
            (
                Some(commit.id().to_string()),
                branch,
                Some(commit.tree().map_err(&err)?),
            )
        }
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => {
            let branch = repo
                .find_reference("HEAD")
                .ok()
                .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_string))
                .map(|t| t.trim_start_matches("refs/heads/").to_string());
            (None, branch, None)
        }
        Err(e) => return Err(err(e)),
    };
    let mut so = StatusOptions::new();
    so.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo.statuses(Some(&mut so)).map_err(&err)?;
    let mut untracked = 0;
    let mut changed = 0;
    for s in statuses.iter() {
        if s.status().contains(git2::Status::WT_NEW) {
            untracked += 1;
        } else if !s.status().is_empty() && !s.status().contains(git2::Status::IGNORED) {
            changed += 1;
        }
    }
    let mut dopts = DiffOptions::new();
    dopts.include_untracked(false);
    let diff = repo
        .diff_tree_to_workdir_with_index(head_tree.as_ref(), Some(&mut dopts))
        .map_err(&err)?;
    let mut patch = Vec::new();
    diff.print(DiffFormat::Patch, |_, _, line| {
        if matches!(line.origin(), '+' | '-' | ' ') {
            patch.push(line.origin() as u8);
        }
        patch.extend_from_slice(line.content());
        true
    })
    .map_err(&err)?;
    Ok(CodeProvenance {
        head_commit,
        branch,
        dirty: changed > 0 || untracked > 0,
        untracked_files: untracked,
        diff_sha256: hex::encode(Sha256::digest(&patch)),
        diff_bytes: patch.len(),
    })
}

/// The measured compute of a parsed health file (see the module docs).
/// `Err(reason)` when a member is present but not a non-negative finite
/// number.
pub fn measured_compute(health: &Value) -> Result<Option<serde_json::Value>, String> {
    let src = health
        .get("compute")
        .filter(|c| c.as_object().is_some())
        .unwrap_or(health);
    let mut out = serde_json::Map::new();
    for k in COMPUTE_KEYS {
        let Some(v) = src.get(k) else { continue };
        let n = match v {
            Value::Int(i) if *i >= 0 => json!(i),
            Value::Float(f) if f.is_finite() && *f >= 0.0 => json!(f),
            _ => return Err(format!("{k} must be a non-negative finite number")),
        };
        out.insert(k.to_string(), n);
    }
    Ok((!out.is_empty()).then_some(serde_json::Value::Object(out)))
}

/// The manifest members that make up a round's data budget.
pub const MANIFEST_BUDGET_KEYS: [&str; 4] = [
    "batches",
    "rows",
    "rows_per_batch",
    "continuations_per_state",
];

/// A round's compute budget: the data budget from the manifest (`batches`,
/// `rows`, `rows_per_batch`, `continuations_per_state`) plus the trainer's
/// declared budget, the health file's `"budget"` object (for the
/// simulator: `steps`, `groups_per_step`, `continuations_per_state`,
/// `max_response_tokens`), under `"trainer"` (`null` when absent).
/// Two rounds ran at the same compute when their budgets are equal.
pub fn round_budget(manifest: &Value, health: &Value) -> serde_json::Value {
    let mut data = serde_json::Map::new();
    for k in MANIFEST_BUDGET_KEYS {
        if let Some(v) = manifest.get(k) {
            data.insert(k.to_string(), bat_contract::json::to_serde(v));
        }
    }
    let trainer = health
        .get("budget")
        .filter(|b| b.as_object().is_some())
        .map(bat_contract::json::to_serde)
        .unwrap_or(serde_json::Value::Null);
    json!({"data": data, "trainer": trainer})
}

fn mtime(p: &Path) -> Option<i64> {
    let t = std::fs::metadata(p).ok()?.modified().ok()?;
    t.duration_since(UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs() as i64)
}

/// Build `provenance.json`'s document.
pub(crate) fn build(
    opts: &CommitRoundOptions,
    l: &RoundLayout,
    checked: &CheckedRound,
) -> Result<serde_json::Value, RoundError> {
    let code = match &opts.code_repo {
        Some(p) => Some(code_provenance(p)?),
        None => None,
    };
    let compute = measured_compute(&checked.health).map_err(|reason| {
        RoundError::from(RoundCheck::TrainingHealth {
            path: l.health.clone(),
            reason,
        })
    })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut doc = json!({
        "schema_version": 1,
        "artifact_kind": "bat_round_provenance",
        "bat_version": env!("CARGO_PKG_VERSION"),
        "code": code,
        "command_templates": opts.command_templates,
        "timestamps": {
            "recorded_unix": now,
            "training_health_mtime_unix": mtime(&l.health),
            "evaluation_summary_mtime_unix": mtime(&l.eval_dir.join("summary.json")),
        },
        "measured_compute": compute,
        "measured_by_bat": {
            "trainer_wall_seconds": opts.trainer_wall_seconds,
        },
    });
    if let Some(inputs) = &opts.code_inputs {
        let (files, env) = code_records(inputs);
        doc["code_files"] = json!(files);
        doc["environment"] = json!(env);
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_like_variables_are_recorded_as_digests_and_files_digested() {
        let dir = tempfile::tempdir().expect("tmp");
        let f = dir.path().join("train.py");
        std::fs::write(&f, b"print(1)\n").expect("write");
        let inputs = CodeInputs {
            files: vec![
                CodeFile {
                    role: "trainer".into(),
                    argv_index: 1,
                    named: "train.py".into(),
                    path: f.clone(),
                },
                CodeFile {
                    role: "trainer".into(),
                    argv_index: 2,
                    named: "gone.py".into(),
                    path: dir.path().join("gone.py"),
                },
            ],
            env: vec![
                DeclaredVar {
                    role: "evaluator".into(),
                    name: "BAT_PYTHON".into(),
                    value: "/usr/bin/python3".into(),
                },
                DeclaredVar {
                    role: "evaluator".into(),
                    name: "hf_token".into(),
                    value: "s3cret".into(),
                },
            ],
        };
        let (files, env) = code_records(&inputs);
        assert_eq!(
            files[0].blake3.as_deref(),
            Some(blake3::hash(b"print(1)\n").to_hex().as_str())
        );
        assert_eq!(files[0].bytes, Some(9));
        assert_eq!((files[1].blake3.as_ref(), files[1].bytes), (None, None));
        assert_eq!(env[0].value.as_deref(), Some("/usr/bin/python3"));
        assert_eq!(env[0].blake3, None);
        assert_eq!(env[1].value, None);
        assert_eq!(
            env[1].blake3.as_deref(),
            Some(blake3::hash(b"s3cret").to_hex().as_str())
        );
        assert!(["API_KEY", "Password", "x_secret_y"]
            .iter()
            .all(|n| is_secret_name(n)));
        assert!(!is_secret_name("BAT_PYTHON"));
    }
}
