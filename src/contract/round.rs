//! Round materialization (contract §C.2, §C.3, §C.7, §C.8) and the dataset
//! verifier (§I "Dataset verify").
//!
//! The build is planned sequentially (the RNG draws are cheap and fix the
//! order), then every batch is projected, shuffled and encoded in parallel;
//! results are collected in batch order, so the output never depends on
//! scheduling.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::json::{self, Map, Value};
use super::prompt::Prompter;
use super::reward::{self, RewardError};
use super::rng::{self, Mt19937};
use super::source::{self, SourceError};
use super::task::{self, ContractPack, TaskError, TaskKey, E2E};

/// Batches in a default round.
pub const DEFAULT_BATCHES: i64 = 378;
/// Rows per batch.
pub const ROWS_PER_BATCH: usize = 8;
/// Target-stage rows per batch.
pub const TARGET_PER_BATCH: usize = 4;
/// Mix rows per batch.
pub const MIX_PER_BATCH: usize = 2;
/// E2E rows per batch.
pub const E2E_PER_BATCH: usize = 2;
/// Rollouts per state the trainer draws (recorded in the manifest).
pub const CONTINUATIONS_PER_STATE: i64 = 4;
/// `data_source` of every row.
pub const DATA_SOURCE: &str = "automedbench_clean_prompt";
/// Pool names.
pub const POOL_TARGET: &str = "s_target";
/// Pool names.
pub const POOL_MIX: &str = "s_mix";
/// Pool names.
pub const POOL_E2E: &str = "e2e";

