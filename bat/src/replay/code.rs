//! What a replay depends on besides the ledger: the code files and the
//! declared environment each round recorded in `provenance.json`
//! (`"code_files"`, `"environment"`; see [`crate::round::provenance`]).
//!
//! Before any child starts, a replay checks that every declared variable is
//! set ([`check_environment`]); `--verify` also reports every code file whose
//! digest differs from the recorded one ([`code_changes`]). A code change is
//! a warning only: the verdict comes from the replayed artifacts alone.
//! Rounds recorded before these members existed record nothing, so nothing
//! is checked or reported for them.

use std::collections::BTreeMap;

use bat_ledger::Ledger;

use super::inputs::tree_file;
use super::plan::plan;
use super::ReplayError;
use crate::engine::template::TemplateError;
use crate::round::provenance::{digest_file, CodeFileRecord, EnvRecord};

/// A round's recorded code files and environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedInputs {
    /// The round id (`r02`).
    pub round_id: String,
    /// The round commit (full hex id).
    pub commit: String,
    /// `"code_files"` (empty when not recorded).
    pub code_files: Vec<CodeFileRecord>,
    /// `"environment"` (empty when not recorded).
    pub environment: Vec<EnvRecord>,
}

/// The recorded inputs of the rounds `rev` (`REV` or `A..B`) names, oldest
/// first, as `bat replay` resolves them.
pub fn recorded_inputs(ledger: &Ledger, rev: &str) -> Result<Vec<RecordedInputs>, ReplayError> {
    let mut out = Vec::new();
    for o in plan(ledger, rev)? {
        let prov: serde_json::Value = match tree_file(ledger, &o.tree, "provenance.json")? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| ReplayError::BadRecord {
                commit: o.commit.to_string(),
                reason: format!("provenance.json is not valid JSON: {e}"),
            })?,
            None => serde_json::Value::Null,
        };
        let member = |key: &str| prov.get(key).cloned().unwrap_or(serde_json::Value::Null);
        let bad = |key: &str, e: serde_json::Error| ReplayError::BadRecord {
            commit: o.commit.to_string(),
            reason: format!("provenance.json's {key:?} is not valid: {e}"),
        };
        let code_files = match member("code_files") {
            serde_json::Value::Null => Vec::new(),
            v => serde_json::from_value(v).map_err(|e| bad("code_files", e))?,
        };
        let environment = match member("environment") {
            serde_json::Value::Null => Vec::new(),
            v => serde_json::from_value(v).map_err(|e| bad("environment", e))?,
        };
        out.push(RecordedInputs {
            round_id: o.round_id.clone(),
            commit: o.commit.to_string(),
            code_files,
            environment,
        });
    }
    Ok(out)
}

/// A declared variable that is set, but not to the recorded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvDifference {
    /// The first round that recorded it.
    pub round_id: String,
    /// The variable.
    pub name: String,
    /// The recorded value (`None` for a secret, recorded as a digest).
    pub recorded: Option<String>,
}

/// Check the declared environment before anything runs: every variable a
/// round declared must be set (`lookup`: the environment children get),
/// otherwise the first round lacking some is named with all of them. Set
/// variables whose value differs from the recorded one are returned (a
/// warning for the caller to print).
pub fn check_environment(
    recorded: &[RecordedInputs],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<EnvDifference>, TemplateError> {
    let mut missing: Vec<(String, String, String)> = Vec::new();
    let mut differ: Vec<EnvDifference> = Vec::new();
    for r in recorded {
        for v in &r.environment {
            let now = lookup(&v.name);
            let Some(now) = now else {
                if !missing.iter().any(|(_, _, n)| *n == v.name) {
                    missing.push((r.round_id.clone(), v.role.clone(), v.name.clone()));
                }
                continue;
            };
            let same = match (&v.value, &v.blake3) {
                (Some(value), _) => *value == now,
                (None, Some(d)) => *d == blake3::hash(now.as_bytes()).to_hex().to_string(),
                (None, None) => true,
            };
            if !same && !differ.iter().any(|d| d.name == v.name) {
                differ.push(EnvDifference {
                    round_id: r.round_id.clone(),
                    name: v.name.clone(),
                    recorded: v.value.clone(),
                });
            }
        }
    }
    match missing.first() {
        None => Ok(differ),
        Some((round_id, role, _)) => Err(TemplateError::DeclaredEnvUnset {
            kind: role.clone(),
            context: format!("round {round_id}"),
            names: missing.iter().map(|(_, _, n)| n.clone()).collect(),
        }),
    }
}

/// A code file whose contents differ from what a round recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeChange {
    /// The first round that recorded the old contents.
    pub round_id: String,
    /// `trainer` or `evaluator`.
    pub role: String,
    /// Its argv position.
    pub argv_index: usize,
    /// The absolute path.
    pub path: String,
    /// The recorded BLAKE3.
    pub recorded: String,
    /// Its BLAKE3 now (`None`: missing or unreadable).
    pub now: Option<String>,
}

/// Every recorded code file whose contents changed since its round was
/// recorded, once per path (the earliest round naming it). Files that
/// could not be read when the round was recorded are skipped.
pub fn code_changes(recorded: &[RecordedInputs]) -> Vec<CodeChange> {
    let mut now: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut out: Vec<CodeChange> = Vec::new();
    for r in recorded {
        for f in &r.code_files {
            let Some(was) = &f.blake3 else { continue };
            let cur = now
                .entry(f.path.clone())
                .or_insert_with(|| digest_file(std::path::Path::new(&f.path)).map(|(h, _)| h));
            if cur.as_deref() != Some(was.as_str()) && !out.iter().any(|c| c.path == f.path) {
                out.push(CodeChange {
                    round_id: r.round_id.clone(),
                    role: f.role.clone(),
                    argv_index: f.argv_index,
                    path: f.path.clone(),
                    recorded: was.clone(),
                    now: cur.clone(),
                });
            }
        }
    }
    out
}

impl CodeChange {
    /// One line naming the file: `trainer argv[1] /abs/train.py changed
    /// since r01 was recorded (blake3 1a2b3c4d5e6f → 9f8e7d6c5b4a)`.
    pub fn line(&self) -> String {
        let short = |h: &str| h.get(..12).unwrap_or(h).to_string();
        format!(
            "{} argv[{}] {} {} since {} was recorded (blake3 {} → {})",
            self.role,
            self.argv_index,
            self.path,
            if self.now.is_some() {
                "changed"
            } else {
                "is missing"
            },
            self.round_id,
            short(&self.recorded),
            self.now.as_deref().map(short).unwrap_or_else(|| "-".into())
        )
    }
}
