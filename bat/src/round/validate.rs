//! The checks a round directory must pass before it is committed. Every
//! refusal is a [`RoundCheck`] naming the check and the file.
//!
//! In order:
//! 1. `manifest_digest`: `data/manifest.json`'s `train.sha256` equals the
//!    sha256 of `data/train.jsonl`;
//! 2. `round_verify`: the dataset verifier (§C.8 plus prompts and reward
//!    contracts) with the pack;
//! 3. `candidate`: the model identity of `candidate/` can be computed (§G);
//! 4. `binding`: `candidate-eval/checkpoint-binding.json`, the summary, the
//!    eval request and receipt (when present) and `gate.json`'s candidate
//!    all name that identity;
//! 5. `raw_evaluation`: the summary and receipt name the raw file's sha256;
//!    the summary is rebuilt from the raw evaluation and must equal
//!    `summary.json` byte for byte (bat layout: the raw digest must equal
//!    the one `round.json` recorded);
//! 6. `summary`: the candidate and baseline summaries pass the gate's
//!    acceptance (finite scores, …);
//! 7. `training_health`: `training-health.json` is JSON; `layout`:
//!    `step-metrics.jsonl`, when present, is valid step metrics
//!    ([`super::steps`]);
//! 8. `firewall`: `data/train.jsonl` passes the leakage scan with held-out
//!    markers = the evaluation's task ids (those of stripped length ≥ 4,
//!    casefolded) plus the markers file given;
//! 9. `gate` / `prescription`: recomputed from the baseline and candidate
//!    summaries and the health file, they equal `gate.json` and
//!    `prescription.json` byte for byte.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bat_ledger::{Ledger, Mode};

use super::check::{CheckCtor, RoundCheck};
use super::layout::{Layout, RoundLayout};
use super::promote::PromotedRound;
use super::{CommitRoundOptions, RoundError};
use bat_contract::binding::model_identity;
use bat_contract::firewall::{casefold, parse_markers, scan_bytes, LeakageRules};
use bat_contract::gate::{evaluate_gate, training_healthy, GateModel, GateOutcome};
use bat_contract::json::{self, Value};
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::prompt::Prompter;
use bat_contract::summary::build_summary;

/// Digests of the raw evaluator output (its bytes never enter a commit).
#[derive(Debug, Clone)]
pub struct RawEval {
    /// sha256 hex of the bytes (what the summary and receipt name).
    pub sha256: String,
    /// BLAKE3 hex of the bytes (the private-area file name).
    pub blake3: Option<String>,
    /// Byte length, when the bytes were read.
    pub len: Option<u64>,
    /// The bytes (reference layout only).
    pub bytes: Option<Vec<u8>>,
}

/// Where the baseline summary came from.
#[derive(Debug, Clone)]
pub enum BaselineSource {
    /// Given explicitly.
    File(PathBuf),
    /// The promoted round of the branch.
    Promoted(PromotedRound),
}

/// A round that passed every check.
#[derive(Debug, Clone)]
pub struct CheckedRound {
    /// Round id (from the manifest).
    pub round_id: String,
    /// The stage trained this round (the manifest's target).
    pub target_stage: String,
    /// sha256 of `train.jsonl`.
    pub train_sha256: String,
    /// Number of training rows.
    pub rows: u64,
    /// The candidate's model identity.
    pub candidate_identity: String,
    /// The candidate summary.
    pub summary: Value,
    /// The baseline summary's bytes.
    pub baseline_bytes: Vec<u8>,
    /// Where they came from.
    pub baseline_source: BaselineSource,
    /// The recomputed gate (equal to the files).
    pub gate: GateOutcome,
    /// The parsed health file.
    pub health: Value,
    /// The raw evaluation.
    pub raw: RawEval,
    /// sha256 of the held-out markers used (CJ of the sorted list).
    pub markers_sha256: String,
    /// How many markers were used.
    pub marker_count: usize,
    /// Files of `candidate/` whose bytes are the raw evaluation's (a
    /// trainer copied it into the model folder; it is then committed as
    /// part of the model).
    pub raw_copies_in_candidate: Vec<String>,
}

fn read(path: &Path) -> Result<Vec<u8>, RoundError> {
    bat_contract::fsutil::read_json_input(path).map_err(RoundError::io(path))
}

fn parse(check: CheckCtor, path: &Path, bytes: &[u8]) -> Result<Value, RoundError> {
    json::parse_bytes(bytes)
        .map_err(|e| RoundError::from(check(path.to_path_buf(), format!("not valid JSON: {e}"))))
}

