//! The evaluation summary (contract §D): validate an external evaluator's raw
//! output and aggregate it into the BaT-safe summary.

use std::collections::{BTreeMap, HashSet};

use super::json::{sha256_hex, Map, Value};
use super::numeric::{fmean, isclose, to_float, SumMode};
use super::pack::Pack;

/// A failed validation; the message is the contract's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    /// The raw file is not valid JSON (the reference crashes with JSONDecodeError).
    #[error("raw evaluation is not valid JSON: {reason}")]
    Json {
        /// The parser's message.
        reason: String,
    },
    /// A contract check failed.
    #[error("{}", describe_code(code))]
    Invalid {
        /// The contract's error code, e.g. `evaluation_cell_2_invalid`.
        code: String,
    },
    /// The pack lacks what the summary needs.
    #[error("pack is unusable for evaluation: {reason}")]
    Pack {
        /// What is missing.
        reason: String,
    },
}

impl bat_error::Diagnostic for SummaryError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            SummaryError::Invalid { code } => Some(code.clone()),
            _ => None,
        }
    }
}

/// The sentence for an evaluation-summary or gate contract code: what the
/// code says, in words, with the cell index or stage it carries.
pub(crate) fn describe_code(code: &str) -> String {
    if let Some(rest) = code.strip_prefix("evaluation_cell_") {
        let (index, what) = rest.split_once('_').unwrap_or((rest, ""));
        if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
            let problem = match what {
                "invalid" => "is not a valid evaluation cell",
                "identity_invalid" => "has an invalid identity (track, stage or view)",
                "agentic_mismatch" => "has an agentic score that disagrees with its task score",
                _ => "breaks the evaluation contract",
            };
            return format!("evaluation cell {index} {problem}");
        }
    }
    if let Some(stage) = code.strip_suffix("_invalid") {
        if stage.len() == 2 && stage.starts_with('S') {
            return format!("the score of stage {stage} is missing or not a number in [0, 1]");
        }
    }
    let sentence = match code {
        "evaluation_payload_invalid" => "the raw evaluation is not an evaluation payload object",
        "evaluation_cells_missing" => "the raw evaluation has no evaluation cells",
        "evaluation_cell_duplicate" => "two evaluation cells have the same identity",
        "task_score_invalid" => "a task score is missing or not a number in [0, 1]",
        "stage_scores_invalid" => "the stage scores are missing or do not cover the pack's stages",
        "agentic_score_invalid" => "the agentic score is missing or not a number in [0, 1]",
        "applicable_stages_invalid" => "the list of applicable stages is not valid",
        "eval_summary_invalid" => "an evaluation summary is not a valid summary",
        "eval_means_invalid" => "an evaluation summary's means are missing or not numbers",
        "eval_checkpoint_binding_invalid" => {
            "an evaluation summary does not bind the checkpoint it evaluated"
        }
        "eval_pairing_evidence_invalid" => {
            "an evaluation summary lacks the cell evidence that pairs it with the other"
        }
        "eval_track_scores_invalid" => "an evaluation summary's per-track scores are not valid",
        "paired_cells_mismatch" => "the baseline and candidate summaries evaluated different cells",
        "paired_tracks_mismatch" => {
            "the baseline and candidate summaries evaluated different tracks"
        }
        _ => return format!("the evaluation breaks the contract rule {code}"),
    };
    sentence.to_string()
}

pub(crate) fn invalid(code: impl Into<String>) -> SummaryError {
    SummaryError::Invalid { code: code.into() }
}

/// The stage list and weights the evaluation uses, read from a pack.
#[derive(Debug, Clone)]
pub struct StageModel {
    /// Stage ids in order (`S1`..`S5`).
    pub stages: Vec<String>,
    /// `stage_weights[stage]` as floats, in stage order.
    pub weights: Vec<f64>,
}

