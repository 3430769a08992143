//! The `mixture=uniform` ablation's round view: the same number of rows and
//! batches as the contract's three-pool view, but without an S-target pool.
//!
//! This is a separate builder on purpose: the contract's
//! [`bat_contract::round::materialize`] is never changed. The uniform
//! view is assembled from contract-built rows only: for each stage of the
//! pack a three-pool view targeting that stage is materialized (same round
//! id and batch count), and each batch of the uniform view takes
//! - 6 stage rows, whose stages go round-robin over the pack's stages
//!   across the whole round (so every stage gets an equal share, whatever
//!   the gate prescribed), each the next unused S-target row of that
//!   stage's view, relabelled `source_pool = "uniform"`;
//! - the 2 E2E rows of that batch from the first stage's view.
//!
//! `core_batch_index` / `core_batch_slot` are rewritten to the row's new
//! position. The manifest has `artifact_kind = "bat_uniform_round"`,
//! `"mixture": "uniform"`, the nominal target the loop passed, and the
//! three-pool view's budget members (`batches`, `rows`, `rows_per_batch`,
//! `continuations_per_state`), so the compute budget is unchanged.
//! [`verify_uniform_view`] checks such a view the way the dataset verifier
//! checks a three-pool one (digest, counts, pools, state-id uniqueness,
//! prompt binding, reward contracts, stages).

use std::collections::HashSet;

use bat_contract::json::{self, Map, Value};
use bat_contract::prompt::Prompter;
use bat_contract::reward;
use bat_contract::round::{
    materialize, prescribed_target, view_manifest, BuildInputs, BuiltRound, ManifestSpec,
    ViewError, E2E_PER_BATCH, POOL_E2E, POOL_TARGET, ROWS_PER_BATCH,
};
use bat_contract::task::{ContractPack, E2E};

use super::kind::{RoundView, ViewKind};

impl ViewKind {
    /// The `mixture=uniform` ablation's view.
    pub const UNIFORM: ViewKind = ViewKind::named(POOL_UNIFORM);
}

/// The registry entry of the uniform view.
pub struct Uniform;

impl RoundView for Uniform {
    fn kind(&self) -> ViewKind {
        ViewKind::UNIFORM
    }

    fn artifact_kind(&self) -> &'static str {
        UNIFORM_ARTIFACT_KIND
    }

    fn build(
        &self,
        k: &ContractPack,
        prompter: &Prompter<'_>,
        inp: &BuildInputs<'_>,
    ) -> Result<BuiltRound, ViewError> {
        uniform_view(k, prompter, inp)
    }

    fn verify(
        &self,
        k: &ContractPack,
        prompter: &Prompter<'_>,
        train: &[u8],
        manifest: &[u8],
    ) -> Result<Value, ViewError> {
        verify_uniform_view(k, prompter, train, manifest)
    }
}

/// The manifest kind of a uniform view.
pub const UNIFORM_ARTIFACT_KIND: &str = "bat_uniform_round";
/// The pool label of a uniform view's stage rows.
pub const POOL_UNIFORM: &str = "uniform";
/// Stage rows per batch (the rest are E2E rows).
pub const UNIFORM_PER_BATCH: usize = ROWS_PER_BATCH - E2E_PER_BATCH;

fn lines(train: &[u8]) -> Result<Vec<Value>, ViewError> {
    let text = std::str::from_utf8(train).map_err(|_| ViewError::LineInvalidJson { line: 1 })?;
    text.split_inclusive('\n')
        .enumerate()
        .map(|(i, l)| json::parse(l).map_err(|_| ViewError::LineInvalidJson { line: i + 1 }))
        .collect()
}

fn extra_mut(row: &mut Value, i: usize) -> Result<&mut Map, ViewError> {
    match row {
        Value::Object(m) => match m.get_mut("extra_info") {
            Some(Value::Object(e)) => Ok(e),
            _ => Err(ViewError::RowMalformed { row: i }),
        },
        _ => Err(ViewError::RowMalformed { row: i }),
    }
}

fn pool_of(row: &Value) -> Option<&str> {
    row.get("extra_info")
        .and_then(|e| e.get("source_pool"))
        .and_then(Value::as_str)
}

