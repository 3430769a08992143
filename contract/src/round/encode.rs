//! Encoding a planned round as `train.jsonl` lines: row templates with
//! holes for the per-row values, filled and joined in batch order.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;

use super::plan::*;
use super::*;
use crate::json::{self, Map, Value};
use crate::prompt::Prompter;
use crate::task::{self, ContractPack, TaskKey};

/// Splice markers: distinct strings placed where per-row values go.
pub(super) const MARK_SID: &str = "@@BAT0@@";
pub(super) const MARKS: [&str; 7] = [
    "@@BAT1@@", "@@BAT2@@", "@@BAT3@@", "@@BAT4@@", "@@BAT5@@", "@@BAT6@@", "@@BAT7@@",
];

/// A per-row value a [`RowTemplate`] splices in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    /// The state id, raw (it appears inside the prompt text too).
    StateId,
    /// One of `MARKS`, replaced with its quotes by the value's CJ text.
    Value(usize),
}

#[derive(Debug, Clone)]
pub(super) enum Part {
    Lit(String),
    Field(Field),
}

/// The CJ line of every row with a given (track, stage, pool), with holes
/// for the values that vary per row. Rows of one round differ only in
/// those, so the expensive part (prompt rendering, sorting and escaping
/// ~4 KB of JSON) is done 3 × 7 × 6 times at most instead of once per row.
#[derive(Debug, Clone)]
pub(super) struct RowTemplate {
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
    ) -> Result<Option<RowTemplate>, ViewError> {
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
        let text = json::canonical_json(&row).map_err(|_| ViewError::NotStableJson)?;
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
        let expected_sid = 1 + json::canonical_json(&in_prompt)
            .map_err(|_| ViewError::NotStableJson)?
            .matches(MARK_SID)
            .count();
        let prose_has_marker = p.k.system_prompt.contains("@@BAT")
            || json::canonical_json(&in_prompt)
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
) -> Result<(Vec<u8>, Vec<Value>), ViewError> {
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
            json::canonical_json(&track).map_err(|_| ViewError::NotStableJson)?,
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
        json::canonical_json(v.unwrap_or(&Value::Null)).map_err(|_| ViewError::NotStableJson)
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
    let per_batch: Vec<Result<(String, Vec<Value>), ViewError>> = plan
        .par_iter()
        .enumerate()
        .map(|(b, slots)| {
            let mut text = String::with_capacity(ROWS_PER_BATCH * 4096);
            let mut lite = Vec::with_capacity(ROWS_PER_BATCH);
            for (slot, s) in slots.iter().enumerate() {
                let frag = fragments.get(&(s.row as *const Map as usize)).ok_or(
                    ViewError::RowMalformed {
                        row: b * ROWS_PER_BATCH + slot,
                    },
                )?;
                let template = templates
                    .get(&(frag[0].clone(), s.stage, s.pool))
                    .and_then(Option::as_ref);
                let src_id = match s.row.get("source_state_id") {
                    Some(Value::Str(x)) => x.clone(),
                    _ => {
                        return Err(ViewError::RowMalformed {
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
                        text.push_str(
                            &json::canonical_json(&row).map_err(|_| ViewError::NotStableJson)?,
                        );
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

/// CJ lines, encoded in parallel, concatenated in order.
pub fn encode_jsonl(rows: &[Value]) -> Result<Vec<u8>, ViewError> {
    let parts: Vec<Result<String, ViewError>> = rows
        .par_chunks(64)
        .map(|chunk| {
            let mut s = String::with_capacity(chunk.len() * 4096);
            for r in chunk {
                s.push_str(&json::canonical_json(r).map_err(|_| ViewError::NotStableJson)?);
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
