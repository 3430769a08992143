//! Audit evaluations: extra evaluation summaries attached to a recorded
//! round that never drive gating or targeting.
//!
//! # Design
//!
//! `bat eval attach REV --summary F --role audit --protocol-id P` records
//! the audit as a **side commit that is on no branch**:
//!
//! - its tree is REV's tree plus `audit/<P>/summary.json` (the summary's
//!   bytes as given), so checking it out shows the round and its audit
//!   together, and content addressing makes the copy free;
//! - its single parent is REV; its metadata is
//!   `{"kind":"bat_audit","audits":"<REV id>","role":"audit","protocol_id":P,
//!   "summary_sha256":…,"scores":{overall,task,agentic,S1..S5},"tracks":{…}}`;
//! - it is named by the tag `audits/<REV full id>/<P>`
//!   (`refs/tags/audits/…`), which keeps it reachable for `gc`/`fsck` and
//!   lets anyone find the audits of a round with one ref listing.
//!
//! No branch, no `refs/promoted/*` ref and no file of REV changes, so the
//! gate, the prescription and the loop's next target — all read from the
//! branch's round commits — cannot see an audit. Tags never move, so an
//! audit, once recorded, is immutable: attaching the same protocol to the
//! same round twice is refused.
//!
//! The ledger writes commits only onto a branch, so the audit commit is
//! made on a short-lived staging branch `bat-audit-staging/<REV>/<P>` that
//! starts at REV and is deleted right after the tag is created (its reflog
//! entries remain, as for any deleted branch).
//!
//! The *gap* ([`audit_gap`]) is audit score − gating score, per mean, stage
//! and track; a gap that widens across rounds is the scorer-overfitting
//! signal. [`audit_column`] is the one-cell form for `bat log`.

use std::collections::BTreeMap;

use bat_ledger::{CommitId, CommitRequest, Kind, Ledger, Mode, Tree, TreeEntry, TreeId};
use serde::Serialize;
use sha2::Digest as _;

use super::{InspectError, RoundTree, SUMMARY_PATH};
use bat_contract::json::{self, Value};
use bat_contract::pack::Pack;
use bat_contract::summary::{finite_stage_scores, StageModel};

/// Tag namespace of audit commits (below `refs/tags/`).
pub const AUDIT_TAG_PREFIX: &str = "audits/";
/// Column header for [`audit_column`] in `bat log`.
pub const AUDIT_COLUMN_HEADER: &str = "audit-gap";
/// The only accepted `--role`.
pub const AUDIT_ROLE: &str = "audit";

/// The scores of one evaluation summary (absent members are `None`/empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Scores {
    /// `means.overall`.
    pub overall: Option<f64>,
    /// `means.task`.
    pub task: Option<f64>,
    /// `means.agentic`.
    pub agentic: Option<f64>,
    /// `stage_scores` (S1..S5).
    pub stages: BTreeMap<String, f64>,
    /// `track_scores`.
    pub tracks: BTreeMap<String, f64>,
}

fn num_map(v: Option<&serde_json::Value>) -> BTreeMap<String, f64> {
    v.and_then(|m| m.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, x)| x.as_f64().map(|f| (k.clone(), f)))
                .collect()
        })
        .unwrap_or_default()
}

impl Scores {
    /// Read a summary document (§D layout) leniently: what is there.
    pub fn from_summary(v: &serde_json::Value) -> Scores {
        let means = v.get("means");
        let m = |k: &str| means.and_then(|x| x.get(k)).and_then(|x| x.as_f64());
        Scores {
            overall: m("overall"),
            task: m("task"),
            agentic: m("agentic"),
            stages: num_map(v.get("stage_scores")),
            tracks: num_map(v.get("track_scores")),
        }
    }

