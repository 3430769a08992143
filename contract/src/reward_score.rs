//! Runtime reward scoring (contract §C.6, "Reward scoring at runtime"): the
//! score a training row earns from the sandbox evidence of one rollout.
//!
//! The input is the row's `extra_info` with two members added by the agent
//! loop: `bat_agentic_summary` (what the rollout did: tool calls, whether the
//! workspace changed) and `bat_sandbox_evidence` (the task contract the
//! sandbox ran under and the per-item rubric checks). The output is always a
//! payload, never an error: an invalid input gives the zero payload with
//! `error` set to the failure code, so a trainer can log it and move on.
//!
//! `examples/backends/bat_reward.py` is the Python port that VeRL and TRL
//! load; `tests/reward_cross.rs` requires both to give identical payloads.
//! Where the contract's summary leaves a case open (a non-string
//! `target_stage`, a non-numeric tool-call count, an empty rubric) both ports
//! follow the rules written next to the code below.

use super::json::{self, Map, Value};
use super::numeric::plain_sum;
use super::reward::{expected_reward_contract, RewardError};
use super::task::{self, ContractPack, E2E};

/// Which reward a row earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreMode {
    /// BaT: a stage row earns its stage rubric, an E2E row the E2E rubric.
    Stage,
    /// The ablation baseline: every row earns only the final outcome
    /// (`artifacts.task_score`), under the same execution cap.
    Terminal,
}

impl ScoreMode {
    /// Parse `stage` or `terminal` (the `{reward_mode}` values).
    pub fn parse(s: &str) -> Option<ScoreMode> {
        match s {
            "stage" => Some(ScoreMode::Stage),
            "terminal" => Some(ScoreMode::Terminal),
            _ => None,
        }
    }
}

/// `mode` of a stage-reward payload.
pub const MODE_STAGE: &str = "bat_core_rubric";
/// `mode` of a terminal-reward payload.
pub const MODE_TERMINAL: &str = "bat_terminal_outcome";
/// `gate_reason` when execution was not verified.
pub const GATE_UNVERIFIED: &str = "verified_execution_missing";
/// `gate_reason` of the error payload.
pub const GATE_INVALID: &str = "reward_evidence_invalid";

/// A scoring failure; `code` is the payload's `error`.
struct Fail {
    code: &'static str,
}

fn fail<T>(code: &'static str) -> Result<T, Fail> {
    Err(Fail { code })
}

/// Python `x or ""` then `str(x).upper()`, for the values a row can hold:
/// falsy values give `""`, a string its uppercase form, and anything else
/// (a number, `true`, a list) is refused as `target_stage_invalid`.
fn target_of(extra: &Map) -> Result<String, Fail> {
    match extra.get("target_stage") {
        None | Some(Value::Null) | Some(Value::Bool(false)) | Some(Value::Int(0)) => {
            Ok(String::new())
        }
        Some(Value::Float(f)) if *f == 0.0 => Ok(String::new()),
        Some(Value::Str(s)) => Ok(s.to_uppercase()),
        Some(Value::Array(a)) if a.is_empty() => Ok(String::new()),
        Some(Value::Object(m)) if m.is_empty() => Ok(String::new()),
        Some(_) => fail("target_stage_invalid"),
    }
}

/// Python `int(x or 0)` restricted to numbers: absent/null is 0, a bool
/// 0 or 1, an int itself, a finite float within ±2^63 truncated toward
/// zero; anything else (strings included) is `agentic_summary_invalid`.
fn count_of(summary: &Map, key: &str) -> Result<Value, Fail> {
    match summary.get(key) {
        None | Some(Value::Null) => Ok(Value::Int(0)),
        Some(Value::Bool(b)) => Ok(Value::Int(i64::from(*b))),
        Some(Value::Int(i)) => Ok(Value::Int(*i)),
        Some(Value::BigInt(s)) => Ok(Value::BigInt(s.clone())),
        // -(i64::MIN as f64) is exactly 2^63.
        Some(Value::Float(f)) if f.is_finite() && f.abs() < -(i64::MIN as f64) => {
            // In range by the guard, so the cast is exact after trunc.
            Ok(Value::Int(f.trunc() as i64))
        }
        Some(_) => fail("agentic_summary_invalid"),
    }
}

fn positive(v: &Value) -> bool {
    match v {
        Value::Int(i) => *i > 0,
        Value::BigInt(s) => !s.starts_with('-'),
        _ => false,
    }
}

/// `d` must equal digest(`m` without `key`); a digest that cannot be
/// computed (a NaN inside) is a mismatch too.
fn digest_ok(m: &Map, key: &str) -> bool {
    let mut rest = m.clone();
    let claimed = rest.remove(key);
    match (claimed, json::digest(&Value::Object(rest))) {
        (Some(Value::Str(c)), Ok(d)) => c == d,
        _ => false,
    }
}