/// Build the uniform view for `inp` (see the module docs).
pub fn uniform_view(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    inp: &BuildInputs<'_>,
) -> Result<BuiltRound, ViewError> {
    let nominal = prescribed_target(k, inp.prescription, inp.target_stage)?;
    let batches = usize::try_from(inp.batches).map_err(|_| ViewError::RowCountInvalid)?;
    let mut stage_rows: Vec<std::collections::VecDeque<Value>> = Vec::new();
    let mut e2e_rows: Vec<Value> = Vec::new();
    let mut source_rows = 0usize;
    for (i, stage) in k.stages.iter().enumerate() {
        let built = materialize(
            k,
            prompter,
            &BuildInputs {
                target_stage: Some(stage),
                prescription: None,
                ..inp.clone()
            },
        )?;
        if let Some(Value::Int(n)) = built.manifest.get("source").and_then(|s| s.get("rows")) {
            source_rows = usize::try_from(*n).unwrap_or(0);
        }
        let rows = lines(&built.train)?;
        let mut mine = std::collections::VecDeque::new();
        for r in rows {
            match pool_of(&r) {
                Some(POOL_TARGET) => mine.push_back(r),
                Some(POOL_E2E) if i == 0 => e2e_rows.push(r),
                _ => {}
            }
        }
        stage_rows.push(mine);
    }
    if stage_rows.is_empty() || e2e_rows.len() != batches * E2E_PER_BATCH {
        return Err(ViewError::PoolCompositionInvalid);
    }
    let n = stage_rows.len();
    let mut text = String::new();
    let mut e2e = e2e_rows.into_iter();
    for b in 0..batches {
        for slot in 0..ROWS_PER_BATCH {
            let i = b * ROWS_PER_BATCH + slot;
            let mut row = if slot < UNIFORM_PER_BATCH {
                let s = (b * UNIFORM_PER_BATCH + slot) % n;
                let mut r = stage_rows[s]
                    .pop_front()
                    .ok_or(ViewError::PoolCompositionInvalid)?;
                extra_mut(&mut r, i)?.insert("source_pool", Value::from(POOL_UNIFORM));
                r
            } else {
                e2e.next().ok_or(ViewError::PoolCompositionInvalid)?
            };
            let extra = extra_mut(&mut row, i)?;
            extra.insert("core_batch_index", Value::from(b));
            extra.insert("core_batch_slot", Value::from(slot));
            text.push_str(&json::canonical_json(&row).map_err(|_| ViewError::NotStableJson)?);
            text.push('\n');
        }
    }
    let train = text.into_bytes();
    let manifest = view_manifest(&ManifestSpec {
        artifact_kind: UNIFORM_ARTIFACT_KIND,
        mixture: Some(POOL_UNIFORM),
        round_id: inp.round_id,
        target_stage: &nominal,
        batches: inp.batches,
        rows: batches * ROWS_PER_BATCH,
        pool_rows_per_batch: &[(POOL_UNIFORM, UNIFORM_PER_BATCH), (POOL_E2E, E2E_PER_BATCH)],
        source_file: inp.source_file_name,
        source_sha256: inp.source_sha256,
        source_rows,
        train: &train,
    });
    Ok(BuiltRound { train, manifest })
}

/// Whether a manifest describes a uniform view.
pub fn is_uniform_manifest(manifest: &Value) -> bool {
    Uniform.recognizes(manifest)
}