    /// Read round-commit metadata `scores` (`overall`, `task`, `agentic`,
    /// `S1`..`S5`); tracks are not part of it.
    pub fn from_metadata(scores: &serde_json::Value) -> Scores {
        let mut s = Scores::default();
        if let Some(m) = scores.as_object() {
            for (k, x) in m {
                let Some(f) = x.as_f64() else { continue };
                match k.as_str() {
                    "overall" => s.overall = Some(f),
                    "task" => s.task = Some(f),
                    "agentic" => s.agentic = Some(f),
                    _ => {
                        s.stages.insert(k.clone(), f);
                    }
                }
            }
        }
        s
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.overall.is_none()
            && self.task.is_none()
            && self.agentic.is_none()
            && self.stages.is_empty()
            && self.tracks.is_empty()
    }

    /// The metadata form: `{overall, task, agentic, S1..S5}`.
    pub fn to_metadata(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (k, v) in [
            ("overall", self.overall),
            ("task", self.task),
            ("agentic", self.agentic),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), v.into());
            }
        }
        for (k, v) in &self.stages {
            m.insert(k.clone(), (*v).into());
        }
        serde_json::Value::Object(m)
    }
}

/// Signed differences `other − base`; a member is present only when both
/// sides have it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScoreDelta {
    /// Δ overall.
    pub overall: Option<f64>,
    /// Δ task.
    pub task: Option<f64>,
    /// Δ agentic.
    pub agentic: Option<f64>,
    /// Δ per stage.
    pub stages: BTreeMap<String, f64>,
    /// Δ per track.
    pub tracks: BTreeMap<String, f64>,
}

fn sub(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(b? - a?)
}

fn sub_map(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    b.iter()
        .filter_map(|(k, vb)| a.get(k).map(|va| (k.clone(), vb - va)))
        .collect()
}

impl ScoreDelta {
    /// `other − base`.
    pub fn between(base: &Scores, other: &Scores) -> ScoreDelta {
        ScoreDelta {
            overall: sub(base.overall, other.overall),
            task: sub(base.task, other.task),
            agentic: sub(base.agentic, other.agentic),
            stages: sub_map(&base.stages, &other.stages),
            tracks: sub_map(&base.tracks, &other.tracks),
        }
    }
}

/// One audit of a round and its gap to the gating evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditGap {
    /// The audit's protocol id.
    pub protocol_id: String,
    /// The audit commit.
    pub audit_commit: CommitId,
    /// The audit's scores.
    pub scores: Scores,
    /// audit − gating.
    pub gap: ScoreDelta,
}

/// The gating-vs-audit gap of one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    /// The round commit.
    pub commit: CommitId,
    /// Where the gating scores came from: `candidate-eval/summary.json`,
    /// `metadata` or `absent`.
    pub gating_source: String,
    /// The gating evaluation's scores.
    pub gating: Scores,
    /// Every recorded audit, by protocol id.
    pub audits: Vec<AuditGap>,
}

/// The audits recorded for `rev`: (protocol id, audit commit), sorted.
pub fn list_audits(
    ledger: &Ledger,
    rev: &CommitId,
) -> Result<Vec<(String, CommitId)>, InspectError> {
    let prefix = format!("refs/tags/{AUDIT_TAG_PREFIX}{}/", rev.0.to_hex());
    Ok(ledger.list_refs(&prefix)?)
}

/// Every round that has at least one audit (one read of the audit tags),
/// for listings that would otherwise ask [`list_audits`] once per round.
pub fn audited_rounds(
    ledger: &Ledger,
) -> Result<std::collections::HashSet<CommitId>, InspectError> {
    let prefix = format!("refs/tags/{AUDIT_TAG_PREFIX}");
    let mut out = std::collections::HashSet::new();
    for (name, _) in ledger.list_refs(&prefix)? {
        // `<round commit hex>/<protocol id>`
        let hex = name.split('/').next().unwrap_or("");
        if let Some(id) = bat_ledger::ObjectId::from_hex(hex) {
            out.insert(CommitId(id));
        }
    }
    Ok(out)
}

/// The gating scores of a round: its committed summary, else its metadata.
pub fn gating_scores(round: &RoundTree<'_>) -> Result<(String, Scores), InspectError> {
    // A summary that is present but unreadable is an error; the metadata is
    // the fallback only for commits without one.
    if let Some(v) = round.json(SUMMARY_PATH)? {
        return Ok((SUMMARY_PATH.to_string(), Scores::from_summary(&v)));
    }
    if let Some(m) = &round.round {
        let s = Scores::from_metadata(&serde_json::Value::Object(m.scores.clone()));
        if !s.is_empty() {
            return Ok(("metadata".into(), s));
        }
    }
    Ok(("absent".into(), Scores::default()))
}