/// A round-side failure; the message is the contract's code.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// The source file's sha differs from `--source-sha256`.
    #[error("source_digest_mismatch")]
    SourceDigestMismatch,
    /// The prescription is not a JSON object.
    #[error("prescription_invalid")]
    PrescriptionInvalid,
    /// `--target-stage` and the prescription disagree.
    #[error("target_disagrees_with_prescription")]
    TargetDisagrees,
    /// No usable target stage.
    #[error("target_stage_required")]
    TargetStageRequired,
    /// Bad round id, stage or batch count.
    #[error("round_arguments_invalid")]
    ArgumentsInvalid,
    /// A cycle over an empty subset or a negative count.
    #[error("selection_invalid")]
    SelectionInvalid,
    /// The row count is not 8 × batches.
    #[error("round_row_count_invalid")]
    RowCountInvalid,
    /// A batch does not hold 4/2/2 pool rows.
    #[error("round_pool_composition_invalid")]
    PoolCompositionInvalid,
    /// An `s_target` row has another stage.
    #[error("round_target_stage_invalid")]
    TargetStageInvalid,
    /// An `s_mix` row has the target stage or E2E.
    #[error("round_mix_stage_invalid")]
    MixStageInvalid,
    /// An `e2e` row is not E2E.
    #[error("round_e2e_stage_invalid")]
    E2eStageInvalid,
    /// Two rows share a state id.
    #[error("round_state_id_duplicate")]
    StateIdDuplicate,
    /// A row lacks the fields the round checks index (the reference crashes
    /// with a `KeyError` here).
    #[error("round_row_{row}_malformed")]
    RowMalformed {
        /// 0-based row index.
        row: usize,
    },
    /// The manifest is not a round manifest.
    #[error("manifest_invalid")]
    ManifestInvalid,
    /// The train file's sha differs from the manifest's.
    #[error("train_digest_mismatch")]
    TrainDigestMismatch,
    /// A train line is not JSON (the reference crashes with a decode error).
    #[error("line_{line}_invalid_json")]
    LineInvalidJson {
        /// 1-based line number.
        line: usize,
    },
    /// A train line is not an object.
    #[error("line_{line}_not_object")]
    LineNotObject {
        /// 1-based line number.
        line: usize,
    },
    /// A row's extra_info or task-definition version is wrong.
    #[error("row_task_contract_invalid")]
    RowTaskContractInvalid,
    /// A row's reward contract is not the expected one.
    #[error("row_reward_contract_invalid")]
    RowRewardContractInvalid,
    /// A row's stage is not allowed.
    #[error("row_stage_invalid")]
    RowStageInvalid,
    /// A row cannot be encoded as CJ (a non-finite float).
    #[error("task_contract_not_stable_json")]
    NotStableJson,
    /// A source-file failure.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A task-contract or prompt failure.
    #[error(transparent)]
    Task(#[from] TaskError),
    /// A reward-contract failure.
    #[error(transparent)]
    Reward(#[from] RewardError),
}

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
fn cycle(len: usize, count: usize, seedbase: &str) -> Result<Vec<(usize, i64)>, RoundError> {
    if len == 0 {
        return Err(RoundError::SelectionInvalid);
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
type MixPool<'r> = (Vec<&'r Map>, Vec<(usize, i64)>);

/// One planned projection.
#[derive(Debug, Clone, Copy)]
struct Slot<'r> {
    row: &'r Map,
    pool: &'static str,
    stage: &'r str,
    ordinal: i64,
    view: i64,
}

fn state_id(
    round_id: &str,
    source_id: &str,
    pool: &str,
    stage: &str,
    ordinal: i64,
) -> Result<String, RoundError> {
    let v = Value::Object(
        Map::new()
            .with("round_id", round_id)
            .with("source_state_id", source_id)
            .with("source_pool", pool)
            .with("target_stage", stage)
            .with("ordinal", ordinal),
    );
    let d = json::digest(&v).map_err(|_| RoundError::NotStableJson)?;
    Ok(format!("bat:{}", &d[..32]))
}

/// [`state_id`] from pre-encoded parts: the CJ text of the identity object
/// written out directly (its keys are already in sorted order). `pool` and
/// `stage` are pack stage names and pool constants; they are encoded here.
fn state_id_from_cj(
    round_cj: &str,
    source_cj: &str,
    pool: &str,
    stage: &str,
    ordinal: i64,
) -> String {
    let enc = |x: &str| json::to_cj(&Value::Str(x.to_string())).unwrap_or_default();
    let text = format!(
        "{{\"ordinal\":{ordinal},\"round_id\":{round_cj},\"source_pool\":{},\"source_state_id\":{source_cj},\"target_stage\":{}}}",
        enc(pool),
        enc(stage)
    );
    format!("bat:{}", &json::sha256_hex(text.as_bytes())[..32])
}

/// Precomputed per-round pieces shared by every projection.
struct Projector<'a> {
    k: &'a ContractPack,
    prompter: &'a Prompter<'a>,
    round_id: &'a str,
    source_sha256: &'a str,
    rewards: BTreeMap<String, Value>,
}

impl Projector<'_> {
    fn project(&self, s: &Slot<'_>) -> Result<Value, RoundError> {
        let src_id = match s.row.get("source_state_id") {
            Some(Value::Str(x)) => x.clone(),
            // The reference applies str(); validated sources always hold strings.
            Some(other) => json::to_cj(other).map_err(|_| RoundError::NotStableJson)?,
            None => return Err(RoundError::RowMalformed { row: 0 }),
        };
        let sid = state_id(self.round_id, &src_id, s.pool, s.stage, s.ordinal)?;
        self.assemble(s.row, sid, src_id, s.pool, s.stage, Value::Int(s.view))
    }

    /// The row for a source row, with the state id, source id and view given
    /// (real values, or the splice markers of [`RowTemplate`]).
    fn assemble(
        &self,
        row: &Map,
        sid: String,
        src_id: String,
        pool: &str,
        stage: &str,
        view: Value,
    ) -> Result<Value, RoundError> {
        let field = |k: &str| row.get(k).cloned().unwrap_or(Value::Null);
        let reward = self
            .rewards
            .get(stage)
            .cloned()
            .ok_or(RoundError::ArgumentsInvalid)?;
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
fn plan_round<'r>(
    k: &'r ContractPack,
    source_rows: &'r [Map],
    req: &'r RoundRequest<'_>,
) -> Result<Vec<[Slot<'r>; ROWS_PER_BATCH]>, RoundError> {
    source::validate_source(source_rows, k)?;
    let target = req.target_stage;
    if !k.stages.iter().any(|s| s == target) || req.batches <= 0 || req.round_id.trim().is_empty() {
        return Err(RoundError::ArgumentsInvalid);
    }
    let batches = usize::try_from(req.batches).map_err(|_| RoundError::ArgumentsInvalid)?;
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
        return Err(RoundError::SelectionInvalid);
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
            let (src, picks) = mix.get(stage).ok_or(RoundError::SelectionInvalid)?;
            let off = mix_offsets.entry(stage).or_default();
            let &(i, view) = picks.get(*off).ok_or(RoundError::SelectionInvalid)?;
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
            slots.try_into().map_err(|_| RoundError::SelectionInvalid)?;
        Mt19937::from_str_seed(&format!("{seed}:batch:{b}")).shuffle(&mut arr);
        plan.push(arr);
    }
    Ok(plan)
}

