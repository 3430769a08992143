//! Verifying a replayed round against its record: every artifact by object
//! id (exact, the default) or, when a tolerance was asked for, the
//! candidate's scores within it. See the module docs of
//! [`super`] for which files are artifacts.

use std::collections::BTreeMap;
use std::path::Path;

use bat_ledger::Ledger;

use super::plan::Original;
use super::{io_err, ReplayError, RoundVerify, VerifyMode, SCORE_KEYS};
use bat_contract::json::Value;

/// Files of a round folder that are artifacts, relative (see the module
/// docs).
pub(super) fn artifact_files(root: &Path) -> Result<BTreeMap<String, String>, ReplayError> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, String>) -> Result<(), ReplayError> {
        let rd = std::fs::read_dir(d).map_err(io_err(d))?;
        for e in rd {
            let e = e.map_err(io_err(d))?;
            let p = e.path();
            let ft = e.file_type().map_err(io_err(&p))?;
            if ft.is_dir() {
                walk(base, &p, out)?;
            } else if ft.is_file() {
                let rel = p
                    .strip_prefix(base)
                    .map(|r| r.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                let bytes = std::fs::read(&p).map_err(io_err(&p))?;
                out.insert(rel, bat_ledger::ObjectId::of_bytes(&bytes).to_hex());
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out)?;
    // The raw evaluator output never enters a commit (its digest does,
    // through the summary and receipt).
    out.remove("candidate-eval/raw-evaluation.json");
    Ok(out)
}

/// bat's own records in a round tree, which are not artifacts.
pub(super) const NOT_ARTIFACTS: [&str; 4] = [
    "round.json",
    "provenance.json",
    "firewall.json",
    "baseline-summary.json",
];

/// Whether a round tree path is an artifact: not one of bat's records and
/// not a child log (`logs/…`, output of the run, not a result of it; a
/// replay's logs are written outside its round folder).
pub(super) fn is_artifact(path: &str) -> bool {
    let log_dir = crate::round::meta::LOG_TREE_DIR;
    let is_log = path
        .strip_prefix(log_dir)
        .is_some_and(|rest| rest.starts_with('/'));
    !NOT_ARTIFACTS.contains(&path) && !is_log
}

/// How a verify judges differences.
pub(super) struct Criteria {
    /// Exact (the default) or by scores (`--tolerance`).
    pub mode: VerifyMode,
    /// Per-score tolerance in [`VerifyMode::Tolerance`].
    pub tolerance: f64,
}

pub(super) fn verify_round(
    ledger: &Ledger,
    o: &Original,
    root: &Path,
    Criteria { mode, tolerance }: Criteria,
    original_scores: &BTreeMap<String, f64>,
    scores: &BTreeMap<String, f64>,
) -> Result<RoundVerify, ReplayError> {
    let mut original = BTreeMap::new();
    for f in ledger.walk_files(&o.tree)? {
        if is_artifact(&f.path) {
            original.insert(f.path.clone(), f.id.to_hex());
        }
    }
    let replayed = artifact_files(root)?;
    let mut paths: Vec<&String> = original.keys().chain(replayed.keys()).collect();
    paths.sort();
    paths.dedup();
    // Pipeline order: the first difference is the earliest step that
    // diverged (data, training, candidate, its evaluation, the gate).
    let rank = |p: &str| {
        [
            "data/",
            "training-health.json",
            "candidate/",
            "candidate-eval/",
            "gate.json",
            "prescription.json",
        ]
        .iter()
        .position(|pre| p.starts_with(pre))
        .unwrap_or(6)
    };
    paths.sort_by_key(|p| (rank(p), p.to_string()));
    let mut identical = 0;
    let mut differing = Vec::new();
    for p in &paths {
        match (original.get(*p), replayed.get(*p)) {
            (Some(a), Some(b)) if a == b => identical += 1,
            _ => differing.push((*p).clone()),
        }
    }
    let mut max_delta: f64 = 0.0;
    let mut missing_score = false;
    for k in SCORE_KEYS {
        match (original_scores.get(k), scores.get(k)) {
            (Some(a), Some(b)) => max_delta = max_delta.max((a - b).abs()),
            (None, None) => {}
            _ => missing_score = true,
        }
    }
    let bit_identical = differing.is_empty();
    let passed = match mode {
        VerifyMode::Exact => bit_identical,
        VerifyMode::Tolerance => bit_identical || (!missing_score && max_delta <= tolerance),
    };
    Ok(RoundVerify {
        mode,
        compared: paths.len(),
        identical,
        differing,
        max_score_delta: max_delta,
        tolerance: if mode == VerifyMode::Exact {
            0.0
        } else {
            tolerance
        },
        bit_identical,
        passed,
        note: (passed && !bit_identical).then(|| super::tolerance_note(tolerance)),
    })
}

/// The scores of a summary: `overall`, `task`, `agentic` and the stages.
pub fn summary_scores(summary: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let num = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    if let Some(m) = summary.get("means").and_then(Value::as_object) {
        for k in ["overall", "task", "agentic"] {
            if let Some(x) = m.get(k).and_then(num) {
                out.insert(k.to_string(), x);
            }
        }
    }
    if let Some(s) = summary.get("stage_scores").and_then(Value::as_object) {
        for (k, v) in s.iter() {
            if let Some(x) = num(v) {
                out.insert(k.clone(), x);
            }
        }
    }
    out
}

/// Whether an argv template runs the built-in simulator (`{bat} sim …`).
pub fn is_simulator(template: &[String]) -> bool {
    template.first().map(String::as_str) == Some(crate::round::campaign::BAT_PLACEHOLDER)
        && template.get(1).map(String::as_str) == Some("sim")
}