fn str_at<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in keys {
        cur = cur.get(k)?;
    }
    cur.as_str()
}

/// What the training data checks (1–2) established.
struct TrainingData {
    train: Vec<u8>,
    train_sha: String,
    round_id: String,
    target_stage: String,
    rows: u64,
}

/// The candidate's evaluation documents read by the binding check (4).
struct EvalDocs {
    summary_path: PathBuf,
    summary_bytes: Vec<u8>,
    summary: Value,
    gate_bytes: Vec<u8>,
    receipt_path: PathBuf,
    receipt: Option<Value>,
}

fn pack_err(e: impl std::fmt::Display) -> RoundError {
    RoundError::Pack {
        reason: e.to_string(),
    }
}

/// Run every check on a recognised round directory, in the order of the
/// module docs. `promoted` is the branch's promoted round (the default
/// baseline).
pub fn validate(
    ledger: &Ledger,
    l: &RoundLayout,
    opts: &CommitRoundOptions,
    promoted: Option<&PromotedRound>,
) -> Result<CheckedRound, RoundError> {
    let pack = &opts.pack;
    let data = training_data(l, pack)?;
    let (identity, candidate_files) = candidate_identity(l)?;
    let docs = evaluation_docs(l, &identity)?;
    let raw = raw_evaluation(l, pack, &identity, &docs)?;

    // A trainer that copied the raw evaluation into its model folder makes
    // it part of the candidate (and of its identity); report it.
    let raw_copies_in_candidate: Vec<String> = candidate_files
        .iter()
        .filter(|(_, sha)| *sha == raw.sha256)
        .map(|(p, _)| format!("candidate/{p}"))
        .collect();

    // 6. The baseline summary.
    let (baseline_bytes, baseline_source, baseline_path) =
        baseline_summary(ledger, l, opts, promoted, &data.round_id)?;
    let baseline = parse(
        |path, reason| RoundCheck::Summary { path, reason },
        &baseline_path,
        &baseline_bytes,
    )?;

    // 7. Health.
    let health_bytes = read(&l.health)?;
    let health = parse(
        |path, reason| RoundCheck::TrainingHealth { path, reason },
        &l.health,
        &health_bytes,
    )?;

    // 7b. Step metrics, when the trainer wrote them: a bad line would
    // break every reader of the commit, so it is refused here.
    let steps = l.dir.join(super::steps::STEP_METRICS_PATH);
    if steps.is_file() {
        super::steps::StepMetrics::read(&steps).map_err(|e| {
            RoundError::from(RoundCheck::Layout {
                path: steps.clone(),
                reason: e.to_string(),
            })
        })?;
    }

    let (markers_sha256, marker_count) = firewall(l, opts, &data.train, &docs.summary, &raw)?;
    let outcome = gate(l, pack, (&baseline, &baseline_path), &docs, &health)?;

    Ok(CheckedRound {
        round_id: data.round_id,
        target_stage: data.target_stage,
        train_sha256: data.train_sha,
        rows: data.rows,
        candidate_identity: identity,
        summary: docs.summary,
        baseline_bytes,
        baseline_source,
        gate: outcome,
        health,
        raw,
        markers_sha256,
        marker_count,
        raw_copies_in_candidate,
    })
}

/// Checks 1–2: the manifest names the training data, and the round view's
/// verifier accepts it.
fn training_data(l: &RoundLayout, pack: &Pack) -> Result<TrainingData, RoundError> {
    // 1–2. The training data.
    let train = read(&l.train)?;
    let manifest_bytes = read(&l.manifest)?;
    let manifest = parse(
        |path, reason| RoundCheck::ManifestDigest { path, reason },
        &l.manifest,
        &manifest_bytes,
    )?;
    let train_sha = json::sha256_hex(&train);
    match str_at(&manifest, &["train", "sha256"]) {
        Some(d) if d == train_sha => {}
        Some(d) => {
            return Err(RoundError::from(RoundCheck::ManifestDigest {
                path: l.manifest.clone(),
                reason: format!(
                    "train.sha256 is {d} but {} has sha256 {train_sha}",
                    l.train.display()
                ),
            }))
        }
        None => {
            return Err(RoundError::from(RoundCheck::ManifestDigest {
                path: l.manifest.clone(),
                reason: "train.sha256 is missing".into(),
            }))
        }
    }
    let k = pack.contract().map_err(pack_err)?;
    let prompter = Prompter::new(&k);
    // Each round view (the contract's three-pool one, an ablation's) has its
    // own verifier; the registry recognizes which one the manifest names.
    let verified = super::view::view(super::view::kind_of(&manifest))
        .verify(&k, &prompter, &train, &manifest_bytes)
        .map_err(|e| {
            RoundError::from(RoundCheck::RoundVerify {
                path: l.train.clone(),
                reason: e.to_string(),
            })
        })?;
    let round_id = str_at(&manifest, &["round_id"])
        .ok_or_else(|| {
            RoundError::from(RoundCheck::RoundVerify {
                path: l.manifest.clone(),
                reason: "round_id is missing".into(),
            })
        })?
        .to_string();
    let target_stage = str_at(&manifest, &["target_stage"])
        .ok_or_else(|| {
            RoundError::from(RoundCheck::RoundVerify {
                path: l.manifest.clone(),
                reason: "target_stage is missing".into(),
            })
        })?
        .to_string();
    let rows = match verified.get("rows") {
        Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
        _ => 0,
    };
    Ok(TrainingData {
        train,
        train_sha,
        round_id,
        target_stage,
        rows,
    })
}

