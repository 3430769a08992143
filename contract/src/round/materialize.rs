//! §C.7: materializing a round from its inputs, and the manifest every
//! round view writes ([`view_manifest`]).

use super::*;
use crate::json::{self, Map, Value};
use crate::prompt::Prompter;
use crate::source;
use crate::task::ContractPack;

/// What `round build` reads besides the pack.
#[derive(Debug, Clone)]
pub struct BuildInputs<'a> {
    /// The source file's bytes.
    pub source_bytes: &'a [u8],
    /// The source file's basename (recorded in the manifest).
    pub source_file_name: &'a str,
    /// `--source-sha256`.
    pub source_sha256: &'a str,
    /// `--round-id`.
    pub round_id: &'a str,
    /// `--target-stage`.
    pub target_stage: Option<&'a str>,
    /// The prescription file's bytes, if `--prescription` was given.
    pub prescription: Option<&'a [u8]>,
    /// `--batches`.
    pub batches: i64,
    /// `--seed`.
    pub seed: Option<&'a str>,
}

/// A materialized round.
#[derive(Debug, Clone)]
pub struct BuiltRound {
    /// The bytes of `train.jsonl`.
    pub train: Vec<u8>,
    /// The manifest (write as PJ).
    pub manifest: Value,
}

/// Name of the train file inside the output folder.
pub const TRAIN_FILE: &str = "train.jsonl";
/// Name of the manifest inside the output folder.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The manifest kind of the contract's three-pool view.
pub const THREE_POOL_ARTIFACT_KIND: &str = "bat_three_pool_round";

/// What distinguishes one round view's manifest from another's. Every view
/// (the contract's three-pool one and the ablations' in `bat::round::view`)
/// makes its manifest with [`view_manifest`], so the budget members, their
/// order and the digests are written in one place.
#[derive(Debug, Clone, Copy)]
pub struct ManifestSpec<'a> {
    /// `artifact_kind`, which names the view.
    pub artifact_kind: &'a str,
    /// `mixture`, written right after `artifact_kind` when given (the
    /// three-pool view has none).
    pub mixture: Option<&'a str>,
    /// The round id.
    pub round_id: &'a str,
    /// The (nominal) target stage.
    pub target_stage: &'a str,
    /// Batches in the view.
    pub batches: i64,
    /// Rows in `train.jsonl`.
    pub rows: usize,
    /// Rows per batch of each pool, in manifest order.
    pub pool_rows_per_batch: &'a [(&'a str, usize)],
    /// The source file's basename.
    pub source_file: &'a str,
    /// The source file's sha256.
    pub source_sha256: &'a str,
    /// Rows of the source grid.
    pub source_rows: usize,
    /// The bytes of `train.jsonl` (their sha256 is recorded).
    pub train: &'a [u8],
}

/// The manifest of a round view (§C.7 step 6).
pub fn view_manifest(spec: &ManifestSpec<'_>) -> Value {
    let mut manifest = Map::new()
        .with("schema_version", 1i64)
        .with("artifact_kind", spec.artifact_kind);
    if let Some(mixture) = spec.mixture {
        manifest.insert("mixture", Value::from(mixture));
    }
    let mut pools = Map::new();
    for (pool, n) in spec.pool_rows_per_batch {
        pools.insert(*pool, Value::from(*n));
    }
    let manifest = manifest
        .with("round_id", spec.round_id)
        .with("target_stage", spec.target_stage)
        .with("batches", spec.batches)
        .with("rows", spec.rows)
        .with("rows_per_batch", ROWS_PER_BATCH)
        .with("continuations_per_state", CONTINUATIONS_PER_STATE)
        .with("pool_rows_per_batch", pools)
        .with(
            "source",
            Map::new()
                .with("file", spec.source_file)
                .with("sha256", spec.source_sha256)
                .with("rows", spec.source_rows),
        )
        .with(
            "train",
            Map::new()
                .with("file", TRAIN_FILE)
                .with("sha256", json::sha256_hex(spec.train)),
        )
        .with("model_specific_serialization", false)
        .with("assistant_targets_included", false);
    Value::Object(manifest)
}

/// The target from `--target-stage` and/or a prescription (§C.7 step 2).
pub fn prescribed_target(
    k: &ContractPack,
    prescription: Option<&[u8]>,
    target: Option<&str>,
) -> Result<String, ViewError> {
    let mut value: Option<Value> = target.map(|t| Value::Str(t.to_string()));
    if let Some(bytes) = prescription {
        // The reference lets a JSON syntax error escape uncaught; reporting
        // it as an invalid prescription keeps the failure a coded one.
        let payload = json::parse_bytes(bytes).map_err(|_| ViewError::PrescriptionInvalid)?;
        let obj = payload.as_object().ok_or(ViewError::PrescriptionInvalid)?;
        let prescribed = obj.get("target_stage").cloned().unwrap_or(Value::Null);
        if let Some(v) = &value {
            if !json::python_eq(&prescribed, v) {
                return Err(ViewError::TargetDisagrees);
            }
        }
        value = Some(prescribed);
    }
    match value {
        Some(Value::Str(s)) if k.stages.contains(&s) => Ok(s),
        _ => Err(ViewError::TargetStageRequired),
    }
}

/// §C.7 steps 1–6 without the file writes: check the source digest, work out
/// the target, read the source, build, verify, encode, and make the manifest.
pub fn materialize(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    inp: &BuildInputs<'_>,
) -> Result<BuiltRound, ViewError> {
    let actual = json::sha256_hex(inp.source_bytes);
    if actual != inp.source_sha256 {
        return Err(ViewError::SourceDigestMismatch);
    }
    let target = prescribed_target(k, inp.prescription, inp.target_stage)?;
    let source_rows = source::read_source(inp.source_bytes, k)?;
    let req = RoundRequest {
        round_id: inp.round_id,
        target_stage: &target,
        batches: inp.batches,
        seed: inp.seed,
        source_sha256: &actual,
    };
    let (train, rows) = build_round_jsonl(k, prompter, &source_rows, &req)?;
    verify_round_rows(&rows, &Value::Str(target.clone()), inp.batches)?;
    let manifest = view_manifest(&ManifestSpec {
        artifact_kind: THREE_POOL_ARTIFACT_KIND,
        mixture: None,
        round_id: inp.round_id,
        target_stage: &target,
        batches: inp.batches,
        rows: rows.len(),
        pool_rows_per_batch: &[
            (POOL_TARGET, TARGET_PER_BATCH),
            (POOL_MIX, MIX_PER_BATCH),
            (POOL_E2E, E2E_PER_BATCH),
        ],
        source_file: inp.source_file_name,
        source_sha256: &actual,
        source_rows: source_rows.len(),
        train: &train,
    });
    Ok(BuiltRound { train, manifest })
}
