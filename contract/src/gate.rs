//! The promotion gate, target selection and round prescription (contract §E).

use std::collections::HashSet;

use super::fasthash::FastHash;
use super::json::{Map, Value};
use super::numeric::{isclose, to_float};
use super::pack::Pack;
use super::summary::{finite_stage_scores_at, show_value, Detail, StageModel, SummaryError};

/// Why the gate could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// A contract check failed; `code` is the contract's error code.
    #[error("{}", crate::summary::describe(code, detail.as_deref()))]
    Invalid {
        /// The contract's error code, e.g. `paired_cells_mismatch`.
        code: String,
        /// Where the check failed and what it found, when known.
        detail: Option<Box<Detail>>,
    },
    /// An input on which the reference crashes (KeyError, TypeError,
    /// OverflowError) rather than raising a contract code.
    #[error("{kind}: {message}")]
    Crash {
        /// The Python exception type the reference would raise.
        kind: String,
        /// What was wrong.
        message: String,
    },
    /// The pack lacks what the gate needs.
    #[error("pack is unusable for the gate: {reason}")]
    Pack {
        /// What is missing.
        reason: String,
    },
}

impl bat_error::Diagnostic for GateError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            GateError::Invalid { code, .. } => Some(code.clone()),
            _ => None,
        }
    }
}

impl From<SummaryError> for GateError {
    fn from(e: SummaryError) -> Self {
        match e {
            SummaryError::Invalid { code, detail } => GateError::Invalid { code, detail },
            SummaryError::Pack { reason } => GateError::Pack { reason },
            SummaryError::Json { reason } => GateError::Crash {
                kind: "JSONDecodeError".into(),
                message: reason,
            },
        }
    }
}

fn invalid(code: &str) -> GateError {
    GateError::Invalid {
        code: code.to_string(),
        detail: None,
    }
}

/// A contract failure naming the summary field, its value and what is allowed.
fn invalid_at(code: &str, field: &str, value: Option<&Value>, allowed: &str) -> GateError {
    GateError::Invalid {
        code: code.to_string(),
        detail: Some(Box::new(Detail::new(field, value, allowed))),
    }
}

/// The gate's thresholds, read from the pack's `gate_thresholds`.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// `maximum_overall_drop`
    pub maximum_overall_drop: f64,
    /// `maximum_task_drop`
    pub maximum_task_drop: f64,
    /// `maximum_per_track_drop`
    pub maximum_per_track_drop: f64,
    /// `maximum_late_stage_drop`
    pub maximum_late_stage_drop: f64,
    /// `catastrophic_overall_drop` (strict bound)
    pub catastrophic_overall_drop: f64,
    /// The pack's object as written, echoed into `gate.json`.
    pub raw: Value,
}

/// Everything the gate reads from a pack.
#[derive(Debug, Clone)]
pub struct GateModel {
    /// Stages and weights.
    pub stages: StageModel,
    /// The thresholds.
    pub thresholds: Thresholds,
    /// The late stages checked by `late_stage_regression`: the last three
    /// stages of the pack (S3, S4, S5 for the reference's structure).
    pub late_stages: Vec<String>,
    /// `prescription_optimizer`, echoed verbatim into the prescription.
    pub optimizer: Value,
}