fn reward_contracts(k: &ContractPack) -> Result<BTreeMap<String, Value>, RoundError> {
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
) -> Result<Vec<Value>, RoundError> {
    let plan = plan_round(k, source_rows, req)?;
    let batches = plan.len();
    let projector = Projector {
        k,
        prompter,
        round_id: req.round_id,
        source_sha256: req.source_sha256,
        rewards: reward_contracts(k)?,
    };
    let batches_out: Vec<Result<Vec<Value>, RoundError>> = plan
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

/// Splice markers: distinct strings placed where per-row values go.
const MARK_SID: &str = "@@BAT0@@";
const MARKS: [&str; 7] = [
    "@@BAT1@@", "@@BAT2@@", "@@BAT3@@", "@@BAT4@@", "@@BAT5@@", "@@BAT6@@", "@@BAT7@@",
];

/// A per-row value a [`RowTemplate`] splices in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// The state id, raw (it appears inside the prompt text too).
    StateId,
    /// One of `MARKS`, replaced with its quotes by the value's CJ text.
    Value(usize),
}

#[derive(Debug, Clone)]
enum Part {
    Lit(String),
    Field(Field),
}

/// The CJ line of every row with a given (track, stage, pool), with holes
/// for the values that vary per row. Rows of one round differ only in
/// those, so the expensive part (prompt rendering, sorting and escaping
/// ~4 KB of JSON) is done 3 × 7 × 6 times at most instead of once per row.
#[derive(Debug, Clone)]
struct RowTemplate {
    parts: Vec<Part>,
    lit_len: usize,
}

