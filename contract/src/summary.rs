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
    #[error("{}", describe(code, detail.as_deref()))]
    Invalid {
        /// The contract's error code, e.g. `evaluation_cell_2_invalid`.
        code: String,
        /// Where the check failed and what it found, when known.
        detail: Option<Box<Detail>>,
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
            SummaryError::Invalid { code, .. } => Some(code.clone()),
            _ => None,
        }
    }
}

/// Where a contract check failed: the cell (for checks of one evaluation
/// cell), the field, the value found and what the contract allows there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    /// The 0-based index of the evaluation cell in `cells`, when the check
    /// is about one cell.
    pub cell: Option<usize>,
    /// The field, as a dotted path inside the cell or document
    /// (`task_score`, `stages.S2`, `means.task`).
    pub field: String,
    /// The value found, as short JSON text, or `missing`.
    pub value: String,
    /// What the contract allows in that field.
    pub allowed: String,
}

impl Detail {
    /// A detail for `field` holding `value` (None: the field is absent).
    pub fn new(
        field: impl Into<String>,
        value: Option<&Value>,
        allowed: impl Into<String>,
    ) -> Detail {
        Detail {
            cell: None,
            field: field.into(),
            value: value.map_or_else(|| "missing".to_string(), show_value),
            allowed: allowed.into(),
        }
    }
}

impl std::fmt::Display for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(cell) = self.cell {
            write!(f, "cell {cell}, ")?;
        }
        write!(
            f,
            "field `{}` is {}; allowed: {}",
            self.field, self.value, self.allowed
        )
    }
}

/// A value as short JSON text for a message (long values are cut).
pub fn show_value(v: &Value) -> String {
    const MAX: usize = 80;
    let text = super::json::canonical_json(v).unwrap_or_else(|_| match v {
        Value::Float(x) => super::json::float_repr(*x),
        _ => "an unencodable value".to_string(),
    });
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}… ({} characters)", text.chars().count())
}