/// The gating-vs-audit gap of `rev`, or `None` when it has no audits.
pub fn audit_gap(ledger: &Ledger, rev: &CommitId) -> Result<Option<Gap>, InspectError> {
    let audits = list_audits(ledger, rev)?;
    if audits.is_empty() {
        return Ok(None);
    }
    let round = RoundTree::open(ledger, *rev)?;
    let (gating_source, gating) = gating_scores(&round)?;
    let mut out = Vec::with_capacity(audits.len());
    for (protocol_id, audit_commit) in audits {
        let at = RoundTree::open(ledger, audit_commit)?;
        let path = format!("audit/{protocol_id}/summary.json");
        let scores = match at.json(&path)? {
            Some(v) => Scores::from_summary(&v),
            None => at
                .meta("scores")
                .map(Scores::from_metadata)
                .unwrap_or_default(),
        };
        let gap = ScoreDelta::between(&gating, &scores);
        out.push(AuditGap {
            protocol_id,
            audit_commit,
            scores,
            gap,
        });
    }
    Ok(Some(Gap {
        commit: *rev,
        gating_source,
        gating,
        audits: out,
    }))
}

/// One `bat log` cell for the audit gap of a round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditCell {
    /// Short text: the overall gap (audit − gating) with sign and three
    /// decimals, of the audit with the largest |gap|; `+N` more audits are
    /// counted after it (e.g. `-0.031 +1`). `?` when no overall gap is
    /// computable.
    pub text: String,
    /// Number of audits.
    pub audits: usize,
    /// The largest-magnitude overall gap, if any.
    pub overall_gap: Option<f64>,
    /// Its protocol id.
    pub protocol_id: Option<String>,
}

/// The `bat log` integration point: the audit-gap cell of a round commit,
/// or `None` when it has no audits. Put it in a column headed
/// [`AUDIT_COLUMN_HEADER`]; `--json` can embed the cell as it serializes.
pub fn audit_column(ledger: &Ledger, rev: &CommitId) -> Result<Option<AuditCell>, InspectError> {
    let Some(gap) = audit_gap(ledger, rev)? else {
        return Ok(None);
    };
    let best = gap
        .audits
        .iter()
        .filter_map(|a| a.gap.overall.map(|g| (g, &a.protocol_id)))
        .fold(None::<(f64, &String)>, |acc, (g, p)| match acc {
            Some((bg, _)) if bg.abs() >= g.abs() => acc,
            _ => Some((g, p)),
        });
    let n = gap.audits.len();
    let mut text = match best {
        Some((g, _)) => format!("{g:+.3}"),
        None => "?".into(),
    };
    if n > 1 {
        text.push_str(&format!(" +{}", n - 1));
    }
    Ok(Some(AuditCell {
        text,
        audits: n,
        overall_gap: best.map(|b| b.0),
        protocol_id: best.map(|b| b.1.clone()),
    }))
}

/// One round of [`audit_trend`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendPoint {
    /// The round commit.
    pub commit: CommitId,
    /// Its `round_id` metadata, if any.
    pub round_id: Option<String>,
    /// Overall gap (audit − gating) by protocol id; `None` where a side
    /// has no overall mean.
    pub overall_gap: BTreeMap<String, Option<f64>>,
}

/// The gating-vs-audit gap across history: every commit reachable from
/// `start` (newest first, at most `limit` commits examined) that has
/// audits, with its overall gap per protocol. A gap that widens over
/// rounds is the scorer-overfitting signal.
pub fn audit_trend(
    ledger: &Ledger,
    start: CommitId,
    limit: Option<usize>,
) -> Result<Vec<TrendPoint>, InspectError> {
    let mut out = Vec::new();
    for item in ledger.history(start, limit)? {
        let (id, c) = item?;
        let Some(gap) = audit_gap(ledger, &id)? else {
            continue;
        };
        out.push(TrendPoint {
            commit: id,
            round_id: crate::round::meta::round_id_of(&c.metadata).map(str::to_string),
            overall_gap: gap
                .audits
                .iter()
                .map(|a| (a.protocol_id.clone(), a.gap.overall))
                .collect(),
        });
    }
    Ok(out)
}