/// Check 3: the candidate's model identity and its files `(path, sha256)`.
fn candidate_identity(l: &RoundLayout) -> Result<(String, Vec<(String, String)>), RoundError> {
    // 3. The candidate's identity.
    let ident = model_identity(&l.candidate).map_err(|e| {
        RoundError::from(RoundCheck::Candidate {
            path: l.candidate.clone(),
            reason: e.to_string(),
        })
    })?;
    let candidate_files: Vec<(String, String)> = ident
        .basis
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| {
            Some((
                f.get("path")?.as_str()?.to_string(),
                f.get("sha256")?.as_str()?.to_string(),
            ))
        })
        .collect();
    let identity = ident.model_identity_sha256;
    Ok((identity, candidate_files))
}

/// Check 4: the binding, summary, request, receipt and gate all name the
/// candidate's identity.
fn evaluation_docs(l: &RoundLayout, identity: &str) -> Result<EvalDocs, RoundError> {
    // 4. Everything names that identity.
    let binding_path = l.eval_dir.join("checkpoint-binding.json");
    let binding = parse(
        |path, reason| RoundCheck::Binding { path, reason },
        &binding_path,
        &read(&binding_path)?,
    )?;
    let summary_path = l.eval_dir.join("summary.json");
    let summary_bytes = read(&summary_path)?;
    let summary = parse(
        |path, reason| RoundCheck::Summary { path, reason },
        &summary_path,
        &summary_bytes,
    )?;
    let gate_bytes = read(&l.gate)?;
    let gate_doc = parse(
        |path, reason| RoundCheck::Gate { path, reason },
        &l.gate,
        &gate_bytes,
    )?;
    let mut named = vec![
        (
            binding_path.clone(),
            str_at(&binding, &["model_identity_sha256"]),
        ),
        (
            summary_path.clone(),
            str_at(&summary, &["checkpoint_sha256"]),
        ),
        (
            l.gate.clone(),
            str_at(&gate_doc, &["candidate_checkpoint_sha256"]),
        ),
    ];
    let receipt_path = l.eval_dir.join("receipt.json");
    let receipt = if receipt_path.is_file() {
        Some(parse(
            |path, reason| RoundCheck::Binding { path, reason },
            &receipt_path,
            &read(&receipt_path)?,
        )?)
    } else {
        None
    };
    if let Some(r) = &receipt {
        named.push((receipt_path.clone(), str_at(r, &["checkpoint_sha256"])));
    }
    let request_path = l.eval_dir.join("eval-request.json");
    let request = if request_path.is_file() {
        Some(parse(
            |path, reason| RoundCheck::Binding { path, reason },
            &request_path,
            &read(&request_path)?,
        )?)
    } else {
        None
    };
    if let Some(r) = &request {
        named.push((request_path.clone(), str_at(r, &["checkpoint_sha256"])));
    }
    for (p, v) in named {
        if v != Some(identity) {
            return Err(RoundError::from(RoundCheck::Binding {
                path: p.clone(),
                reason: format!(
                    "names checkpoint {} but the candidate model {} has identity {identity}",
                    v.unwrap_or("(none)"),
                    l.candidate.display()
                ),
            }));
        }
    }
    Ok(EvalDocs {
        summary_path,
        summary_bytes,
        summary,
        gate_bytes,
        receipt_path,
        receipt,
    })
}