/// The message of a contract code with its detail: the sentence, where and
/// what (the cell is not repeated when the sentence names it), then the code
/// to look up in docs/errors.md.
pub(crate) fn describe(code: &str, detail: Option<&Detail>) -> String {
    let sentence = describe_code(code);
    match detail {
        Some(d) => {
            let mut d = d.clone();
            if d.cell
                .is_some_and(|c| sentence.contains(&format!("cell {c} ")))
            {
                d.cell = None;
            }
            format!("{sentence}: {d} (code {code})")
        }
        None => format!("{sentence} (code {code})"),
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
    SummaryError::Invalid {
        code: code.into(),
        detail: None,
    }
}

/// A contract failure with where it happened and what was found.
pub(crate) fn invalid_at(code: impl Into<String>, detail: Detail) -> SummaryError {
    SummaryError::Invalid {
        code: code.into(),
        detail: Some(Box::new(detail)),
    }
}

/// What a unit score may be.
pub const UNIT_RANGE: &str = "a number in [0, 1] (not a boolean)";

impl SummaryError {
    /// The same error, said to be about evaluation cell `index`.
    pub fn in_cell(mut self, index: usize) -> SummaryError {
        if let SummaryError::Invalid {
            detail: Some(d), ..
        } = &mut self
        {
            d.cell = Some(index);
        }
        self
    }
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
    unit_at(v, label, label)
}

/// [`unit`], naming `field` (a dotted path) in the error's detail.
fn unit_at(v: &Value, label: &str, field: &str) -> Result<f64, SummaryError> {
    let fail = || {
        let mut detail = Detail::new(field, Some(v), UNIT_RANGE);
        if matches!(v, Value::Null) {
            detail.value = "missing or null".to_string();
        }
        invalid_at(format!("{label}_invalid"), detail)
    };
    if matches!(v, Value::Bool(_)) {
        return Err(fail());
    }
    match to_float(v) {
        Ok(x) if x.is_finite() && (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(fail()),
    }
}

/// The reference's stage check: an object whose key set is exactly the
/// stages, each value passing [`unit`] (checked in stage order). Returns the
/// floats in stage order.
pub fn finite_stage_scores(
    v: Option<&Value>,
    model: &StageModel,
) -> Result<Vec<f64>, SummaryError> {
    finite_stage_scores_at(v, model, "stages")
}

/// [`finite_stage_scores`], naming the object's field (`stages` in a cell,
/// `stage_scores` in a summary) in the error's detail.
pub fn finite_stage_scores_at(
    v: Option<&Value>,
    model: &StageModel,
    field: &str,
) -> Result<Vec<f64>, SummaryError> {
    let allowed = || {
        format!(
            "an object with exactly the keys {}, each {UNIT_RANGE}",
            model.stages.join(", ")
        )
    };
    let obj = match v {
        Some(Value::Object(m)) => m,
        _ => {
            return Err(invalid_at(
                "stage_scores_invalid",
                Detail::new(field, v, allowed()),
            ))
        }
    };
    let keys: HashSet<&str> = obj.keys().map(String::as_str).collect();
    let want: HashSet<&str> = model.stages.iter().map(String::as_str).collect();
    if keys != want {
        let mut missing: Vec<&str> = want.difference(&keys).copied().collect();
        let mut extra: Vec<&str> = keys.difference(&want).copied().collect();
        missing.sort_unstable();
        extra.sort_unstable();
        let mut found = Vec::new();
        if !missing.is_empty() {
            found.push(format!("missing {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            found.push(format!("unexpected {}", extra.join(", ")));
        }
        return Err(invalid_at(
            "stage_scores_invalid",
            Detail {
                cell: None,
                field: field.to_string(),
                value: format!(
                    "an object with keys {{{}}} ({})",
                    {
                        let mut k: Vec<&str> = keys.iter().copied().collect();
                        k.sort_unstable();
                        k.join(", ")
                    },
                    found.join("; ")
                ),
                allowed: allowed(),
            },
        ));
    }
    model
        .stages
        .iter()
        .map(|s| {
            unit_at(
                obj.get(s).unwrap_or(&Value::Null),
                s,
                &format!("{field}.{s}"),
            )
        })
        .collect()
}

/// Why the top level of a raw evaluation is refused.
fn payload_invalid(raw: &Value) -> SummaryError {
    let code = "evaluation_payload_invalid";
    let Some(m) = raw.as_object() else {
        return invalid_at(
            code,
            Detail::new("(the document)", Some(raw), "a JSON object"),
        );
    };
    if !equals_one(m.get("schema_version")) {
        return invalid_at(
            code,
            Detail::new("schema_version", m.get("schema_version"), "1"),
        );
    }
    invalid_at(code, Detail::new("status", m.get("status"), "\"complete\""))
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
        _ => return Err(payload_invalid(&raw)),
    };
    let cells = match raw_obj.get("cells") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        other => {
            return Err(invalid_at(
                "evaluation_cells_missing",
                Detail::new("cells", other, "a non-empty list of evaluation cells"),
            ))
        }
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
            Value::Object(m) => {
                return Err(invalid_at(
                    format!("evaluation_cell_{index}_invalid"),
                    Detail::new("valid", m.get("valid"), "true"),
                )
                .in_cell(index))
            }
            other => {
                return Err(invalid_at(
                    format!("evaluation_cell_{index}_invalid"),
                    Detail::new(
                        "(the cell)",
                        Some(other),
                        "an object with track, task_id, repeat, valid, task_score and stages",
                    ),
                )
                .in_cell(index))
            }
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
            let (field, allowed) = if track.is_none() {
                (
                    "track",
                    "a non-empty string naming one of the request's tracks",
                )
            } else if task_id.is_none() {
                (
                    "task_id",
                    "a non-empty string (the task's id from the request)",
                )
            } else {
                ("repeat", "an integer >= 0")
            };
            return Err(invalid_at(
                format!("evaluation_cell_{index}_identity_invalid"),
                Detail::new(field, cell.get(field), allowed),
            )
            .in_cell(index));
        };
        if !keys.insert((track, task_id, repeat_key)) {
            let repeat_text = cell.get("repeat").map(show_value).unwrap_or_default();
            let same = |c: &Value| {
                c.get("track").and_then(Value::as_str) == Some(track)
                    && c.get("task_id").and_then(Value::as_str) == Some(task_id)
                    && c.get("repeat") == cell.get("repeat")
            };
            let first = cells[..index]
                .iter()
                .position(same)
                .map_or_else(String::new, |i| format!(", already given by cell {i}"));
            return Err(invalid_at(
                "evaluation_cell_duplicate",
                Detail {
                    cell: Some(index),
                    field: "(track, task_id, repeat)".to_string(),
                    value: format!("({track:?}, {task_id:?}, {repeat_text}){first}"),
                    allowed: "each (track, task_id, repeat) once".to_string(),
                },
            ));
        }
        let task_score = unit(cell.get("task_score").unwrap_or(&Value::Null), "task_score")
            .map_err(|e| e.in_cell(index))?;
        let stages =
            finite_stage_scores(cell.get("stages"), &model).map_err(|e| e.in_cell(index))?;
        let agentic = model.agentic(&stages, mode);
        if let Some(declared) = cell
            .get("agentic_score")
            .filter(|v| !matches!(v, Value::Null))
        {
            let declared = unit(declared, "agentic_score").map_err(|e| e.in_cell(index))?;
            if !isclose(declared, agentic, 1e-8) {
                return Err(invalid_at(
                    format!("evaluation_cell_{index}_agentic_mismatch"),
                    Detail {
                        cell: Some(index),
                        field: "agentic_score".to_string(),
                        value: super::json::float_repr(declared),
                        allowed: format!(
                            "the stage-weighted mean of the cell's stages, {} (within 1e-8), or leave it out",
                            super::json::float_repr(agentic)
                        ),
                    },
                ));
            }
        }
        // The reference re-checks both operands with unit(); the weighted mean
        // of unit scores cannot leave [0, 1], but a pack's weights could.
        let overall = 0.5 * task_score
            + 0.5 * unit(&Value::Float(agentic), "agentic_score").map_err(|e| e.in_cell(index))?;

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