fn bad(reason: impl Into<String>) -> InspectError {
    InspectError::InvalidSummary {
        reason: reason.into(),
    }
}

fn finite_number(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Int(i)) => Some(*i as f64),
        Some(Value::Float(x)) if x.is_finite() => Some(*x),
        _ => None,
    }
}

/// Validate the bytes of an evaluation summary (contract §D output, with the
/// §E.1 acceptance checks, plus: no bool scores) against the pack's stage
/// list, and return its scores.
pub fn validate_summary(bytes: &[u8], pack: &Pack) -> Result<Scores, InspectError> {
    let v = json::parse_bytes(bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    let m = v.as_object().ok_or_else(|| bad("not a JSON object"))?;
    if m.get("artifact_kind").and_then(Value::as_str) != Some("bat_eval_summary")
        || m.get("status").and_then(Value::as_str) != Some("valid")
    {
        return Err(bad(
            "artifact_kind must be \"bat_eval_summary\" and status \"valid\" (eval_summary_invalid)",
        ));
    }
    let means = m.get("means").and_then(Value::as_object);
    let mean = |k: &str| {
        finite_number(means.and_then(|x| x.get(k)))
            .ok_or_else(|| bad(format!("means.{k} is missing or not a finite number")))
    };
    let (overall, task, agentic) = (mean("overall")?, mean("task")?, mean("agentic")?);
    let model = StageModel::from_pack(pack).map_err(|e| bad(e.to_string()))?;
    let stage_values = finite_stage_scores(m.get("stage_scores"), &model)
        .map_err(|e| bad(format!("stage_scores: {e}")))?;
    match m.get("checkpoint_sha256").and_then(Value::as_str) {
        Some(s) if s.chars().count() == 64 => {}
        _ => return Err(bad("checkpoint_sha256 must be a 64-character string")),
    }
    match m.get("cells").and_then(Value::as_array) {
        Some(c) if !c.is_empty() => {}
        _ => return Err(bad("cells must be a non-empty list")),
    }
    let tracks_obj = match m.get("track_scores").and_then(Value::as_object) {
        Some(t) if !t.is_empty() => t,
        _ => return Err(bad("track_scores must be a non-empty object")),
    };
    let mut tracks = BTreeMap::new();
    for (k, x) in tracks_obj.iter() {
        let f = finite_number(Some(x))
            .ok_or_else(|| bad(format!("track_scores.{k} is not a finite number")))?;
        tracks.insert(k.clone(), f);
    }
    Ok(Scores {
        overall: Some(overall),
        task: Some(task),
        agentic: Some(agentic),
        stages: model.stages.iter().cloned().zip(stage_values).collect(),
        tracks,
    })
}

/// What to attach.
#[derive(Debug, Clone)]
pub struct AttachRequest<'a> {
    /// The round commit being audited.
    pub rev: CommitId,
    /// The summary file's bytes.
    pub summary: &'a [u8],
    /// Must be [`AUDIT_ROLE`].
    pub role: &'a str,
    /// Evaluation protocol id (letters, digits, `.`, `_`, `-`).
    pub protocol_id: &'a str,
    /// The pack whose stage list the summary must have.
    pub pack: &'a Pack,
    /// Commit author.
    pub author: String,
    /// Commit time (default: now).
    pub time: Option<i64>,
    /// Record the audit even when the summary's checkpoint identity is not
    /// the round's candidate; the reason is kept in the audit's metadata.
    pub allow_mismatch: Option<&'a str>,
}