/// Check a uniform view (see the module docs); returns the verifier's
/// result object (`status`, `rows`, `batches`, `target_stage`,
/// `train_sha256`).
pub fn verify_uniform_view(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    train: &[u8],
    manifest: &[u8],
) -> Result<Value, ViewError> {
    let manifest = json::parse_bytes(manifest).map_err(|_| ViewError::ManifestInvalid)?;
    if !is_uniform_manifest(&manifest) {
        return Err(ViewError::ManifestInvalid);
    }
    let sha = json::sha256_hex(train);
    if manifest
        .get("train")
        .and_then(|t| t.get("sha256"))
        .and_then(Value::as_str)
        != Some(sha.as_str())
    {
        return Err(ViewError::TrainDigestMismatch);
    }
    let batches = match manifest.get("batches") {
        Some(Value::Int(b)) if *b >= 1 => *b,
        _ => return Err(ViewError::RowCountInvalid),
    };
    let rows = lines(train)?;
    if Some(rows.len() as i64) != batches.checked_mul(ROWS_PER_BATCH as i64) {
        return Err(ViewError::RowCountInvalid);
    }
    let mut seen = HashSet::with_capacity(rows.len());
    for (b, batch) in rows.chunks(ROWS_PER_BATCH).enumerate() {
        let mut e2e = 0;
        for (j, row) in batch.iter().enumerate() {
            let i = b * ROWS_PER_BATCH + j;
            let extra_v = row.get("extra_info").cloned().unwrap_or(Value::Null);
            let extra = extra_v
                .as_object()
                .ok_or(ViewError::RowMalformed { row: i })?;
            let stage = extra
                .get("target_stage")
                .and_then(Value::as_str)
                .ok_or(ViewError::RowMalformed { row: i })?;
            match extra.get("source_pool").and_then(Value::as_str) {
                Some(POOL_E2E) if stage == E2E => e2e += 1,
                Some(POOL_E2E) => return Err(ViewError::E2eStageInvalid),
                Some(POOL_UNIFORM) if stage != E2E && k.is_allowed_stage(stage) => {}
                Some(POOL_UNIFORM) => return Err(ViewError::RowStageInvalid),
                _ => return Err(ViewError::PoolCompositionInvalid),
            }
            if extra.get("task_definition_version").and_then(Value::as_str)
                != Some(&k.task_definition_version)
            {
                return Err(ViewError::RowTaskContractInvalid);
            }
            prompter.validate_binding(row.get("prompt").unwrap_or(&Value::Null), &extra_v)?;
            let expected = reward::expected_reward_contract(k, stage)?;
            if !extra
                .get("reward_contract")
                .is_some_and(|r| json::python_eq(r, &expected))
            {
                return Err(ViewError::RowRewardContractInvalid);
            }
            let sid = extra
                .get("state_id")
                .ok_or(ViewError::RowMalformed { row: i })?;
            if !seen.insert(json::canonical_json(sid).map_err(|_| ViewError::NotStableJson)?) {
                return Err(ViewError::StateIdDuplicate);
            }
        }
        if e2e != E2E_PER_BATCH {
            return Err(ViewError::PoolCompositionInvalid);
        }
    }
    Ok(Value::Object(
        Map::new()
            .with("status", "passed")
            .with("rows", rows.len())
            .with("batches", batches)
            .with(
                "target_stage",
                manifest.get("target_stage").cloned().unwrap_or(Value::Null),
            )
            .with("train_sha256", sha),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bat_contract::pack::Pack;

    #[test]
    fn a_uniform_view_spreads_stage_rows_evenly_and_verifies() {
        let pack = Pack::default_pack();
        let k = pack.contract().expect("pack");
        let prompter = Prompter::new(&k);
        let src = bat_contract::source::build_source(&k).expect("source");
        let sha = json::sha256_hex(&src.jsonl);
        let inp = BuildInputs {
            source_bytes: &src.jsonl,
            source_file_name: "source.jsonl",
            source_sha256: &sha,
            round_id: "r01",
            target_stage: Some("S3"),
            prescription: None,
            batches: 10,
            seed: None,
        };
        let built = uniform_view(&k, &prompter, &inp).expect("uniform view");
        let manifest = json::pretty_json_file(&built.manifest);
        let verified = verify_uniform_view(&k, &prompter, &built.train, manifest.as_bytes())
            .expect("verifies");
        assert_eq!(verified.get("rows"), Some(&Value::from(80usize)));
        // 60 stage rows over 5 stages: 12 each; 20 E2E rows.
        let rows = lines(&built.train).expect("rows");
        let mut counts = std::collections::BTreeMap::new();
        for r in &rows {
            let st = r
                .get("extra_info")
                .and_then(|e| e.get("target_stage"))
                .and_then(Value::as_str)
                .expect("stage")
                .to_string();
            *counts.entry(st).or_insert(0) += 1;
        }
        for s in ["S1", "S2", "S3", "S4", "S5"] {
            assert_eq!(counts.get(s), Some(&12), "{s}: {counts:?}");
        }
        assert_eq!(counts.get("E2E"), Some(&20));
        // Deterministic, and different from the three-pool view.
        let again = uniform_view(&k, &prompter, &inp).expect("again");
        assert_eq!(again.train, built.train);
        let three = materialize(&k, &prompter, &inp).expect("three-pool");
        assert_ne!(three.train, built.train);
        // The contract's verifier refuses it (it is not a three-pool view),
        // and a tampered digest is caught.
        assert!(bat_contract::round::verify_dataset(
            &k,
            &prompter,
            &built.train,
            manifest.as_bytes()
        )
        .is_err());
        let mut bad = built.train.clone();
        bad[10] ^= 1;
        assert!(matches!(
            verify_uniform_view(&k, &prompter, &bad, manifest.as_bytes()),
            Err(ViewError::TrainDigestMismatch)
        ));
    }
}