impl GateModel {
    /// Read the gate's constants from a pack.
    pub fn from_pack(pack: &Pack) -> Result<GateModel, GateError> {
        let stages = StageModel::from_pack(pack)?;
        let raw = pack
            .get("gate_thresholds")
            .filter(|v| v.as_object().is_some())
            .cloned()
            .ok_or_else(|| GateError::Pack {
                reason: "`gate_thresholds` is missing".into(),
            })?;
        let num = |key: &str| -> Result<f64, GateError> {
            raw.get(key)
                .filter(|v| matches!(v, Value::Int(_) | Value::Float(_)))
                .and_then(|v| to_float(v).ok())
                .ok_or_else(|| GateError::Pack {
                    reason: format!("`gate_thresholds.{key}` is missing or not a number"),
                })
        };
        let thresholds = Thresholds {
            maximum_overall_drop: num("maximum_overall_drop")?,
            maximum_task_drop: num("maximum_task_drop")?,
            maximum_per_track_drop: num("maximum_per_track_drop")?,
            maximum_late_stage_drop: num("maximum_late_stage_drop")?,
            catastrophic_overall_drop: num("catastrophic_overall_drop")?,
            raw: raw.clone(),
        };
        let optimizer = pack
            .get("prescription_optimizer")
            .filter(|v| v.as_object().is_some())
            .cloned()
            .ok_or_else(|| GateError::Pack {
                reason: "`prescription_optimizer` is missing".into(),
            })?;
        let n = stages.stages.len();
        let late_stages = stages.stages[n.saturating_sub(3)..].to_vec();
        Ok(GateModel {
            stages,
            thresholds,
            late_stages,
            optimizer,
        })
    }
}

/// Python's `isinstance(v, (int, float))`; a bool passes.
fn is_number(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_) | Value::BigInt(_) | Value::Float(_) | Value::Bool(_)
    )
}

/// `float(v)` where the reference would raise OverflowError/TypeError uncaught.
fn float_or_crash(v: &Value) -> Result<f64, GateError> {
    to_float(v).map_err(|e| GateError::Crash {
        kind: "ValueError".into(),
        message: e.to_string(),
    })
}

/// §E.1 acceptance of one summary.
fn accept<'a>(value: &'a Value, model: &GateModel) -> Result<&'a Map, GateError> {
    let Some(m) = value.as_object() else {
        return Err(invalid_at(
            "eval_summary_invalid",
            "(the document)",
            Some(value),
            "a bat_eval_summary object",
        ));
    };
    for (field, want) in [("artifact_kind", "bat_eval_summary"), ("status", "valid")] {
        if m.get(field).and_then(Value::as_str) != Some(want) {
            return Err(invalid_at(
                "eval_summary_invalid",
                field,
                m.get(field),
                &format!("\"{want}\""),
            ));
        }
    }
    let means = m.get("means").and_then(Value::as_object).ok_or_else(|| {
        invalid_at(
            "eval_means_invalid",
            "means",
            m.get("means"),
            "an object with numbers task, agentic and overall",
        )
    })?;
    for key in ["task", "agentic", "overall"] {
        let field = format!("means.{key}");
        match means.get(key) {
            Some(v) if is_number(v) => {
                if !float_or_crash(v)?.is_finite() {
                    return Err(invalid_at(
                        "eval_means_invalid",
                        &field,
                        Some(v),
                        "a finite number",
                    ));
                }
            }
            other => {
                return Err(invalid_at(
                    "eval_means_invalid",
                    &field,
                    other,
                    "a finite number",
                ))
            }
        }
    }
    finite_stage_scores_at(m.get("stage_scores"), &model.stages, "stage_scores")?;
    match m.get("checkpoint_sha256") {
        // Python's len() counts code points.
        Some(Value::Str(s)) if s.chars().count() == 64 => {}
        other => {
            return Err(invalid_at(
                "eval_checkpoint_binding_invalid",
                "checkpoint_sha256",
                other,
                "the evaluated checkpoint's sha256, 64 hex characters",
            ))
        }
    }
    let cells_ok = matches!(m.get("cells"), Some(Value::Array(a)) if !a.is_empty());
    if !cells_ok {
        return Err(invalid_at(
            "eval_pairing_evidence_invalid",
            "cells",
            m.get("cells"),
            "a non-empty list of the summary's cells",
        ));
    }
    let Some(tracks) = m
        .get("track_scores")
        .and_then(Value::as_object)
        .filter(|t| !t.is_empty())
    else {
        return Err(invalid_at(
            "eval_pairing_evidence_invalid",
            "track_scores",
            m.get("track_scores"),
            "a non-empty object of per-track scores",
        ));
    };
    for (track, score) in tracks.iter() {
        let ok = match score {
            Value::Int(_) | Value::BigInt(_) | Value::Float(_) => {
                float_or_crash(score)?.is_finite()
            }
            _ => false,
        };
        if !ok {
            return Err(invalid_at(
                "eval_track_scores_invalid",
                &format!("track_scores.{track}"),
                Some(score),
                "a finite number",
            ));
        }
    }
    Ok(m)
}