impl RowTemplate {
    /// `None` when the pack's own text contains a marker (then the caller
    /// falls back to encoding every row).
    fn new(
        p: &Projector<'_>,
        track: &Value,
        stage: &str,
        pool: &str,
    ) -> Result<Option<RowTemplate>, RoundError> {
        let probe = Map::new()
            .with("track", track.clone())
            .with("focus_stage", MARKS[1])
            .with("outcome_bucket", MARKS[2])
            .with("row_sha256", MARKS[3]);
        let mut row = p.assemble(
            &probe,
            MARK_SID.to_string(),
            MARKS[0].to_string(),
            pool,
            stage,
            Value::Str(MARKS[4].into()),
        )?;
        if let Value::Object(m) = &mut row {
            if let Some(Value::Object(extra)) = m.get_mut("extra_info") {
                extra.insert("core_batch_index", Value::Str(MARKS[5].into()));
                extra.insert("core_batch_slot", Value::Str(MARKS[6].into()));
            }
        }
        let text = json::to_cj(&row).map_err(|_| RoundError::NotStableJson)?;
        let mut parts = Vec::new();
        let mut rest = text.as_str();
        let mut seen = [0usize; 7];
        let mut sid_seen = 0usize;
        while let Some(pos) = rest.find("@@BAT") {
            let tail = &rest[pos..];
            let Some(idx) = tail
                .as_bytes()
                .get(5)
                .and_then(|d| d.checked_sub(b'0'))
                .map(usize::from)
            else {
                return Ok(None);
            };
            if idx == 0 && tail.starts_with(MARK_SID) {
                parts.push(Part::Lit(rest[..pos].to_string()));
                parts.push(Part::Field(Field::StateId));
                sid_seen += 1;
                rest = &tail[MARK_SID.len()..];
            } else if (1..=7).contains(&idx)
                && tail.starts_with(MARKS[idx - 1])
                && rest[..pos].ends_with('"')
            {
                let after = &tail[MARKS[idx - 1].len()..];
                let Some(after) = after.strip_prefix('"') else {
                    return Ok(None);
                };
                parts.push(Part::Lit(rest[..pos - 1].to_string()));
                parts.push(Part::Field(Field::Value(idx - 1)));
                seen[idx - 1] += 1;
                rest = after;
            } else {
                return Ok(None);
            }
        }
        parts.push(Part::Lit(rest.to_string()));
        // Every value marker exactly once; the state id in extra_info plus
        // wherever the template places it. More would mean the pack's prose
        // contains a marker.
        let in_prompt = p.prompter.render_key(&TaskKey {
            state_id: MARK_SID.into(),
            source_state_id: "x".into(),
            track: track.as_str().unwrap_or_default().to_lowercase(),
            stage: stage.to_string(),
            view_index: 0,
        })?;
        let expected_sid = 1 + json::to_cj(&in_prompt)
            .map_err(|_| RoundError::NotStableJson)?
            .matches(MARK_SID)
            .count();
        let prose_has_marker = p.k.system_prompt.contains("@@BAT")
            || json::to_cj(&in_prompt)
                .map_or(true, |t| t.matches("@@BAT").count() != expected_sid - 1);
        if seen != [1; 7] || sid_seen != expected_sid || prose_has_marker {
            return Ok(None);
        }
        let lit_len = parts
            .iter()
            .map(|x| if let Part::Lit(t) = x { t.len() } else { 0 })
            .sum();
        Ok(Some(RowTemplate { parts, lit_len }))
    }

    fn write(&self, out: &mut String, sid: &str, values: &[&str; 7]) {
        out.reserve(self.lit_len + 256);
        for part in &self.parts {
            match part {
                Part::Lit(t) => out.push_str(t),
                Part::Field(Field::StateId) => out.push_str(sid),
                Part::Field(Field::Value(i)) => out.push_str(values[*i]),
            }
        }
    }
}