fn same(a: Option<&Value>, b: &str) -> bool {
    matches!(a, Some(Value::Str(s)) if s == b)
}

/// The rubric score of one stage: item scores (1.0 for JSON `true`, else
/// 0.0) and their mean. The checks' key set must be the rubric's item set.
fn stage_score(
    k: &ContractPack,
    checks: Option<&Map>,
    stage: &str,
) -> Result<(Vec<(String, f64)>, f64), Fail> {
    let Some(stage_checks) = checks.and_then(|c| c.get(stage)).and_then(Value::as_object) else {
        return fail("stage_evidence_missing");
    };
    let items = k
        .reward_items
        .get(stage)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let same_set = stage_checks.len() == items.len()
        && items.iter().all(|i| stage_checks.contains_key(i))
        && stage_checks.keys().all(|key| items.contains(key));
    if !same_set {
        return fail("stage_rubric_evidence_mismatch");
    }
    if items.is_empty() {
        // Python would divide by zero; a pack with an empty rubric cannot
        // score that stage.
        return fail("stage_rubric_empty");
    }
    let scores: Vec<(String, f64)> = items
        .iter()
        .map(|i| {
            let hit = stage_checks.get(i).is_some_and(Value::is_true);
            (i.clone(), if hit { 1.0 } else { 0.0 })
        })
        .collect();
    let values: Vec<f64> = scores.iter().map(|(_, s)| *s).collect();
    let mean = plain_sum(&values) / values.len() as f64;
    Ok((scores, mean))
}

/// `artifacts.task_score`: a non-bool number in [0, 1].
fn task_score(artifacts: &Map) -> Result<f64, Fail> {
    let x = match artifacts.get("task_score") {
        Some(Value::Int(i)) => *i as f64,
        Some(Value::Float(f)) => *f,
        _ => return fail("task_score_invalid"),
    };
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        fail("task_score_invalid")
    }
}

fn weight(k: &ContractPack, stage: &str) -> f64 {
    match k.stage_weights.get(stage) {
        Some(Value::Int(i)) => *i as f64,
        Some(Value::Float(f)) => *f,
        // The pack check guarantees a number for every stage.
        _ => 0.0,
    }
}

struct Scored {
    raw: f64,
    items: Map,
    stages: Map,
}

fn rubric(
    k: &ContractPack,
    artifacts: &Map,
    target: &str,
    mode: ScoreMode,
) -> Result<Scored, Fail> {
    let mut items = Map::new();
    let mut stages = Map::new();
    if mode == ScoreMode::Terminal {
        let raw = task_score(artifacts)?;
        return Ok(Scored { raw, items, stages });
    }
    let checks = artifacts.get("checks").and_then(Value::as_object);
    if target == E2E {
        let mut weighted = Vec::with_capacity(k.stages.len());
        for s in &k.stages {
            let (item_scores, score) = stage_score(k, checks, s)?;
            for (i, v) in item_scores {
                items.insert(format!("{s}.{i}"), Value::Float(v));
            }
            stages.insert(s.clone(), Value::Float(score));
            weighted.push(weight(k, s) * score);
        }
        let stage_mean = plain_sum(&weighted);
        let task = task_score(artifacts)?;
        let raw = 0.5 * stage_mean + 0.5 * task;
        return Ok(Scored { raw, items, stages });
    }
    let (item_scores, score) = stage_score(k, checks, target)?;
    for (i, v) in item_scores {
        items.insert(i, Value::Float(v));
    }
    stages.insert(target, Value::Float(score));
    Ok(Scored {
        raw: score,
        items,
        stages,
    })
}