/// Check 5: the raw evaluation, and the summary and receipt naming it.
fn raw_evaluation(
    l: &RoundLayout,
    pack: &Pack,
    identity: &str,
    docs: &EvalDocs,
) -> Result<RawEval, RoundError> {
    let EvalDocs {
        summary_path,
        summary_bytes,
        summary,
        receipt_path,
        receipt,
        ..
    } = docs;
    // 5. The raw evaluation.
    let raw = match (&l.layout, &l.raw_eval) {
        (Layout::Reference, Some(raw_path)) => {
            let bytes = read(raw_path)?;
            let sha = json::sha256_hex(&bytes);
            let rebuilt = build_summary(&bytes, identity, pack, SumMode::Plain).map_err(|e| {
                RoundError::from(RoundCheck::RawEvaluation {
                    path: Path::to_path_buf(raw_path),
                    reason: e.to_string(),
                })
            })?;
            if json::pretty_json_file(&rebuilt).as_bytes() != summary_bytes.as_slice() {
                return Err(RoundError::from(RoundCheck::Summary {
                    path: summary_path.clone(),
                    reason: format!(
                        "differs from the summary recomputed from {}",
                        raw_path.display()
                    ),
                }));
            }
            RawEval {
                blake3: Some(bat_ledger::ObjectId::of_bytes(&bytes).to_hex()),
                len: Some(bytes.len() as u64),
                sha256: sha,
                bytes: Some(bytes),
            }
        }
        _ => {
            let rj_path = l
                .round_json
                .clone()
                .unwrap_or_else(|| l.dir.join("round.json"));
            let rj = parse(
                |path, reason| RoundCheck::RawEvaluation { path, reason },
                &rj_path,
                &read(&rj_path)?,
            )?;
            let sha = str_at(&rj, &["raw_evaluation", "sha256"]).ok_or_else(|| {
                RoundError::from(RoundCheck::RawEvaluation {
                    path: rj_path.clone(),
                    reason: "raw_evaluation.sha256 is missing".into(),
                })
            })?;
            RawEval {
                sha256: sha.to_string(),
                blake3: str_at(&rj, &["raw_evaluation", "blake3"]).map(str::to_string),
                len: rj
                    .get("raw_evaluation")
                    .and_then(|r| r.get("bytes"))
                    .and_then(|b| match b {
                        Value::Int(n) => u64::try_from(*n).ok(),
                        _ => None,
                    }),
                bytes: None,
            }
        }
    };
    if str_at(summary, &["raw_evaluation_sha256"]) != Some(raw.sha256.as_str()) {
        return Err(RoundError::from(RoundCheck::RawEvaluation {
            path: summary_path.clone(),
            reason: format!(
                "raw_evaluation_sha256 does not name the raw evaluation ({})",
                raw.sha256
            ),
        }));
    }
    if let Some(r) = &receipt {
        if str_at(r, &["raw_evaluation_sha256"]) != Some(raw.sha256.as_str()) {
            return Err(RoundError::from(RoundCheck::RawEvaluation {
                path: receipt_path.clone(),
                reason: format!(
                    "raw_evaluation_sha256 does not name the raw evaluation ({})",
                    raw.sha256
                ),
            }));
        }
        let ssha = json::sha256_hex(summary_bytes);
        if str_at(r, &["summary_sha256"]) != Some(ssha.as_str()) {
            return Err(RoundError::from(RoundCheck::Summary {
                path: receipt_path.clone(),
                reason: format!(
                    "summary_sha256 does not name {} ({ssha})",
                    summary_path.display()
                ),
            }));
        }
    }
    Ok(raw)
}