/// What [`attach_audit`] recorded.
#[derive(Debug, Clone, Serialize)]
pub struct AttachOutcome {
    /// The new audit commit (on no branch).
    pub audit_commit: CommitId,
    /// The tag naming it (full ref name).
    pub tag: String,
    /// The audited round commit.
    pub audits: CommitId,
    /// The audit's scores.
    pub scores: Scores,
    /// How the summary's checkpoint identity compared with the round's
    /// (`status` `match`, `mismatch_allowed` or `unchecked`), as recorded.
    pub checkpoint_check: serde_json::Value,
}

fn check_protocol_id(p: &str) -> Result<(), InspectError> {
    let ok = !p.is_empty()
        && p.len() <= 200
        && p.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
        && !p.starts_with(['.', '-'])
        && !p.ends_with('.')
        && !p.contains("..")
        && !p.ends_with(".lock");
    if ok {
        Ok(())
    } else {
        Err(InspectError::InvalidAudit {
            reason: format!(
                "protocol id {p:?} must be ASCII letters, digits, '.', '_' or '-' \
                 (not starting with '.' or '-')"
            ),
        })
    }
}

/// The candidate identity a round records, and where it was read: the
/// round metadata's `candidate_checkpoint_sha256`, else the gating
/// summary's `checkpoint_sha256`.
fn round_identity(round: &RoundTree<'_>) -> Result<Option<(String, String)>, InspectError> {
    if let Some(id) = round
        .round_str(|m| &m.candidate_checkpoint_sha256)
        .filter(|s| !s.is_empty())
    {
        return Ok(Some((
            id.to_string(),
            "candidate_checkpoint_sha256 metadata".into(),
        )));
    }
    Ok(round
        .json(SUMMARY_PATH)?
        .and_then(|v| v.get("checkpoint_sha256")?.as_str().map(str::to_string))
        .map(|id| (id, SUMMARY_PATH.to_string())))
}

/// Compare the summary's `checkpoint_sha256` with the round's candidate
/// identity. An audit of another checkpoint would put a foreign score next
/// to the round's, so a mismatch is refused unless the request carries a
/// reason; the outcome is recorded in the audit's metadata.
fn check_checkpoint(
    ledger: &Ledger,
    req: &AttachRequest<'_>,
) -> Result<serde_json::Value, InspectError> {
    let v: serde_json::Value =
        serde_json::from_slice(req.summary).map_err(|e| bad(format!("not JSON: {e}")))?;
    // validate_summary has checked that it is a 64-character string.
    let summary_identity = v
        .get("checkpoint_sha256")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string();
    let round = RoundTree::open(ledger, req.rev)?;
    let Some((round_id, source)) = round_identity(&round)? else {
        return Ok(serde_json::json!({
            "status": "unchecked",
            "summary_checkpoint_sha256": summary_identity,
            "round_checkpoint_sha256": null,
            "reason": "the round records no candidate identity",
        }));
    };
    if round_id.eq_ignore_ascii_case(&summary_identity) {
        return Ok(serde_json::json!({
            "status": "match",
            "summary_checkpoint_sha256": summary_identity,
            "round_checkpoint_sha256": round_id,
            "source": source,
        }));
    }
    let Some(reason) = req.allow_mismatch else {
        let belongs_to = ledger
            .commits_with_field(
                "candidate_checkpoint_sha256",
                &bat_ledger::FieldValue::Str(summary_identity.clone()),
            )?
            .into_iter()
            .find(|c| *c != req.rev)
            .map(|c| c.to_string());
        return Err(InspectError::CheckpointMismatch {
            rev: req.rev.to_string(),
            summary_identity,
            round_identity: round_id,
            source_of: source,
            belongs_to,
        });
    };
    Ok(serde_json::json!({
        "status": "mismatch_allowed",
        "summary_checkpoint_sha256": summary_identity,
        "round_checkpoint_sha256": round_id,
        "source": source,
        "reason": reason,
    }))
}

/// Put `entry` into `tree`, replacing an entry of the same name.
fn with_entry(tree: Tree, entry: TreeEntry) -> Result<Tree, InspectError> {
    let mut entries: Vec<TreeEntry> = tree
        .entries
        .into_iter()
        .filter(|e| e.name != entry.name)
        .collect();
    entries.push(entry);
    Tree::new(entries).map_err(|reason| InspectError::InvalidAudit { reason })
}