fn score_inner(
    k: &ContractPack,
    extra: &Value,
    mode: ScoreMode,
    target_out: &mut Option<String>,
) -> Result<Map, Fail> {
    let Some(row) = extra.as_object() else {
        return fail("extra_info_invalid");
    };
    let target = target_of(row)?;
    *target_out = Some(target.clone());
    let expected = expected_reward_contract(k, &target).map_err(|e| match e {
        RewardError::StageInvalid => Fail {
            code: "stage_invalid",
        },
    })?;
    match row.get("reward_contract") {
        Some(c) if json::python_eq(c, &expected) => {}
        _ => return fail("reward_contract_mismatch"),
    }
    let (Some(summary), Some(evidence)) = (
        row.get("bat_agentic_summary").and_then(Value::as_object),
        row.get("bat_sandbox_evidence").and_then(Value::as_object),
    ) else {
        return fail("sandbox_evidence_missing");
    };
    if !digest_ok(summary, "summary_sha256") {
        return fail("agentic_summary_digest_invalid");
    }
    if !digest_ok(evidence, "evidence_sha256") {
        return fail("sandbox_evidence_digest_invalid");
    }
    let evidence_sha = match evidence.get("evidence_sha256") {
        Some(Value::Str(s)) => s.clone(),
        _ => return fail("sandbox_evidence_digest_invalid"),
    };
    if !same(summary.get("evidence_sha256"), &evidence_sha) {
        return fail("sandbox_summary_binding_invalid");
    }
    let contract = task::task_contract(k, extra).map_err(|e| Fail {
        code: task_code(&e),
    })?;
    let contract_sha = contract
        .get("contract_sha256")
        .and_then(Value::as_str)
        .expect("task::task_contract always sets contract_sha256")
        .to_string();
    let Some(sandbox_contract) = evidence.get("contract").and_then(Value::as_object) else {
        return fail("sandbox_contract_missing");
    };
    if !same(sandbox_contract.get("contract_sha256"), &contract_sha) {
        return fail("sandbox_contract_mismatch");
    }
    if !same(summary.get("contract_sha256"), &contract_sha) {
        return fail("summary_contract_mismatch");
    }
    let Some(artifacts) = evidence.get("artifacts").and_then(Value::as_object) else {
        return fail("artifact_evidence_missing");
    };
    let scored = rubric(k, artifacts, &target, mode)?;
    let successful = count_of(summary, "successful_tool_calls")?;
    let changed = summary.get("workspace_changed").is_some_and(Value::is_true);
    let verified = positive(&successful) && changed;
    let cap = if verified { 1.0 } else { 0.0 };
    let tool_calls = count_of(summary, "tool_calls")?;
    Ok(Map::new()
        .with("score", scored.raw.min(cap))
        .with("raw_score", scored.raw)
        .with("gate_cap", cap)
        .with(
            "gate_reason",
            if verified {
                Value::Null
            } else {
                Value::Str(GATE_UNVERIFIED.into())
            },
        )
        .with(
            "mode",
            match mode {
                ScoreMode::Stage => MODE_STAGE,
                ScoreMode::Terminal => MODE_TERMINAL,
            },
        )
        .with("target_stage", target)
        .with("reward_version", k.reward_version.as_str())
        .with("item_scores", scored.items)
        .with("stage_scores", scored.stages)
        .with("agentic_tool_calls", tool_calls)
        .with("agentic_successful_tool_calls", successful)
        .with("agentic_workspace_changed", changed)
        .with(
            "agentic_current_stage_complete",
            summary
                .get("current_stage_complete")
                .is_some_and(Value::is_true),
        )
        .with("contract_sha256", contract_sha)
        .with("evidence_sha256", evidence_sha)
        .with("verified", true))
}

fn task_code(e: &task::TaskError) -> &'static str {
    use task::TaskError as T;
    match e {
        T::ExtraInfoInvalid => "extra_info_invalid",
        T::StateIdInvalid => "state_id_invalid",
        T::SourceStateIdInvalid => "source_state_id_invalid",
        T::TrackUnsupported => "track_unsupported",
        T::TargetStageUnsupported => "target_stage_unsupported",
        T::ViewIndexInvalid => "view_index_invalid",
        T::TaskDefinitionVersionUnsupported => "task_definition_version_unsupported",
        T::NotStableJson => "task_contract_not_stable_json",
        T::PromptInvalid => "prompt_invalid",
        T::PromptMessageInvalid => "prompt_message_invalid",
        T::PromptMismatch => "prompt_task_contract_mismatch",
    }
}

/// Score one rollout: `extra` is the row's `extra_info` with the rollout's
/// `bat_agentic_summary` and `bat_sandbox_evidence`. Always a payload; an
/// invalid input gives the zero payload with `error` set.
pub fn score(k: &ContractPack, extra: &Value, mode: ScoreMode) -> Value {
    let mut target = None;
    match score_inner(k, extra, mode, &mut target) {
        Ok(m) => Value::Object(m),
        Err(Fail { code }) => Value::Object(
            Map::new()
                .with("score", 0.0)
                .with("raw_score", 0.0)
                .with("gate_cap", 0.0)
                .with("gate_reason", GATE_INVALID)
                .with(
                    "mode",
                    match mode {
                        ScoreMode::Stage => MODE_STAGE,
                        ScoreMode::Terminal => MODE_TERMINAL,
                    },
                )
                .with("target_stage", target.map_or(Value::Null, Value::Str))
                .with("reward_version", k.reward_version.as_str())
                .with("item_scores", Map::new())
                .with("stage_scores", Map::new())
                .with("verified", false)
                .with("error", code),
        ),
    }
}