/// The round's `train.jsonl` bytes plus the fields §C.8 checks (as small
/// rows holding only `extra_info.{source_pool,target_stage,state_id}`).
/// Byte-identical to `encode_jsonl(build_round(..))`, only much faster.
pub fn build_round_jsonl(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    source_rows: &[Map],
    req: &RoundRequest<'_>,
) -> Result<(Vec<u8>, Vec<Value>), RoundError> {
    let plan = plan_round(k, source_rows, req)?;
    let projector = Projector {
        k,
        prompter,
        round_id: req.round_id,
        source_sha256: req.source_sha256,
        rewards: reward_contracts(k)?,
    };
    // Templates, keyed by (track value, stage, pool); built sequentially
    // (there are few) so the parallel part only reads them.
    let mut templates: BTreeMap<(String, &str, &str), Option<RowTemplate>> = BTreeMap::new();
    for s in plan.iter().flatten() {
        let track = s.row.get("track").cloned().unwrap_or(Value::Null);
        let key = (
            json::to_cj(&track).map_err(|_| RoundError::NotStableJson)?,
            s.stage,
            s.pool,
        );
        if let std::collections::btree_map::Entry::Vacant(slot) = templates.entry(key) {
            let t = match track {
                Value::Str(_) => RowTemplate::new(&projector, &track, s.stage, s.pool)?,
                _ => None,
            };
            slot.insert(t);
        }
    }
    let cj = |v: Option<&Value>| {
        json::to_cj(v.unwrap_or(&Value::Null)).map_err(|_| RoundError::NotStableJson)
    };
    // Each source row's CJ fragments, encoded once (a round reuses each
    // of its 126 rows dozens of times). Keyed by the row's address, which
    // is stable: the plan borrows `source_rows`.
    let mut fragments: HashMap<usize, [String; 5]> = HashMap::new();
    for s in plan.iter().flatten() {
        let addr = s.row as *const Map as usize;
        if let std::collections::hash_map::Entry::Vacant(slot) = fragments.entry(addr) {
            slot.insert([
                cj(s.row.get("track"))?,
                cj(s.row.get("source_state_id"))?,
                cj(s.row.get("focus_stage"))?,
                cj(s.row.get("outcome_bucket"))?,
                cj(s.row.get("row_sha256"))?,
            ]);
        }
    }
    let round_cj = cj(Some(&Value::Str(req.round_id.to_string())))?;
    let per_batch: Vec<Result<(String, Vec<Value>), RoundError>> = plan
        .par_iter()
        .enumerate()
        .map(|(b, slots)| {
            let mut text = String::with_capacity(ROWS_PER_BATCH * 4096);
            let mut lite = Vec::with_capacity(ROWS_PER_BATCH);
            for (slot, s) in slots.iter().enumerate() {
                let frag = fragments.get(&(s.row as *const Map as usize)).ok_or(
                    RoundError::RowMalformed {
                        row: b * ROWS_PER_BATCH + slot,
                    },
                )?;
                let template = templates
                    .get(&(frag[0].clone(), s.stage, s.pool))
                    .and_then(Option::as_ref);
                let src_id = match s.row.get("source_state_id") {
                    Some(Value::Str(x)) => x.clone(),
                    _ => {
                        return Err(RoundError::RowMalformed {
                            row: b * ROWS_PER_BATCH + slot,
                        })
                    }
                };
                let sid = state_id_from_cj(&round_cj, &frag[1], s.pool, s.stage, s.ordinal);
                match template {
                    Some(t) if task::is_safe_id(&sid) => {
                        let (view, bs, ss) = (s.view.to_string(), b.to_string(), slot.to_string());
                        let refs: [&str; 7] =
                            [&frag[1], &frag[2], &frag[3], &frag[4], &view, &bs, &ss];
                        t.write(&mut text, &sid, &refs);
                    }
                    _ => {
                        let mut row = projector.assemble(
                            s.row,
                            sid.clone(),
                            src_id,
                            s.pool,
                            s.stage,
                            Value::Int(s.view),
                        )?;
                        if let Value::Object(m) = &mut row {
                            if let Some(Value::Object(extra)) = m.get_mut("extra_info") {
                                extra.insert("core_batch_index", Value::from(b));
                                extra.insert("core_batch_slot", Value::from(slot));
                            }
                        }
                        text.push_str(&json::to_cj(&row).map_err(|_| RoundError::NotStableJson)?);
                    }
                }
                text.push('\n');
                lite.push(Value::Object(
                    Map::new().with(
                        "extra_info",
                        Map::new()
                            .with("source_pool", s.pool)
                            .with("target_stage", s.stage)
                            .with("state_id", sid),
                    ),
                ));
            }
            Ok((text, lite))
        })
        .collect();
    let mut bytes = Vec::new();
    let mut lite_rows = Vec::with_capacity(plan.len() * ROWS_PER_BATCH);
    for r in per_batch {
        let (t, l) = r?;
        bytes.extend_from_slice(t.as_bytes());
        lite_rows.extend(l);
    }
    Ok((bytes, lite_rows))
}