impl StageModel {
    /// Read `stages` and `stage_weights` from the pack.
    pub fn from_pack(pack: &Pack) -> Result<StageModel, SummaryError> {
        let stages = pack.str_list("stages");
        if stages.is_empty() {
            return Err(SummaryError::Pack {
                reason: "`stages` is missing or empty".into(),
            });
        }
        let weights_obj = pack
            .get("stage_weights")
            .and_then(Value::as_object)
            .ok_or_else(|| SummaryError::Pack {
                reason: "`stage_weights` is missing".into(),
            })?;
        let mut weights = Vec::with_capacity(stages.len());
        for s in &stages {
            let w = weights_obj
                .get(s)
                .filter(|v| matches!(v, Value::Int(_) | Value::Float(_)))
                .and_then(|v| to_float(v).ok())
                .ok_or_else(|| SummaryError::Pack {
                    reason: format!("`stage_weights.{s}` is missing or not a number"),
                })?;
            weights.push(w);
        }
        Ok(StageModel { stages, weights })
    }

    /// The weighted agentic score of stage scores given in stage order:
    /// `sum(score·weight) / sum(weights)` with Python's `sum()`.
    pub fn agentic(&self, scores: &[f64], mode: SumMode) -> f64 {
        let terms: Vec<f64> = scores
            .iter()
            .zip(&self.weights)
            .map(|(s, w)| s * w)
            .collect();
        mode.sum(&terms) / mode.sum(&self.weights)
    }
}

/// The reference's `unit(v)`: a non-bool value whose Python `float()` is
/// finite and in [0, 1]. `label` names the error (`{label}_invalid`).
pub fn unit(v: &Value, label: &str) -> Result<f64, SummaryError> {
    if matches!(v, Value::Bool(_)) {
        return Err(invalid(format!("{label}_invalid")));
    }
    match to_float(v) {
        Ok(x) if x.is_finite() && (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(invalid(format!("{label}_invalid"))),
    }
}

/// The reference's stage check: an object whose key set is exactly the
/// stages, each value passing [`unit`] (checked in stage order). Returns the
/// floats in stage order.
pub fn finite_stage_scores(
    v: Option<&Value>,
    model: &StageModel,
) -> Result<Vec<f64>, SummaryError> {
    let obj = match v {
        Some(Value::Object(m)) => m,
        _ => return Err(invalid("stage_scores_invalid")),
    };
    let keys: HashSet<&str> = obj.keys().map(String::as_str).collect();
    let want: HashSet<&str> = model.stages.iter().map(String::as_str).collect();
    if keys != want {
        return Err(invalid("stage_scores_invalid"));
    }
    model
        .stages
        .iter()
        .map(|s| unit(obj.get(s).unwrap_or(&Value::Null), s))
        .collect()
}

/// A cell's `repeat` as part of its identity. Ints outside i64 are kept as
/// their text, so the two forms never collide.
#[derive(Debug, PartialEq, Eq, Hash)]
enum RepeatKey<'a> {
    Int(i64),
    Big(&'a str),
}

/// Python `==` against the int 1 (so `1`, `1.0` and `true` all match).
fn equals_one(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Int(1)) | Some(Value::Bool(true)) => true,
        Some(Value::Float(x)) => *x == 1.0,
        _ => false,
    }
}