/// One component of a cell key, normalised so that equality and hashing are
/// Python's (`1 == 1.0 == True`). Borrowed: building 700-cell key sets must
/// not allocate per cell.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyPart<'a> {
    Null,
    Int(i128),
    BigInt(&'a str),
    Float(u64),
    Str(&'a str),
}

fn key_part(v: &Value) -> Result<KeyPart<'_>, GateError> {
    Ok(match v {
        Value::Null => KeyPart::Null,
        Value::Bool(b) => KeyPart::Int(i128::from(*b)),
        Value::Int(i) => KeyPart::Int(i128::from(*i)),
        Value::BigInt(s) => KeyPart::BigInt(s),
        Value::Float(x) => {
            if x.fract() == 0.0 && x.abs() < 1e30 {
                // Integral floats equal the int of the same value; -0.0 == 0.
                KeyPart::Int(*x as i128)
            } else {
                KeyPart::Float(x.to_bits())
            }
        }
        Value::Str(s) => KeyPart::Str(s),
        Value::Array(_) | Value::Object(_) => {
            return Err(GateError::Crash {
                kind: "TypeError".into(),
                message: "unhashable cell identity field".into(),
            })
        }
    })
}

type CellKey<'a> = [KeyPart<'a>; 3];

/// `paired_cells_mismatch`, naming the first cell (in file order) that one
/// summary has and the other lacks.
fn cells_mismatch(
    b: &Map,
    c: &Map,
    bk: &HashSet<CellKey<'_>, FastHash>,
    ck: &HashSet<CellKey<'_>, FastHash>,
) -> GateError {
    let first_missing = |m: &Map, other: &HashSet<CellKey<'_>, FastHash>| {
        m.get("cells")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(_, cell)| {
                cell.as_object()
                    .and_then(|o| cell_key(o).ok())
                    .is_some_and(|k| !other.contains(&k))
            })
            .map(|(i, cell)| {
                let id = |k: &str| cell.get(k).map_or_else(|| "null".into(), show_value);
                format!(
                    "cell {i} ({}, {}, repeat {})",
                    id("track"),
                    id("task_id"),
                    id("repeat")
                )
            })
    };
    let value = match (first_missing(b, ck), first_missing(c, bk)) {
        (Some(x), _) => format!("the baseline's {x} is not in the candidate"),
        (None, Some(y)) => format!("the candidate's {y} is not in the baseline"),
        (None, None) => "the cell sets differ".to_string(),
    };
    GateError::Invalid {
        code: "paired_cells_mismatch".to_string(),
        detail: Some(Box::new(Detail {
            cell: None,
            field: "cells".to_string(),
            value,
            allowed: "the same (track, task_id, repeat) cells in both evaluations".to_string(),
        })),
    }
}

fn cell_keys(m: &Map) -> Result<HashSet<CellKey<'_>, FastHash>, GateError> {
    let cells = m
        .get("cells")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut out = HashSet::with_capacity_and_hasher(cells.len(), FastHash::default());
    for cell in cells {
        let c = cell.as_object().ok_or_else(|| GateError::Crash {
            kind: "TypeError".into(),
            message: "summary cell is not an object".into(),
        })?;
        out.insert(cell_key(c)?);
    }
    Ok(out)
}

/// A summary cell's (track, task_id, repeat).
fn cell_key(c: &Map) -> Result<CellKey<'_>, GateError> {
    let get = |k: &str| -> Result<KeyPart<'_>, GateError> {
        key_part(c.get(k).ok_or_else(|| GateError::Crash {
            kind: "KeyError".into(),
            message: format!("'{k}'"),
        })?)
    };
    Ok([get("track")?, get("task_id")?, get("repeat")?])
}