fn extra_of(row: &Value, i: usize) -> Result<&Map, RoundError> {
    row.get("extra_info")
        .and_then(Value::as_object)
        .ok_or(RoundError::RowMalformed { row: i })
}

/// `verify_round_rows` (§C.8): counts, pool composition, pool stages and
/// state-id uniqueness. `target` is compared with Python equality.
pub fn verify_round_rows(rows: &[Value], target: &Value, batches: i64) -> Result<(), RoundError> {
    let expected_rows = batches.checked_mul(ROWS_PER_BATCH as i64);
    if expected_rows != Some(rows.len() as i64) {
        return Err(RoundError::RowCountInvalid);
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
                Some(_) => return Err(RoundError::PoolCompositionInvalid),
                None if extra.contains_key("source_pool") => {
                    return Err(RoundError::PoolCompositionInvalid)
                }
                None => {
                    return Err(RoundError::RowMalformed {
                        row: b * ROWS_PER_BATCH + j,
                    })
                }
            }
        }
        if counts != [TARGET_PER_BATCH, MIX_PER_BATCH, E2E_PER_BATCH] {
            return Err(RoundError::PoolCompositionInvalid);
        }
        for (j, row) in batch.iter().enumerate() {
            let i = b * ROWS_PER_BATCH + j;
            let extra = extra_of(row, i)?;
            let stage = extra
                .get("target_stage")
                .ok_or(RoundError::RowMalformed { row: i })?;
            let pool = extra
                .get("source_pool")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let e2e = Value::Str(E2E.into());
            if pool == POOL_TARGET && !json::python_eq(stage, target) {
                return Err(RoundError::TargetStageInvalid);
            }
            if pool == POOL_MIX && (json::python_eq(stage, target) || json::python_eq(stage, &e2e))
            {
                return Err(RoundError::MixStageInvalid);
            }
            if pool == POOL_E2E && !json::python_eq(stage, &e2e) {
                return Err(RoundError::E2eStageInvalid);
            }
            let sid = extra
                .get("state_id")
                .ok_or(RoundError::RowMalformed { row: i })?;
            let key = json::to_cj(sid).map_err(|_| RoundError::NotStableJson)?;
            if !seen.insert(key) {
                return Err(RoundError::StateIdDuplicate);
            }
        }
    }
    Ok(())
}

/// CJ lines, encoded in parallel, concatenated in order.
pub fn encode_jsonl(rows: &[Value]) -> Result<Vec<u8>, RoundError> {
    let parts: Vec<Result<String, RoundError>> = rows
        .par_chunks(64)
        .map(|chunk| {
            let mut s = String::with_capacity(chunk.len() * 4096);
            for r in chunk {
                s.push_str(&json::to_cj(r).map_err(|_| RoundError::NotStableJson)?);
                s.push('\n');
            }
            Ok(s)
        })
        .collect();
    let mut out = Vec::with_capacity(
        parts
            .iter()
            .map(|p| p.as_ref().map_or(0, String::len))
            .sum(),
    );
    for p in parts {
        out.extend_from_slice(p?.as_bytes());
    }
    Ok(out)
}

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

/// The target from `--target-stage` and/or a prescription (§C.7 step 2).
pub fn prescribed_target(
    k: &ContractPack,
    prescription: Option<&[u8]>,
    target: Option<&str>,
) -> Result<String, RoundError> {
    let mut value: Option<Value> = target.map(|t| Value::Str(t.to_string()));
    if let Some(bytes) = prescription {
        // The reference lets a JSON syntax error escape uncaught; reporting
        // it as an invalid prescription keeps the failure a coded one.
        let payload = json::parse_bytes(bytes).map_err(|_| RoundError::PrescriptionInvalid)?;
        let obj = payload.as_object().ok_or(RoundError::PrescriptionInvalid)?;
        let prescribed = obj.get("target_stage").cloned().unwrap_or(Value::Null);
        if let Some(v) = &value {
            if !json::python_eq(&prescribed, v) {
                return Err(RoundError::TargetDisagrees);
            }
        }
        value = Some(prescribed);
    }
    match value {
        Some(Value::Str(s)) if k.stages.contains(&s) => Ok(s),
        _ => Err(RoundError::TargetStageRequired),
    }
}

