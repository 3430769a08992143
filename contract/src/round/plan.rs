//! Planning a round (§C.2, §C.3): the cycled picks of every pool, the
//! per-batch shuffles, and projecting a source row into a training row.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::*;
use crate::json::{self, Map, Value};
use crate::prompt::Prompter;
use crate::reward;
use crate::rng::{self, Mt19937};
use crate::source;
use crate::task::{ContractPack, TaskKey, E2E};

/// The arguments of one round build.
#[derive(Debug, Clone)]
pub struct RoundRequest<'a> {
    /// Non-blank round id.
    pub round_id: &'a str,
    /// The target stage (one of the pack's stages).
    pub target_stage: &'a str,
    /// Number of batches (≥ 1).
    pub batches: i64,
    /// Seed string; `None` or empty means `"{round_id}:{target}:bat-core-v1"`.
    pub seed: Option<&'a str>,
    /// The source file's sha256, recorded in every row's provenance.
    pub source_sha256: &'a str,
}

/// `cycle(rows, count, seedbase)`: indices into `subset` with their view.
pub(super) fn cycle(
    len: usize,
    count: usize,
    seedbase: &str,
) -> Result<Vec<(usize, i64)>, ViewError> {
    if len == 0 {
        return Err(ViewError::SelectionInvalid);
    }
    let mut out = Vec::with_capacity(count);
    let mut view = 0i64;
    while out.len() < count {
        let perm = rng::shuffled_indices(&format!("{seedbase}:{view}"), len);
        let take = len.min(count - out.len());
        out.extend(perm[..take].iter().map(|&i| (i, view)));
        view += 1;
    }
    Ok(out)
}

/// A mix stage's focus subset and its cycled picks (subset index, view).
pub(super) type MixPool<'r> = (Vec<&'r Map>, Vec<(usize, i64)>);

/// One planned projection.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot<'r> {
    pub(super) row: &'r Map,
    pub(super) pool: &'static str,
    pub(super) stage: &'r str,
    pub(super) ordinal: i64,
    pub(super) view: i64,
}

pub(super) fn state_id(
    round_id: &str,
    source_id: &str,
    pool: &str,
    stage: &str,
    ordinal: i64,
) -> Result<String, ViewError> {
    let v = Value::Object(
        Map::new()
            .with("round_id", round_id)
            .with("source_state_id", source_id)
            .with("source_pool", pool)
            .with("target_stage", stage)
            .with("ordinal", ordinal),
    );
    let d = json::digest(&v).map_err(|_| ViewError::NotStableJson)?;
    Ok(format!("bat:{}", &d[..32]))
}

/// [`state_id`] from pre-encoded parts: the CJ text of the identity object
/// written out directly (its keys are already in sorted order). `pool` and
/// `stage` are pack stage names and pool constants; they are encoded here.
pub(super) fn state_id_from_cj(
    round_cj: &str,
    source_cj: &str,
    pool: &str,
    stage: &str,
    ordinal: i64,
) -> String {
    let enc = |x: &str| json::canonical_json(&Value::Str(x.to_string())).unwrap_or_default();
    let text = format!(
        "{{\"ordinal\":{ordinal},\"round_id\":{round_cj},\"source_pool\":{},\"source_state_id\":{source_cj},\"target_stage\":{}}}",
        enc(pool),
        enc(stage)
    );
    format!("bat:{}", &json::sha256_hex(text.as_bytes())[..32])
}

/// Precomputed per-round pieces shared by every projection.
pub(super) struct Projector<'a> {
    pub(super) k: &'a ContractPack,
    pub(super) prompter: &'a Prompter<'a>,
    pub(super) round_id: &'a str,
    pub(super) source_sha256: &'a str,
    pub(super) rewards: BTreeMap<String, Value>,
}