/// The selection reason of [`select_target`].
pub const REASON_REGRESSION: &str = "largest_positive_regression";
/// The selection reason of [`select_target`] when no positive regression counts.
pub const REASON_LOWEST: &str = "lowest_candidate_stage";

/// §E.3: the next target stage and the reason. Both stage maps go through the
/// stage check first.
pub fn select_target(
    baseline_stages: Option<&Value>,
    candidate_stages: Option<&Value>,
    promoted: bool,
    model: &StageModel,
) -> Result<(String, &'static str), GateError> {
    let b = finite_stage_scores_at(baseline_stages, model, "baseline stage_scores")?;
    let c = finite_stage_scores_at(candidate_stages, model, "candidate stage_scores")?;
    Ok(select_target_scores(&b, &c, promoted, model))
}

/// [`select_target`] on already-checked scores in stage order.
pub fn select_target_scores(
    b: &[f64],
    c: &[f64],
    promoted: bool,
    model: &StageModel,
) -> (String, &'static str) {
    if !promoted {
        let regression: Vec<f64> = b.iter().zip(c).map(|(x, y)| x - y).collect();
        let maximum =
            regression
                .iter()
                .copied()
                .filter(|r| *r > 0.0)
                .fold(None, |m: Option<f64>, r| {
                    // Python max() keeps the first of equal values; for floats that
                    // only matters for the sign of zero, which cannot be positive.
                    Some(match m {
                        Some(m) if m >= r => m,
                        _ => r,
                    })
                });
        if let Some(maximum) = maximum {
            if let Some(i) = regression.iter().position(|r| isclose(*r, maximum, 1e-12)) {
                return (model.stages[i].clone(), REASON_REGRESSION);
            }
        }
    }
    let minimum = c
        .iter()
        .copied()
        .fold(f64::INFINITY, |m, x| if x < m { x } else { m });
    let i = c
        .iter()
        .position(|x| isclose(*x, minimum, 1e-12))
        .unwrap_or(0);
    (model.stages[i].clone(), REASON_LOWEST)
}

/// The training-health decision for a parsed health file: an object whose
/// `status` is exactly the string `"passed"`.
pub fn training_healthy(health: &Value) -> bool {
    health.get("status").and_then(Value::as_str) == Some("passed")
}

/// Why a gate held, one sentence per failed check, read from a `gate.json`
/// document (its `checks`, `deltas` and `thresholds`): which measure dropped,
/// by how much, and the allowed drop. Empty when every check passed (or the
/// document has no checks).
pub fn hold_reasons(gate: &Value) -> Vec<String> {
    let num = |v: Option<&Value>| v.and_then(|v| to_float(v).ok());
    let fmt = |x: Option<f64>| x.map_or_else(|| "?".to_string(), |x| format!("{x:.4}"));
    let deltas = gate.get("deltas");
    let delta = |k: &str| num(deltas.and_then(|d| d.get(k)));
    let limit = |k: &str| fmt(num(gate.get("thresholds").and_then(|t| t.get(k))));
    // The largest drop among the members of a `deltas` object (the last
    // `last` of them, in key order, when given).
    let worst = |k: &str, last: Option<usize>| -> Option<(String, f64)> {
        let m = deltas.and_then(|d| d.get(k)).and_then(Value::as_object)?;
        let skip = last.map_or(0, |n| m.len().saturating_sub(n));
        let mut keyed: Vec<(&String, &Value)> = m.iter().collect();
        keyed.sort_by(|a, b| a.0.cmp(b.0));
        keyed
            .into_iter()
            .skip(skip)
            .filter_map(|(name, v)| num(Some(v)).map(|x| (name.clone(), x)))
            .fold(None, |best, (name, x)| match best {
                Some((_, b)) if b >= x => best,
                _ => Some((name, x)),
            })
    };
    let Some(checks) = gate.get("checks").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (check, ok) in checks.iter() {
        if ok.is_true() {
            continue;
        }
        let why = match check.as_str() {
            "training_health" => {
                "training health: the trainer's training-health.json does not say status \"passed\""
                    .to_string()
            }
            "overall_noninferiority" => format!(
                "overall score dropped {} (allowed at most {})",
                fmt(delta("overall_drop")),
                limit("maximum_overall_drop")
            ),
            "task_noninferiority" => format!(
                "task score dropped {} (allowed at most {})",
                fmt(delta("task_drop")),
                limit("maximum_task_drop")
            ),
            "per_track_regression" => match worst("track_drops", None) {
                Some((t, x)) => format!(
                    "track {t} dropped {} (allowed at most {})",
                    fmt(Some(x)),
                    limit("maximum_per_track_drop")
                ),
                None => "a track regressed beyond maximum_per_track_drop".to_string(),
            },
            "late_stage_regression" => match worst("stage_drops", Some(3)) {
                Some((s, x)) => format!(
                    "late stage {s} dropped {} (allowed at most {})",
                    fmt(Some(x)),
                    limit("maximum_late_stage_drop")
                ),
                None => "a late stage regressed beyond maximum_late_stage_drop".to_string(),
            },
            "catastrophic_forgetting" => format!(
                "catastrophic forgetting: overall score dropped {} (must stay below {})",
                fmt(delta("overall_drop")),
                limit("catastrophic_overall_drop")
            ),
            "paired_cells" => "the two evaluations did not cover the same cells".to_string(),
            other => format!("check {other} failed"),
        };
        out.push(why);
    }
    out
}