/// Validate the summary and record it as an audit of `req.rev` (see the
/// module docs for the layout). Refuses a second audit with the same
/// protocol id on the same round.
pub fn attach_audit(
    ledger: &mut Ledger,
    req: &AttachRequest<'_>,
) -> Result<AttachOutcome, InspectError> {
    if req.role != AUDIT_ROLE {
        return Err(InspectError::InvalidAudit {
            reason: format!(
                "role {:?} is not supported: only \"{AUDIT_ROLE}\" evaluations can be attached \
                 (the gating evaluation is part of the round itself)",
                req.role
            ),
        });
    }
    check_protocol_id(req.protocol_id)?;
    let scores = validate_summary(req.summary, req.pack)?;
    let hex = req.rev.0.to_hex();
    let tag_short = format!("{AUDIT_TAG_PREFIX}{hex}/{}", req.protocol_id);
    let tag_full = format!("refs/tags/{tag_short}");
    if list_audits(ledger, &req.rev)?
        .iter()
        .any(|(p, _)| p == req.protocol_id)
    {
        return Err(InspectError::InvalidAudit {
            reason: format!(
                "an audit with protocol id {:?} is already recorded for {hex} ({tag_full}); \
                 audits are immutable",
                req.protocol_id
            ),
        });
    }
    let checkpoint_check = check_checkpoint(ledger, req)?;
    let round = ledger.read_commit(&req.rev)?;

    // Tree: REV's tree + audit/<P>/summary.json.
    let blob = Kind::Bytes.id_of(req.summary);
    let proto = Tree::new(vec![TreeEntry {
        name: "summary.json".into(),
        mode: Mode::File,
        id: blob,
        size: req.summary.len() as u64,
    }])
    .map_err(|reason| InspectError::InvalidAudit { reason })?;
    let root = ledger.read_tree(&round.tree)?;
    let audit_dir = match root.entries.iter().find(|e| e.name == "audit") {
        Some(e) if e.mode == Mode::Tree => ledger.read_tree(&TreeId(e.id))?,
        Some(_) => {
            return Err(InspectError::InvalidAudit {
                reason: "the round has a file named `audit` where the audit folder goes".into(),
            })
        }
        None => Tree::new(vec![]).map_err(|reason| InspectError::InvalidAudit { reason })?,
    };
    let audit_dir = with_entry(
        audit_dir,
        TreeEntry {
            name: req.protocol_id.to_string(),
            mode: Mode::Tree,
            id: proto.id().0,
            size: 0,
        },
    )?;
    let root = with_entry(
        root,
        TreeEntry {
            name: "audit".into(),
            mode: Mode::Tree,
            id: audit_dir.id().0,
            size: 0,
        },
    )?;
    let root_id = root.id();
    ledger.write_objects(&[req.summary], &[proto, audit_dir, root])?;

    let metadata = serde_json::json!({
        "kind": "bat_audit",
        "audits": hex,
        "role": req.role,
        "protocol_id": req.protocol_id,
        "summary_sha256": hex::encode(sha2::Sha256::digest(req.summary)),
        "scores": scores.to_metadata(),
        "tracks": scores.tracks,
        "checkpoint_check": checkpoint_check.clone(),
    });
    let staging = format!("bat-audit-staging/{hex}/{}", req.protocol_id);
    let mut creq = CommitRequest::new(format!(
        "audit {} of {}",
        req.protocol_id,
        &hex[..12.min(hex.len())]
    ));
    creq.author = req.author.clone();
    creq.time = req.time;
    creq.metadata = metadata;
    creq.branch = Some(staging.clone());
    let out = crate::round::side::tagged_side_commit(
        ledger,
        &staging,
        Some(req.rev),
        &tag_short,
        |l| -> Result<_, InspectError> { Ok(l.commit_tree(root_id, &creq)?) },
    )?;
    Ok(AttachOutcome {
        audit_commit: out.commit,
        tag: tag_full,
        audits: req.rev,
        scores,
        checkpoint_check,
    })
}
