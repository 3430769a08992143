//! Checking a round: `verify_round_rows` (§C.8) and the dataset verifier
//! (§I "Dataset verify").

use std::collections::HashSet;

use rayon::prelude::*;

use super::*;
use crate::json::{self, Map, Value};
use crate::prompt::Prompter;
use crate::reward;
use crate::task::{ContractPack, E2E};

pub(super) fn extra_of(row: &Value, i: usize) -> Result<&Map, ViewError> {
    row.get("extra_info")
        .and_then(Value::as_object)
        .ok_or(ViewError::RowMalformed { row: i })
}

/// `verify_round_rows` (§C.8): counts, pool composition, pool stages and
/// state-id uniqueness. `target` is compared with Python equality.
pub fn verify_round_rows(rows: &[Value], target: &Value, batches: i64) -> Result<(), ViewError> {
    let expected_rows = batches.checked_mul(ROWS_PER_BATCH as i64);
    if expected_rows != Some(rows.len() as i64) {
        return Err(ViewError::RowCountInvalid);
    }
    let mut seen: HashSet<String> = HashSet::with_capacity(rows.len());
    for (b, batch) in rows.chunks(ROWS_PER_BATCH).enumerate() {
        let mut counts = [0usize; 3];
        for (j, row) in batch.iter().enumerate() {
            let extra = extra_of(row, b * ROWS_PER_BATCH + j)?;
            match extra.get("source_pool").and_then(Value::as_str) {
                Some(POOL_TARGET) => counts[0] += 1,
                Some(POOL_MIX) => counts[1] += 1,
                Some(POOL_E2E) => counts[2] += 1,
                Some(_) => return Err(ViewError::PoolCompositionInvalid),
                None if extra.contains_key("source_pool") => {
                    return Err(ViewError::PoolCompositionInvalid)
                }
                None => {
                    return Err(ViewError::RowMalformed {
                        row: b * ROWS_PER_BATCH + j,
                    })
                }
            }
        }
        if counts != [TARGET_PER_BATCH, MIX_PER_BATCH, E2E_PER_BATCH] {
            return Err(ViewError::PoolCompositionInvalid);
        }
        for (j, row) in batch.iter().enumerate() {
            let i = b * ROWS_PER_BATCH + j;
            let extra = extra_of(row, i)?;
            let stage = extra
                .get("target_stage")
                .ok_or(ViewError::RowMalformed { row: i })?;
            let pool = extra
                .get("source_pool")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let e2e = Value::Str(E2E.into());
            if pool == POOL_TARGET && !json::python_eq(stage, target) {
                return Err(ViewError::TargetStageInvalid);
            }
            if pool == POOL_MIX && (json::python_eq(stage, target) || json::python_eq(stage, &e2e))
            {
                return Err(ViewError::MixStageInvalid);
            }
            if pool == POOL_E2E && !json::python_eq(stage, &e2e) {
                return Err(ViewError::E2eStageInvalid);
            }
            let sid = extra
                .get("state_id")
                .ok_or(ViewError::RowMalformed { row: i })?;
            let key = json::canonical_json(sid).map_err(|_| ViewError::NotStableJson)?;
            if !seen.insert(key) {
                return Err(ViewError::StateIdDuplicate);
            }
        }
    }
    Ok(())
}

/// The dataset verifier (§I): manifest kind, train digest, line shapes, the
/// §C.8 checks, then per row the task-definition version, prompt binding,
/// reward contract and stage. Returns the PJ-able result object.
pub fn verify_dataset(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    train: &[u8],
    manifest: &[u8],
) -> Result<Value, ViewError> {
    let manifest = json::parse_bytes(manifest).map_err(|_| ViewError::ManifestInvalid)?;
    let m = manifest.as_object().ok_or(ViewError::ManifestInvalid)?;
    if m.get("artifact_kind").and_then(Value::as_str) != Some(THREE_POOL_ARTIFACT_KIND) {
        return Err(ViewError::ManifestInvalid);
    }
    let sha = json::sha256_hex(train);
    let declared = m
        .get("train")
        .and_then(|t| t.get("sha256"))
        .and_then(Value::as_str);
    if declared != Some(sha.as_str()) {
        return Err(ViewError::TrainDigestMismatch);
    }
    let text = std::str::from_utf8(train).map_err(|_| ViewError::LineInvalidJson { line: 1 })?;
    let mut rows = Vec::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let v = json::parse(line).map_err(|_| ViewError::LineInvalidJson { line: i + 1 })?;
        if v.as_object().is_none() {
            return Err(ViewError::LineNotObject { line: i + 1 });
        }
        rows.push(v);
    }
    let target = m.get("target_stage").cloned().unwrap_or(Value::Null);
    let batches_v = m.get("batches").cloned().unwrap_or(Value::Null);
    let batches = match batches_v {
        Value::Int(b) => b,
        _ => return Err(ViewError::RowCountInvalid),
    };
    verify_round_rows(&rows, &target, batches)?;
    let checked: Vec<Result<(), ViewError>> = rows
        .par_iter()
        .map(|row| {
            let extra_v = row.get("extra_info").cloned().unwrap_or(Value::Null);
            let extra = extra_v
                .as_object()
                .ok_or(ViewError::RowTaskContractInvalid)?;
            if extra.get("task_definition_version").and_then(Value::as_str)
                != Some(&k.task_definition_version)
            {
                return Err(ViewError::RowTaskContractInvalid);
            }
            prompter.validate_binding(row.get("prompt").unwrap_or(&Value::Null), &extra_v)?;
            let stage = extra
                .get("target_stage")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let expected = reward::expected_reward_contract(k, stage)?;
            if !extra
                .get("reward_contract")
                .is_some_and(|r| json::python_eq(r, &expected))
            {
                return Err(ViewError::RowRewardContractInvalid);
            }
            if !k.is_allowed_stage(stage) {
                return Err(ViewError::RowStageInvalid);
            }
            Ok(())
        })
        .collect();
    // First failure in file order, as the sequential reference reports it.
    for c in checked {
        c?;
    }
    Ok(Value::Object(
        Map::new()
            .with("status", "passed")
            .with("rows", rows.len())
            .with("batches", batches_v)
            .with("target_stage", target)
            .with("train_sha256", sha),
    ))
}