/// The gate's result.
#[derive(Debug, Clone)]
pub struct GateOutcome {
    /// `gate.json`'s document.
    pub gate: Value,
    /// `prescription.json`'s document.
    pub prescription: Value,
    /// Whether the candidate was promoted.
    pub promoted: bool,
    /// The prescribed target stage.
    pub target_stage: String,
    /// The selection reason.
    pub selection_reason: &'static str,
}

impl GateOutcome {
    /// The CLI's stdout document `{"gate": …, "prescription": …}`.
    pub fn stdout_document(&self) -> Value {
        Value::Object(
            Map::new()
                .with("gate", self.gate.clone())
                .with("prescription", self.prescription.clone()),
        )
    }
}

/// §E: accept both summaries, pair them, run the seven checks, select the
/// next target and build the gate and prescription documents.
pub fn evaluate_gate(
    baseline: &Value,
    candidate: &Value,
    training_healthy: bool,
    model: &GateModel,
) -> Result<GateOutcome, GateError> {
    let b = accept(baseline, model)?;
    let c = accept(candidate, model)?;
    let (bk, ck) = (cell_keys(b)?, cell_keys(c)?);
    if bk != ck {
        return Err(cells_mismatch(b, c, &bk, &ck));
    }
    let mean = |m: &Map, k: &str| -> Result<f64, GateError> {
        float_or_crash(
            m.get("means")
                .and_then(|x| x.get(k))
                .unwrap_or(&Value::Null),
        )
    };
    let overall_drop = mean(b, "overall")? - mean(c, "overall")?;
    let task_drop = mean(b, "task")? - mean(c, "task")?;
    let (Some(bt), Some(ct)) = (
        b.get("track_scores").and_then(Value::as_object),
        c.get("track_scores").and_then(Value::as_object),
    ) else {
        return Err(invalid("paired_tracks_mismatch"));
    };
    let bkeys: HashSet<&String> = bt.keys().collect();
    let ckeys: HashSet<&String> = ct.keys().collect();
    if bkeys != ckeys {
        let only = |x: &HashSet<&String>, y: &HashSet<&String>| {
            let mut v: Vec<&str> = x.difference(y).map(|s| s.as_str()).collect();
            v.sort_unstable();
            v.join(", ")
        };
        return Err(GateError::Invalid {
            code: "paired_tracks_mismatch".to_string(),
            detail: Some(Box::new(Detail {
                cell: None,
                field: "track_scores".to_string(),
                value: format!(
                    "tracks only in the baseline: [{}], only in the candidate: [{}]",
                    only(&bkeys, &ckeys),
                    only(&ckeys, &bkeys)
                ),
                allowed: "the same tracks in both evaluations".to_string(),
            })),
        });
    }
    let mut track_drops = Map::new();
    let mut max_track_drop: Option<f64> = None;
    for (t, bv) in bt.iter() {
        let cv = ct.get(t).unwrap_or(&Value::Null);
        let d = float_or_crash(bv)? - float_or_crash(cv)?;
        max_track_drop = Some(match max_track_drop {
            Some(m) if m >= d => m,
            _ => d,
        });
        track_drops.insert(t.clone(), Value::Float(d));
    }
    let sm = &model.stages;
    let bs = finite_stage_scores_at(b.get("stage_scores"), sm, "stage_scores")?;
    let cs = finite_stage_scores_at(c.get("stage_scores"), sm, "stage_scores")?;
    let mut stage_drops = Map::new();
    let mut drops = Vec::with_capacity(sm.stages.len());
    for (i, s) in sm.stages.iter().enumerate() {
        let d = bs[i] - cs[i];
        drops.push(d);
        stage_drops.insert(s.clone(), Value::Float(d));
    }
    let late_max = model
        .late_stages
        .iter()
        .filter_map(|s| sm.stages.iter().position(|x| x == s).map(|i| drops[i]))
        .fold(None, |m: Option<f64>, d| {
            Some(match m {
                Some(m) if m >= d => m,
                _ => d,
            })
        })
        .unwrap_or(0.0);
    let th = &model.thresholds;
    let checks = [
        ("paired_cells", true),
        ("training_health", training_healthy),
        (
            "overall_noninferiority",
            overall_drop <= th.maximum_overall_drop,
        ),
        ("task_noninferiority", task_drop <= th.maximum_task_drop),
        (
            "per_track_regression",
            max_track_drop.unwrap_or(0.0) <= th.maximum_per_track_drop,
        ),
        (
            "late_stage_regression",
            late_max <= th.maximum_late_stage_drop,
        ),
        (
            "catastrophic_forgetting",
            overall_drop < th.catastrophic_overall_drop,
        ),
    ];
    let promoted = checks.iter().all(|(_, ok)| *ok);
    let (target, reason) = select_target_scores(&bs, &cs, promoted, sm);
    let status = if promoted { "promote" } else { "hold" };
    let ck = |m: &Map| m.get("checkpoint_sha256").cloned().unwrap_or(Value::Null);
    let mut checks_map = Map::new();
    for (k, v) in checks {
        checks_map.insert(k, Value::Bool(v));
    }
    let gate = Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_promotion_gate")
            .with("status", status)
            .with("promoted", promoted)
            .with("baseline_checkpoint_sha256", ck(b))
            .with("candidate_checkpoint_sha256", ck(c))
            .with("checks", checks_map)
            .with(
                "deltas",
                Map::new()
                    .with("overall_drop", overall_drop)
                    .with("task_drop", task_drop)
                    .with("track_drops", track_drops)
                    .with("stage_drops", stage_drops),
            )
            .with("thresholds", th.raw.clone()),
    );
    let prescription = Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_round_prescription")
            .with("target_stage", target.as_str())
            .with("selection_reason", reason)
            .with(
                "starting_checkpoint_sha256",
                if promoted { ck(c) } else { ck(b) },
            )
            .with("promotion_status", status)
            .with(
                "pool_rows_per_batch",
                Map::new()
                    .with("s_target", 4)
                    .with("s_mix", 2)
                    .with("e2e", 2),
            )
            .with("optimizer", model.optimizer.clone())
            .with(
                "aggregate_stage_scores",
                c.get("stage_scores").cloned().unwrap_or(Value::Null),
            ),
    );
    Ok(GateOutcome {
        gate,
        prescription,
        promoted,
        target_stage: target,
        selection_reason: reason,
    })
}