/// Check 8: the firewall scan of the training data; returns the markers'
/// digest and count.
fn firewall(
    l: &RoundLayout,
    opts: &CommitRoundOptions,
    train: &[u8],
    summary: &Value,
    raw: &RawEval,
) -> Result<(String, usize), RoundError> {
    let pack = &opts.pack;
    // 8. Firewall.
    let mut markers = BTreeSet::new();
    if let Some(cells) = summary.get("cells").and_then(Value::as_array) {
        for c in cells {
            if let Some(t) = c.get("task_id").and_then(Value::as_str) {
                if t.trim().chars().count() >= 4 {
                    markers.insert(casefold(t));
                }
            }
        }
    }
    if let Some(raw_bytes) = &raw.bytes {
        if let Ok(v) = json::parse_bytes(raw_bytes) {
            for c in v
                .get("cells")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(t) = c.get("task_id").and_then(Value::as_str) {
                    if t.trim().chars().count() >= 4 {
                        markers.insert(casefold(t));
                    }
                }
            }
        }
    }
    if let Some(mf) = &opts.heldout_markers {
        let given = parse_markers(&read(mf)?).map_err(|e| {
            RoundError::from(RoundCheck::Markers {
                path: Path::to_path_buf(mf),
                reason: e.to_string(),
            })
        })?;
        markers.extend(given);
    }
    let markers: Vec<String> = markers.into_iter().collect();
    let rules = LeakageRules::from_pack(pack).map_err(pack_err)?;
    let violations = scan_bytes(train, &markers, &rules).map_err(|e| {
        RoundError::from(RoundCheck::Firewall {
            path: l.train.clone(),
            reason: e.to_string(),
        })
    })?;
    if !violations.is_empty() {
        let shown: Vec<String> = violations
            .iter()
            .take(5)
            .map(|v| format!("line {} {} {}", v.line, v.field, v.code))
            .collect();
        return Err(RoundError::from(RoundCheck::Firewall {
            path: l.train.clone(),
            reason: format!(
                "{} leakage violation(s): {}{}",
                violations.len(),
                shown.join("; "),
                if violations.len() > 5 { "; …" } else { "" }
            ),
        }));
    }
    let marker_value = Value::Array(markers.iter().map(|m| Value::Str(m.clone())).collect());
    let markers_sha256 = json::digest(&marker_value).unwrap_or_default();
    Ok((markers_sha256, markers.len()))
}

/// Check 9: the gate and prescription recomputed from the summaries and the
/// health file equal the round's files.
fn gate(
    l: &RoundLayout,
    pack: &Pack,
    (baseline, baseline_path): (&Value, &Path),
    docs: &EvalDocs,
    health: &Value,
) -> Result<GateOutcome, RoundError> {
    let (summary, summary_path) = (&docs.summary, &docs.summary_path);
    // 9. Gate and prescription.
    let model = GateModel::from_pack(pack).map_err(pack_err)?;
    let outcome =
        evaluate_gate(baseline, summary, training_healthy(health), &model).map_err(|e| {
            RoundError::from(RoundCheck::Summary {
                path: summary_path.clone(),
                reason: format!("{e} (gated against baseline {})", baseline_path.display()),
            })
        })?;
    if json::pretty_json_file(&outcome.gate).as_bytes() != docs.gate_bytes.as_slice() {
        return Err(RoundError::from(RoundCheck::Gate { path: l.gate.clone(), reason: format!(
                "differs from the gate recomputed from baseline {} and candidate {} (recomputed status: {})",
                baseline_path.display(),
                summary_path.display(),
                bat_contract::vocabulary::GateStatus::from_promoted(outcome.promoted)
            ) }));
    }
    if json::pretty_json_file(&outcome.prescription).as_bytes() != read(&l.prescription)?.as_slice()
    {
        return Err(RoundError::from(RoundCheck::Prescription {
            path: l.prescription.clone(),
            reason: "differs from the prescription recomputed from the summaries".into(),
        }));
    }
    Ok(outcome)
}

/// The baseline summary (see the module docs of [`super`]): bytes, source
/// and a path for messages.
fn baseline_summary(
    ledger: &Ledger,
    l: &RoundLayout,
    opts: &CommitRoundOptions,
    promoted: Option<&PromotedRound>,
    round_id: &str,
) -> Result<(Vec<u8>, BaselineSource, PathBuf), RoundError> {
    if let Some(p) = &opts.baseline_summary {
        return Ok((read(p)?, BaselineSource::File(p.clone()), p.clone()));
    }
    if let Some(p) = promoted {
        let c = ledger.read_commit(&p.commit)?;
        let entry = ledger.lookup_path(&c.tree, "candidate-eval/summary.json")?;
        if let Some(e) = entry.filter(|e| e.mode == Mode::File) {
            let bytes = ledger.read_bytes(&e.id)?;
            let label = PathBuf::from(format!(
                "{}:candidate-eval/summary.json (promoted round {})",
                p.commit.0.short(),
                p.round_id
            ));
            return Ok((bytes, BaselineSource::Promoted(p.clone()), label));
        }
    }
    let mut tries = vec![l.dir.join("baseline-summary.json")];
    let abs = std::fs::canonicalize(&l.dir).unwrap_or_else(|_| l.dir.clone());
    if let Some(parent) = abs.parent() {
        tries.push(parent.join("baseline-eval").join("summary.json"));
    }
    for p in tries {
        if p.is_file() {
            return Ok((read(&p)?, BaselineSource::File(p.clone()), p));
        }
    }
    Err(RoundError::NoBaseline {
        round_id: round_id.to_string(),
        dir: l.dir.clone(),
    })
}