/// Build the summary of a raw evaluation (§D) from its file bytes.
///
/// `checkpoint_sha256` is passed through unchecked. `mode` picks the `sum()`
/// semantics ([`SumMode::Plain`] is canonical).
pub fn build_summary(
    raw_bytes: &[u8],
    checkpoint_sha256: &str,
    pack: &Pack,
    mode: SumMode,
) -> Result<Value, SummaryError> {
    let model = StageModel::from_pack(pack)?;
    let raw = super::json::parse_bytes(raw_bytes).map_err(|e| SummaryError::Json {
        reason: e.to_string(),
    })?;
    let raw_obj = match &raw {
        Value::Object(m)
            if equals_one(m.get("schema_version"))
                && m.get("status").and_then(Value::as_str) == Some("complete") =>
        {
            m
        }
        _ => return Err(invalid("evaluation_payload_invalid")),
    };
    let cells = match raw_obj.get("cells") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err(invalid("evaluation_cells_missing")),
    };

    let n = cells.len();
    let mut keys: HashSet<(&str, &str, RepeatKey<'_>), super::fasthash::FastHash> =
        HashSet::with_capacity_and_hasher(n, Default::default());
    let mut safe_cells = Vec::with_capacity(n);
    let mut tasks = Vec::with_capacity(n);
    let mut agentics = Vec::with_capacity(n);
    let mut overalls = Vec::with_capacity(n);
    let mut by_track: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut by_stage: Vec<Vec<f64>> = vec![Vec::with_capacity(n); model.stages.len()];

    for (index, cell) in cells.iter().enumerate() {
        let cell = match cell {
            Value::Object(m) if m.get("valid").is_some_and(Value::is_true) => m,
            _ => return Err(invalid(format!("evaluation_cell_{index}_invalid"))),
        };
        let track = cell
            .get("track")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let task_id = cell
            .get("task_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let repeat = match cell.get("repeat") {
            Some(Value::Int(r)) if *r >= 0 => Some(RepeatKey::Int(*r)),
            Some(Value::BigInt(r)) if !r.starts_with('-') => Some(RepeatKey::Big(r)),
            _ => None,
        };
        let (Some(track), Some(task_id), Some(repeat_key)) = (track, task_id, repeat) else {
            return Err(invalid(format!("evaluation_cell_{index}_identity_invalid")));
        };
        if !keys.insert((track, task_id, repeat_key)) {
            return Err(invalid("evaluation_cell_duplicate"));
        }
        let task_score = unit(cell.get("task_score").unwrap_or(&Value::Null), "task_score")?;
        let stages = finite_stage_scores(cell.get("stages"), &model)?;
        let agentic = model.agentic(&stages, mode);
        if let Some(declared) = cell
            .get("agentic_score")
            .filter(|v| !matches!(v, Value::Null))
        {
            let declared = unit(declared, "agentic_score")?;
            if !isclose(declared, agentic, 1e-8) {
                return Err(invalid(format!("evaluation_cell_{index}_agentic_mismatch")));
            }
        }
        // The reference re-checks both operands with unit(); the weighted mean
        // of unit scores cannot leave [0, 1], but a pack's weights could.
        let overall = 0.5 * task_score + 0.5 * unit(&Value::Float(agentic), "agentic_score")?;

        let mut stage_map = Map::new();
        for (s, x) in model.stages.iter().zip(&stages) {
            stage_map.insert(s.clone(), Value::Float(*x));
        }
        let repeat_value = cell.get("repeat").cloned().unwrap_or(Value::Null);
        safe_cells.push(Value::Object(
            Map::new()
                .with("track", track)
                .with("task_id", task_id)
                .with("repeat", repeat_value)
                .with("task_score", task_score)
                .with("agentic_score", agentic)
                .with("overall_score", overall)
                .with("stages", stage_map),
        ));
        tasks.push(task_score);
        agentics.push(agentic);
        overalls.push(overall);
        by_track.entry(track).or_default().push(overall);
        for (acc, x) in by_stage.iter_mut().zip(&stages) {
            acc.push(*x);
        }
    }

    let mean = |xs: &[f64]| -> Result<Value, SummaryError> {
        fmean(xs)
            .map(Value::Float)
            .ok_or_else(|| invalid("evaluation_cells_missing"))
    };
    let mut stage_scores = Map::new();
    for (s, xs) in model.stages.iter().zip(&by_stage) {
        stage_scores.insert(s.clone(), mean(xs)?);
    }
    let mut track_scores = Map::new();
    for (t, xs) in &by_track {
        track_scores.insert(*t, mean(xs)?);
    }
    Ok(Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_eval_summary")
            .with("status", "valid")
            .with("checkpoint_sha256", checkpoint_sha256)
            .with("raw_evaluation_sha256", sha256_hex(raw_bytes))
            .with("cell_count", n)
            .with("cells", Value::Array(safe_cells))
            .with(
                "means",
                Map::new()
                    .with("task", mean(&tasks)?)
                    .with("agentic", mean(&agentics)?)
                    .with("overall", mean(&overalls)?),
            )
            .with("stage_scores", stage_scores)
            .with("track_scores", track_scores),
    ))
}