impl Projector<'_> {
    pub(super) fn project(&self, s: &Slot<'_>) -> Result<Value, ViewError> {
        let src_id = match s.row.get("source_state_id") {
            Some(Value::Str(x)) => x.clone(),
            // The reference applies str(); validated sources always hold strings.
            Some(other) => json::canonical_json(other).map_err(|_| ViewError::NotStableJson)?,
            None => return Err(ViewError::RowMalformed { row: 0 }),
        };
        let sid = state_id(self.round_id, &src_id, s.pool, s.stage, s.ordinal)?;
        self.assemble(s.row, sid, src_id, s.pool, s.stage, Value::Int(s.view))
    }

    /// The row for a source row, with the state id, source id and view given
    /// (real values, or the splice markers of [`RowTemplate`]).
    pub(super) fn assemble(
        &self,
        row: &Map,
        sid: String,
        src_id: String,
        pool: &str,
        stage: &str,
        view: Value,
    ) -> Result<Value, ViewError> {
        let field = |k: &str| row.get(k).cloned().unwrap_or(Value::Null);
        let reward = self
            .rewards
            .get(stage)
            .cloned()
            .ok_or(ViewError::ArgumentsInvalid)?;
        let extra = Map::new()
            .with("state_id", sid.as_str())
            .with("source_state_id", src_id.as_str())
            .with("target_stage", stage)
            .with("source_pool", pool)
            .with("focus_stage", field("focus_stage"))
            .with("outcome_bucket", field("outcome_bucket"))
            .with("track", field("track"))
            .with("view_index", view)
            .with(
                "task_definition_version",
                self.k.task_definition_version.as_str(),
            )
            .with("assistant_target_included", false)
            .with("teacher_trajectory_included", false)
            .with("rollout_transcript_reuse_allowed", false)
            .with("model_specific_serialization", false)
            .with("reward_contract", reward)
            .with(
                "provenance",
                Map::new()
                    .with("source", "heldout_safe_synthetic")
                    .with("source_file_sha256", self.source_sha256)
                    .with("source_row_sha256", field("row_sha256"))
                    .with("evaluation_content_used", false),
            );
        // The reference renders through the full task-contract validation;
        // the track check is the only one that can fail for a valid source.
        let track = match row.get("track") {
            Some(Value::Str(t)) => t.to_lowercase(),
            _ => return Err(TaskError::TrackUnsupported.into()),
        };
        let key = TaskKey {
            state_id: sid,
            source_state_id: src_id,
            track,
            stage: stage.to_string(),
            view_index: 0,
        };
        if !self.k.tasks.contains_key(&key.track) {
            return Err(TaskError::TrackUnsupported.into());
        }
        let prompt = self.prompter.render_key(&key)?;
        Ok(Value::Object(
            Map::new()
                .with("data_source", DATA_SOURCE)
                .with("prompt", prompt)
                .with("ability", format!("automedbench:{stage}"))
                .with("reward_model", Map::new().with("style", "custom"))
                .with("extra_info", extra),
        ))
    }
}