/// §C.7 steps 1–6 without the file writes: check the source digest, work out
/// the target, read the source, build, verify, encode, and make the manifest.
pub fn materialize(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    inp: &BuildInputs<'_>,
) -> Result<BuiltRound, RoundError> {
    let actual = json::sha256_hex(inp.source_bytes);
    if actual != inp.source_sha256 {
        return Err(RoundError::SourceDigestMismatch);
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
    let manifest = Map::new()
        .with("schema_version", 1i64)
        .with("artifact_kind", "bat_three_pool_round")
        .with("round_id", inp.round_id)
        .with("target_stage", target.as_str())
        .with("batches", inp.batches)
        .with("rows", rows.len())
        .with("rows_per_batch", ROWS_PER_BATCH)
        .with("continuations_per_state", CONTINUATIONS_PER_STATE)
        .with(
            "pool_rows_per_batch",
            Map::new()
                .with(POOL_TARGET, TARGET_PER_BATCH)
                .with(POOL_MIX, MIX_PER_BATCH)
                .with(POOL_E2E, E2E_PER_BATCH),
        )
        .with(
            "source",
            Map::new()
                .with("file", inp.source_file_name)
                .with("sha256", actual.as_str())
                .with("rows", source_rows.len()),
        )
        .with(
            "train",
            Map::new()
                .with("file", TRAIN_FILE)
                .with("sha256", json::sha256_hex(&train)),
        )
        .with("model_specific_serialization", false)
        .with("assistant_targets_included", false);
    Ok(BuiltRound {
        train,
        manifest: Value::Object(manifest),
    })
}

/// The dataset verifier (§I): manifest kind, train digest, line shapes, the
/// §C.8 checks, then per row the task-definition version, prompt binding,
/// reward contract and stage. Returns the PJ-able result object.
pub fn verify_dataset(
    k: &ContractPack,
    prompter: &Prompter<'_>,
    train: &[u8],
    manifest: &[u8],
) -> Result<Value, RoundError> {
    let manifest = json::parse_bytes(manifest).map_err(|_| RoundError::ManifestInvalid)?;
    let m = manifest.as_object().ok_or(RoundError::ManifestInvalid)?;
    if m.get("artifact_kind").and_then(Value::as_str) != Some("bat_three_pool_round") {
        return Err(RoundError::ManifestInvalid);
    }
    let sha = json::sha256_hex(train);
    let declared = m
        .get("train")
        .and_then(|t| t.get("sha256"))
        .and_then(Value::as_str);
    if declared != Some(sha.as_str()) {
        return Err(RoundError::TrainDigestMismatch);
    }
    let text = std::str::from_utf8(train).map_err(|_| RoundError::LineInvalidJson { line: 1 })?;
    let mut rows = Vec::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let v = json::parse(line).map_err(|_| RoundError::LineInvalidJson { line: i + 1 })?;
        if v.as_object().is_none() {
            return Err(RoundError::LineNotObject { line: i + 1 });
        }
        rows.push(v);
    }
    let target = m.get("target_stage").cloned().unwrap_or(Value::Null);
    let batches_v = m.get("batches").cloned().unwrap_or(Value::Null);
    let batches = match batches_v {
        Value::Int(b) => b,
        _ => return Err(RoundError::RowCountInvalid),
    };
    verify_round_rows(&rows, &target, batches)?;
    let checked: Vec<Result<(), RoundError>> = rows
        .par_iter()
        .map(|row| {
            let extra_v = row.get("extra_info").cloned().unwrap_or(Value::Null);
            let extra = extra_v
                .as_object()
                .ok_or(RoundError::RowTaskContractInvalid)?;
            if extra.get("task_definition_version").and_then(Value::as_str)
                != Some(&k.task_definition_version)
            {
                return Err(RoundError::RowTaskContractInvalid);
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
                return Err(RoundError::RowRewardContractInvalid);
            }
            if !k.is_allowed_stage(stage) {
                return Err(RoundError::RowStageInvalid);
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

/// A failed immutable write.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The target exists with other bytes.
    #[error("refusing to overwrite: {}", path.display())]
    Refusing {
        /// The target file.
        path: PathBuf,
    },
    /// Any I/O failure.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The immutable write of §B: identical bytes are a no-op, different bytes
/// are refused, otherwise temp file + fsync + rename in the same folder.
pub fn write_immutable(path: &Path, content: &[u8]) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    match std::fs::read(path) {
        Ok(existing) if existing == content => return Ok(()),
        Ok(_) => {
            return Err(WriteError::Refusing {
                path: path.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    crate::fsutil::write_atomic(path, content).map_err(io)
}

/// The validated identity of a row's extra_info, for callers that need the
/// task contract of a built row.
pub fn row_task_key(k: &ContractPack, row: &Value) -> Result<TaskKey, RoundError> {
    let extra = row
        .get("extra_info")
        .ok_or(RoundError::RowTaskContractInvalid)?;
    Ok(task::validate_extra(k, extra)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::pack::{Pack, DEFAULT_PACK_JSON};

    fn both_paths(pack_json: &str, stage: &str, batches: i64) {
        let pack = Pack::parse(pack_json, "test").expect("pack parses");
        let k = pack.contract().expect("pack valid");
        let prompter = Prompter::new(&k);
        let src = source::build_source(&k).expect("grid");
        let rows = source::read_source(&src.jsonl, &k).expect("source");
        let sha = json::sha256_hex(&src.jsonl);
        let req = RoundRequest {
            round_id: "r07",
            target_stage: stage,
            batches,
            seed: None,
            source_sha256: &sha,
        };
        let slow =
            encode_jsonl(&build_round(&k, &prompter, &rows, &req).expect("slow")).expect("encode");
        let (fast, lite) = build_round_jsonl(&k, &prompter, &rows, &req).expect("fast");
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&slow)
        );
        assert_eq!(lite.len(), slow.iter().filter(|c| **c == b'\n').count());
        verify_round_rows(&lite, &Value::Str(stage.into()), batches).expect("verifies");
    }

    #[test]
    fn state_id_shortcut_equals_the_digest() {
        for (rid, src, pool, stage, ord) in [
            (
                "r01",
                "bat-safe:0098af66e41682e216915948",
                POOL_E2E,
                E2E,
                0i64,
            ),
            ("é\"x", "a\\b", POOL_MIX, "S4", 3023),
        ] {
            let rid_cj = json::to_cj(&Value::Str(rid.into())).expect("cj");
            let src_cj = json::to_cj(&Value::Str(src.into())).expect("cj");
            assert_eq!(
                state_id_from_cj(&rid_cj, &src_cj, pool, stage, ord),
                state_id(rid, src, pool, stage, ord).expect("digest")
            );
        }
    }

    #[test]
    fn spliced_rows_equal_encoded_rows() {
        both_paths(DEFAULT_PACK_JSON, "S2", 5);
    }

    #[test]
    fn spliced_rows_survive_awkward_prose() {
        // Quotes, backslashes, control characters, non-ASCII and the splice
        // markers themselves in the prose: escaping must match, and a marker
        // in the prose must force the slow path rather than corrupt rows.
        let awkward = DEFAULT_PACK_JSON
            .replace(
                "Instance id: {state_id}",
                "Id \\\"{state_id}\\\" \\\\ é\\t✓ @@BAT3@@ {state_id}",
            )
            .replace(
                "toy lesion risk labelling",
                "toy \\\"lesion\\\" @@BAT0@@ labelling",
            );
        both_paths(&awkward, "S5", 3);
    }
}