/// Validate the request and draw every shuffle: the rows of each batch in
/// their final slot order.
pub(super) fn plan_round<'r>(
    k: &'r ContractPack,
    source_rows: &'r [Map],
    req: &'r RoundRequest<'_>,
) -> Result<Vec<[Slot<'r>; ROWS_PER_BATCH]>, ViewError> {
    source::validate_source(source_rows, k)?;
    let target = req.target_stage;
    if !k.stages.iter().any(|s| s == target) || req.batches <= 0 || req.round_id.trim().is_empty() {
        return Err(ViewError::ArgumentsInvalid);
    }
    let batches = usize::try_from(req.batches).map_err(|_| ViewError::ArgumentsInvalid)?;
    let seed = match req.seed {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => format!("{}:{}:bat-core-v1", req.round_id, target),
    };
    let subset = |f: &str| -> Vec<&Map> {
        source_rows
            .iter()
            .filter(|r| matches!(r.get("focus_stage"), Some(Value::Str(s)) if s == f))
            .collect()
    };
    let target_src = subset(target);
    let e2e_src = subset(E2E);
    let others: Vec<&str> = k
        .stages
        .iter()
        .map(String::as_str)
        .filter(|s| *s != target)
        .collect();
    if others.is_empty() {
        return Err(ViewError::SelectionInvalid);
    }
    let target_rows = cycle(
        target_src.len(),
        batches * TARGET_PER_BATCH,
        &format!("{seed}:target"),
    )?;
    let e2e_rows = cycle(
        e2e_src.len(),
        batches * E2E_PER_BATCH,
        &format!("{seed}:e2e"),
    )?;
    let mut mix_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for i in 0..batches * MIX_PER_BATCH {
        *mix_counts.entry(others[i % others.len()]).or_default() += 1;
    }
    let mut mix: BTreeMap<&str, MixPool<'_>> = BTreeMap::new();
    for (stage, count) in &mix_counts {
        let src = subset(stage);
        let picks = cycle(src.len(), *count, &format!("{seed}:mix:{stage}"))?;
        mix.insert(stage, (src, picks));
    }
    let mut mix_offsets: BTreeMap<&str, usize> = BTreeMap::new();

    // Plan every batch sequentially: which row goes where with which ordinal.
    let mut plan: Vec<[Slot<'_>; ROWS_PER_BATCH]> = Vec::with_capacity(batches);
    let mut ordinal = 0i64;
    for b in 0..batches {
        let mut slots: Vec<Slot<'_>> = Vec::with_capacity(ROWS_PER_BATCH);
        for &(i, view) in &target_rows[b * TARGET_PER_BATCH..(b + 1) * TARGET_PER_BATCH] {
            slots.push(Slot {
                row: target_src[i],
                pool: POOL_TARGET,
                stage: target,
                ordinal,
                view,
            });
            ordinal += 1;
        }
        for m in 0..MIX_PER_BATCH {
            let stage = others[(b * MIX_PER_BATCH + m) % others.len()];
            let (src, picks) = mix.get(stage).ok_or(ViewError::SelectionInvalid)?;
            let off = mix_offsets.entry(stage).or_default();
            let &(i, view) = picks.get(*off).ok_or(ViewError::SelectionInvalid)?;
            *off += 1;
            slots.push(Slot {
                row: src[i],
                pool: POOL_MIX,
                stage,
                ordinal,
                view,
            });
            ordinal += 1;
        }
        for &(i, view) in &e2e_rows[b * E2E_PER_BATCH..(b + 1) * E2E_PER_BATCH] {
            slots.push(Slot {
                row: e2e_src[i],
                pool: POOL_E2E,
                stage: E2E,
                ordinal,
                view,
            });
            ordinal += 1;
        }
        let mut arr: [Slot<'_>; ROWS_PER_BATCH] =
            slots.try_into().map_err(|_| ViewError::SelectionInvalid)?;
        Mt19937::from_str_seed(&format!("{seed}:batch:{b}")).shuffle(&mut arr);
        plan.push(arr);
    }
    Ok(plan)
}

pub(super) fn reward_contracts(k: &ContractPack) -> Result<BTreeMap<String, Value>, ViewError> {
    let mut rewards = BTreeMap::new();
    for s in std::iter::once(E2E).chain(k.stages.iter().map(String::as_str)) {
        rewards.insert(s.to_string(), reward::expected_reward_contract(k, s)?);
    }
    Ok(rewards)
}

/// Build the rows of a round (§C.2, §C.3) from validated source rows.
pub fn build_round(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    source_rows: &[Map],
    req: &RoundRequest<'_>,
) -> Result<Vec<Value>, ViewError> {
    let plan = plan_round(k, source_rows, req)?;
    let batches = plan.len();
    let projector = Projector {
        k,
        prompter,
        round_id: req.round_id,
        source_sha256: req.source_sha256,
        rewards: reward_contracts(k)?,
    };
    let batches_out: Vec<Result<Vec<Value>, ViewError>> = plan
        .par_iter()
        .enumerate()
        .map(|(b, slots)| {
            let mut out = Vec::with_capacity(ROWS_PER_BATCH);
            for (slot, s) in slots.iter().enumerate() {
                let mut row = projector.project(s)?;
                if let Value::Object(m) = &mut row {
                    if let Some(Value::Object(extra)) = m.get_mut("extra_info") {
                        extra.insert("core_batch_index", Value::from(b));
                        extra.insert("core_batch_slot", Value::from(slot));
                    }
                }
                out.push(row);
            }
            Ok(out)
        })
        .collect();
    let mut rows = Vec::with_capacity(batches * ROWS_PER_BATCH);
    for b in batches_out {
        rows.extend(b?);
    }
    Ok(rows)
}
