//! The metadata of a round commit: one typed, versioned schema
//! ([`RoundMeta`]) and the one reader ([`read`]) every consumer goes
//! through. The format is described field by field in
//! `docs/round-metadata.md`.
//!
//! A round commit records its own round's facts only. Campaign-wide state
//! that used to be copied into every commit is referenced instead:
//!
//! - the evaluation summaries the loop carries (the gate baseline for the
//!   next round and the campaign's initial summary) are named by object id
//!   (BLAKE3 of the file's bytes). Both are files of round commit trees on
//!   the same first-parent chain (`candidate-eval/summary.json` or
//!   `baseline-summary.json`), so `gc`, `fsck` and transfers keep them
//!   without a new reachability rule, and an unchanged baseline is one
//!   object however many rounds name it;
//! - the loop's `history` is a chain: each round commit stores its own
//!   history element and the history length; the full history is read
//!   back by walking the first-parent chain over the rounds of the same run
//!   ([`LoopMeta::history`]).
//!
//! The campaign (argv templates, paths, sizes) stays inline: it is a few
//! hundred bytes, the same for every round, and keeping it in the commit
//! keeps each round replayable from its own commit.
//!
//! # Versions
//!
//! The document's `schema` is [`ROUND_META_SCHEMA`]; a document without one
//! is version 0, written before this module existed. Version 0 documents
//! carry the whole loop state inline (`loop.schema_version` 1, with
//! `loop.state.history` and the summaries as objects); [`read`] accepts
//! them, and every accessor answers the same questions from either shape,
//! so ledgers written by older versions open unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bat_ledger::{CommitId, Ledger, ObjectId};
use serde::{Deserialize, Serialize};

use super::campaign::Campaign;
use bat_contract::json::{self, Value};
use bat_contract::vocabulary::GateStatus;

/// Version of the round metadata document written by this build.
pub const ROUND_META_SCHEMA: u32 = 1;
/// `kind` of a round commit.
pub const ROUND_KIND: &str = "bat_round";
/// `kind` of a revert commit (`bat revert`).
pub const REVERT_KIND: &str = "bat_revert";
/// `loop.schema_version` of the inline state written before version 1.
pub const LOOP_INLINE_VERSION: i64 = 1;
/// `loop.schema_version` of the referencing loop record.
pub const LOOP_CHAIN_VERSION: i64 = 2;

/// A metadata document that claims to be a round but cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// Written by a newer bat.
    #[error("round metadata schema {schema} is newer than this bat understands ({ROUND_META_SCHEMA}); upgrade bat")]
    Unsupported {
        /// The version found.
        schema: u64,
    },
    /// A member is missing or has the wrong type.
    #[error("round metadata is malformed: {reason}")]
    Malformed {
        /// The decoder's message.
        reason: String,
    },
    /// A referenced summary or history element is not available.
    #[error("loop state of run {run_id} is incomplete: {reason}")]
    Incomplete {
        /// The run.
        run_id: String,
        /// What is missing.
        reason: String,
    },
    /// The ledger failed while following a reference.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
}

impl bat_ledger::Diagnostic for MetaError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            MetaError::Ledger(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            MetaError::Ledger(e) => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            MetaError::Ledger(e) => e.code(),
            _ => None,
        }
    }
}

/// The metadata of a round commit (`kind` `bat_round`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundMeta {
    /// Document version; 0 (absent) for documents written before it existed.
    #[serde(default)]
    pub schema: u32,
    /// Always `bat_round`.
    pub kind: String,
    /// The round id (`r01`).
    pub round_id: String,
    /// The stage trained this round.
    #[serde(default)]
    pub target_stage: String,
    /// The stage the gate prescribed for the next round.
    #[serde(default)]
    pub next_target_stage: String,
    /// The gate's decision (`promote` or `hold`).
    pub gate_status: GateStatus,
    /// Why the next target was selected.
    #[serde(default)]
    pub selection_reason: String,
    /// The candidate's model identity.
    #[serde(default)]
    pub candidate_checkpoint_sha256: String,
    /// The checkpoint the next round starts from (the prescription's).
    #[serde(default)]
    pub starting_checkpoint_sha256: String,
    /// The checkpoint this round trained from (the gate's baseline).
    #[serde(default)]
    pub trained_from_checkpoint_sha256: String,
    /// sha256 of the raw evaluation.
    #[serde(default)]
    pub raw_eval_sha256: String,
    /// BLAKE3 of the raw evaluation, when its bytes were read.
    #[serde(default)]
    pub raw_eval_blake3: Option<String>,
    /// Whether the raw evaluation is kept in the private area.
    #[serde(default)]
    pub raw_eval_kept: bool,
    /// `reference` or `bat`: the layout the round was committed from.
    #[serde(default)]
    pub layout: String,
    /// `overall`, `task`, `agentic`, `S1`…`S5` of the candidate summary.
    #[serde(default)]
    pub scores: serde_json::Map<String, serde_json::Value>,
    /// The round's compute budget.
    #[serde(default)]
    pub budget: serde_json::Value,
    /// Replays: the replayed round commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// Replays: its round id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of_round_id: Option<String>,
    /// Replays: the overrides as `k=v,k=v` (empty for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ablation: Option<String>,
    /// Replays: the overrides as an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ablation_overrides: Option<serde_json::Value>,
    /// Replays: whether the candidate became the next start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited: Option<bool>,
    /// What `bat run` and `bat replay` need to continue a campaign.
    #[serde(default, rename = "loop", skip_serializing_if = "Option::is_none")]
    pub loop_meta: Option<LoopMeta>,
}

/// Where a loop's current checkpoint is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurrentCheckpoint {
    /// The folder when the round was recorded.
    pub path: String,
    /// Its model identity.
    pub sha256: String,
    /// The round whose candidate it is (`None`: the initial checkpoint).
    #[serde(default)]
    pub round_id: Option<String>,
}

/// A child log recorded with a round.
///
/// Since [`LOG_TREE_DIR`] exists, the log's bytes are a file of the round
/// commit's tree (`tree`), committed with the round, and the file at `path`
/// is removed once the commit is durable. Records written before that have
/// no `tree`: their logs stayed outside the ledger, at `path`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogRef {
    /// Where the child wrote it.
    pub path: String,
    /// sha256 of its bytes.
    pub sha256: String,
    /// Its path in the round commit's tree (`logs/trainer.stdout`); `None`
    /// in records from before logs were committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
}

/// The folder of a round commit's tree that holds the round's child logs.
pub const LOG_TREE_DIR: &str = "logs";

impl LogRef {
    /// The tree path a log written at `path` is committed under:
    /// `logs/<file name>` (`logs/trainer.stdout`).
    pub fn tree_path_for(path: &Path) -> Option<String> {
        let name = path.file_name()?.to_str()?;
        valid_log_name(name).then(|| format!("{LOG_TREE_DIR}/{name}"))
    }

    /// The file name of `tree` when it is a well-formed log path
    /// (`logs/<name>`, one component, not `.`/`..`): tree paths come from
    /// metadata handed in by callers, so they are checked before use.
    pub fn tree_file_name(&self) -> Option<&str> {
        let name = self.tree.as_deref()?.strip_prefix(LOG_TREE_DIR)?;
        let name = name.strip_prefix('/')?;
        valid_log_name(name).then_some(name)
    }
}

/// sha256 (hex) of a log file, read in chunks (a trainer's log may be
/// large).
pub fn log_sha256(path: &Path) -> std::io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex::encode(h.finalize()))
}

fn valid_log_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// An evaluation summary named by a loop record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SummaryRef {
    /// Version 2: the object id of the summary file's bytes.
    Object(ObjectId),
    /// Version 1 (inline): the summary itself.
    Inline(serde_json::Value),
}

/// The inline state document of version-1 loop records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InlineState {
    /// Rounds completed.
    pub completed_rounds: i64,
    /// The next target.
    pub next_target_stage: String,
    /// One element per completed round.
    pub history: Vec<serde_json::Value>,
}

/// The `"loop"` member: what resuming or replaying a campaign needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopMeta {
    /// [`LOOP_CHAIN_VERSION`] (or [`LOOP_INLINE_VERSION`] when read from an
    /// old ledger).
    pub schema_version: i64,
    /// The campaign's run id (kept by `--resume`).
    pub run_id: String,
    /// The campaign as started.
    pub campaign: Campaign,
    /// Rounds completed with this one.
    pub round_number: i64,
    /// The checkpoint the next round trains from.
    pub current_checkpoint: CurrentCheckpoint,
    /// The summary the next round is gated against.
    pub baseline_summary: SummaryRef,
    /// The campaign's initial (baseline evaluation) summary.
    pub initial_summary: SummaryRef,
    /// Version 2: this round's element of the loop history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_entry: Option<serde_json::Value>,
    /// Version 2: the length of the loop history including this round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_len: Option<u64>,
    /// The next target stage (version 2; version 1 keeps it in `state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_target_stage: Option<String>,
    /// Version 1: the inline state document, history included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InlineState>,
    /// The child logs of this round.
    #[serde(default)]
    pub logs: BTreeMap<String, LogRef>,
    /// The benchmark pack this round ran with, by content: its
    /// [`pack_blake3`]. Absent in rounds recorded before packs were
    /// digested; those are compared by the campaign's pack path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_blake3: Option<String>,
}

/// A benchmark pack's content digest: the BLAKE3 (hex) of the pack as
/// `bat pack show` prints it (sorted keys, two-space indent, one final
/// LF), which is also the object id the ledger would store that file
/// under. Whitespace and key order of the pack file do not change it; any
/// value does.
pub fn pack_blake3(pack: &bat_contract::pack::Pack) -> String {
    ObjectId::of_bytes(json::pretty_json_file(pack.value()).as_bytes()).to_hex()
}

fn malformed(e: impl std::fmt::Display) -> MetaError {
    MetaError::Malformed {
        reason: e.to_string(),
    }
}

/// The few members of a commit's metadata that a history listing shows
/// (the log table, the `--json` audit column), read straight from the
/// stored JSON text without building the whole document: on a long
/// campaign the log reads thousands of these. Every member is optional, so
/// any commit's metadata (plain, round, revert, any schema) reads.
#[derive(Debug, Default, Deserialize)]
pub struct Headline<'a> {
    /// `bat_round`, `bat_revert` or absent.
    #[serde(borrow, default)]
    pub kind: Option<std::borrow::Cow<'a, str>>,
    /// Rounds: the round id.
    #[serde(borrow, default)]
    pub round_id: Option<std::borrow::Cow<'a, str>>,
    /// Rounds: the stage trained.
    #[serde(borrow, default)]
    pub target_stage: Option<std::borrow::Cow<'a, str>>,
    /// Rounds: `promote` or `hold`.
    #[serde(borrow, default)]
    pub gate_status: Option<std::borrow::Cow<'a, str>>,
    /// Rounds: `overall`, `S1`…`S5`, … (non-numbers read as absent).
    #[serde(default)]
    pub scores: BTreeMap<String, serde_json::Value>,
    /// Reverts: the round reverted.
    #[serde(borrow, default)]
    pub reverts_round_id: Option<std::borrow::Cow<'a, str>>,
    /// Reverts: the round promoted back (absent: the initial checkpoint).
    #[serde(borrow, default)]
    pub restored_round_id: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Headline<'a> {
    /// Read from a commit's stored metadata text. Metadata that is not an
    /// object, or whose listed members have other types, reads as empty
    /// (it is not a round's).
    pub fn parse(metadata: &'a serde_json::value::RawValue) -> Headline<'a> {
        serde_json::from_str(metadata.get()).unwrap_or_default()
    }

    /// The `kind`, or "".
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("")
    }

    /// A round commit.
    pub fn is_round(&self) -> bool {
        self.kind() == ROUND_KIND
    }

    /// A round or a revert commit (what the log shows as a table).
    pub fn is_round_like(&self) -> bool {
        matches!(self.kind(), ROUND_KIND | REVERT_KIND)
    }

    /// A score as a number.
    pub fn score(&self, name: &str) -> Option<f64> {
        self.scores.get(name).and_then(serde_json::Value::as_f64)
    }
}

/// Read commit metadata: `Ok(None)` when it is not a round commit's.
pub fn read(metadata: &serde_json::Value) -> Result<Option<RoundMeta>, MetaError> {
    if metadata.get("kind").and_then(serde_json::Value::as_str) != Some(ROUND_KIND) {
        return Ok(None);
    }
    let schema = match metadata.get("schema") {
        None => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| malformed("schema is not a number"))?,
    };
    if schema > u64::from(ROUND_META_SCHEMA) {
        return Err(MetaError::Unsupported { schema });
    }
    let m: RoundMeta = serde_json::from_value(metadata.clone()).map_err(malformed)?;
    if let Some(l) = &m.loop_meta {
        l.check()?;
    }
    Ok(Some(m))
}

/// The round id of a round commit's metadata, without decoding the rest
/// (for walks that only filter).
pub fn round_id_of(metadata: &serde_json::Value) -> Option<&str> {
    (metadata.get("kind").and_then(serde_json::Value::as_str) == Some(ROUND_KIND))
        .then(|| metadata.get("round_id").and_then(serde_json::Value::as_str))
        .flatten()
}

impl RoundMeta {
    /// The document as stored.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("round metadata is plain data")
    }

    /// Whether the candidate became the next round's starting checkpoint:
    /// recorded for replays, else a promotion.
    pub fn inherited(&self) -> bool {
        self.inherited.unwrap_or(self.gate_status.is_promote())
    }

    /// The catalog's indexed fields of the round commit (what `bat query`
    /// and `bat log --where` filter on): the round's identity, stages, gate
    /// decision, checkpoints, raw evaluation digest, the replay link when
    /// there is one, and every score as `scores.<name>`.
    pub fn index_fields(&self) -> BTreeMap<String, bat_ledger::FieldValue> {
        use bat_ledger::FieldValue;
        let text = |v: &str| FieldValue::Str(v.to_string());
        let mut fields: BTreeMap<String, FieldValue> = [
            ("kind", text(&self.kind)),
            ("round_id", text(&self.round_id)),
            ("target_stage", text(&self.target_stage)),
            ("next_target_stage", text(&self.next_target_stage)),
            ("gate_status", text(self.gate_status.as_str())),
            (
                "candidate_checkpoint_sha256",
                text(&self.candidate_checkpoint_sha256),
            ),
            (
                "starting_checkpoint_sha256",
                text(&self.starting_checkpoint_sha256),
            ),
            ("raw_eval_sha256", text(&self.raw_eval_sha256)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let replay = [
            ("replay_of", &self.replay_of),
            ("replay_of_round_id", &self.replay_of_round_id),
            ("ablation", &self.ablation),
        ];
        for (k, v) in replay.iter().filter_map(|(k, v)| Some((k, v.as_deref()?))) {
            fields.insert(k.to_string(), text(v));
        }
        for (k, v) in &self.scores {
            if let Some(f) = FieldValue::from_json(v) {
                fields.insert(format!("scores.{k}"), f);
            }
        }
        fields
    }

    /// The scores as numbers.
    pub fn score_values(&self) -> BTreeMap<String, f64> {
        self.scores
            .iter()
            .filter_map(|(k, v)| v.as_f64().map(|x| (k.clone(), x)))
            .collect()
    }
}

/// What the next round continues from, in contract values.
#[derive(Debug, Clone)]
pub struct LoadedSummary {
    /// The summary's file bytes (version 2: exactly the committed file).
    pub bytes: Vec<u8>,
    /// Parsed.
    pub value: Value,
    /// The object id of `bytes`.
    pub id: ObjectId,
}

impl LoopMeta {
    /// Parse a `"loop"` member on its own.
    pub fn from_value(v: &serde_json::Value) -> Result<LoopMeta, MetaError> {
        let l: LoopMeta = serde_json::from_value(v.clone()).map_err(malformed)?;
        l.check()?;
        Ok(l)
    }

    /// The member as stored.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("loop metadata is plain data")
    }

    fn check(&self) -> Result<(), MetaError> {
        match self.schema_version {
            LOOP_INLINE_VERSION if self.state.is_none() => {
                Err(malformed("loop.state missing (loop schema_version 1)"))
            }
            LOOP_CHAIN_VERSION if self.history_entry.is_none() || self.history_len.is_none() => {
                Err(malformed(
                    "loop.history_entry or loop.history_len missing (loop schema_version 2)",
                ))
            }
            LOOP_INLINE_VERSION | LOOP_CHAIN_VERSION => Ok(()),
            v => Err(malformed(format!("unknown loop schema_version {v}"))),
        }
    }

    /// The next round's target stage (`round_next` is the round's own
    /// `next_target_stage`, the fallback for version 2 records without one).
    pub fn next_target_stage<'a>(&'a self, round_next: &'a str) -> &'a str {
        match (&self.state, &self.next_target_stage) {
            (Some(s), _) => &s.next_target_stage,
            (None, Some(n)) => n,
            (None, None) => round_next,
        }
    }

    /// Rounds completed with this one.
    pub fn completed_rounds(&self) -> i64 {
        self.state
            .as_ref()
            .map_or(self.round_number, |s| s.completed_rounds)
    }

    fn incomplete(&self, reason: impl Into<String>) -> MetaError {
        MetaError::Incomplete {
            run_id: self.run_id.clone(),
            reason: reason.into(),
        }
    }

    /// Load a summary: from the first of `local` files whose bytes have the
    /// recorded id (no ledger read), else from the ledger. Inline (version
    /// 1) summaries are returned as recorded, re-encoded.
    pub fn load_summary(
        &self,
        ledger: &Ledger,
        which: &SummaryRef,
        local: &[PathBuf],
    ) -> Result<LoadedSummary, MetaError> {
        let bytes = match which {
            SummaryRef::Inline(v) => {
                let value = json::from_serde(v).map_err(malformed)?;
                let bytes = json::pretty_json_file(&value).into_bytes();
                return Ok(LoadedSummary {
                    id: ObjectId::of_bytes(&bytes),
                    bytes,
                    value,
                });
            }
            SummaryRef::Object(id) => {
                let on_disk = local
                    .iter()
                    .filter_map(|p| std::fs::read(p).ok())
                    .find(|b| ObjectId::of_bytes(b) == *id);
                match on_disk {
                    Some(b) => b,
                    None if ledger.contains(id)? => ledger.read_bytes(id)?,
                    None => {
                        return Err(self.incomplete(format!(
                            "summary object {id} is neither in the ledger nor in {}",
                            local
                                .iter()
                                .map(|p| p.display().to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )))
                    }
                }
            }
        };
        let value = json::parse_bytes(&bytes)
            .map_err(|e| self.incomplete(format!("a summary is not valid JSON: {e}")))?;
        Ok(LoadedSummary {
            id: ObjectId::of_bytes(&bytes),
            bytes,
            value,
        })
    }

    /// The loop history up to and including the round of commit `at`
    /// (whose record this is). Version 1 records hold it inline; version 2
    /// records are followed back along the first-parent chain, over the
    /// round commits of the same run, until `history_len` elements are
    /// found (a version-1 record on the way supplies the rest at once).
    pub fn history(&self, ledger: &Ledger, at: CommitId) -> Result<Vec<Value>, MetaError> {
        let to_contract = |v: &serde_json::Value| json::from_serde(v);
        if let Some(s) = &self.state {
            return s
                .history
                .iter()
                .map(to_contract)
                .collect::<Result<_, _>>()
                .map_err(malformed);
        }
        let want = self.history_len.unwrap_or(0) as usize;
        let mut newest_first: Vec<serde_json::Value> = Vec::new();
        let mut older: Vec<serde_json::Value> = Vec::new();
        let mut cur = Some(at);
        while let Some(id) = cur {
            if newest_first.len() >= want {
                break;
            }
            let c = ledger.read_commit(&id)?;
            if let Some(l) = read(&c.metadata)?.and_then(|m| m.loop_meta) {
                if l.run_id == self.run_id {
                    match (&l.state, &l.history_entry) {
                        (Some(s), _) => {
                            let need = want - newest_first.len();
                            if s.history.len() < need {
                                return Err(self.incomplete(format!(
                                    "commit {id} holds {} history elements, {need} needed",
                                    s.history.len()
                                )));
                            }
                            older = s.history[..need].to_vec();
                            break;
                        }
                        (None, Some(e)) => newest_first.push(e.clone()),
                        (None, None) => {}
                    }
                }
            }
            cur = c.parents.first().copied();
        }
        if newest_first.len() + older.len() != want {
            return Err(self.incomplete(format!(
                "{} of {want} history elements found on the first-parent chain",
                newest_first.len() + older.len()
            )));
        }
        older
            .iter()
            .chain(newest_first.iter().rev())
            .map(to_contract)
            .collect::<Result<_, _>>()
            .map_err(malformed)
    }

    /// The object id of the campaign's initial summary. Version 2 records
    /// name it; for version 1 records it is the `baseline-summary.json` of
    /// the run's first round (found on the first-parent chain from `at`).
    pub fn initial_summary_id(&self, ledger: &Ledger, at: CommitId) -> Result<ObjectId, MetaError> {
        if let SummaryRef::Object(id) = &self.initial_summary {
            return Ok(*id);
        }
        let mut first: Option<CommitId> = None;
        let mut cur = Some(at);
        while let Some(id) = cur {
            let c = ledger.read_commit(&id)?;
            if let Some(l) = read(&c.metadata)?.and_then(|m| m.loop_meta) {
                if l.run_id == self.run_id {
                    first = Some(id);
                    if l.completed_rounds() <= 1 {
                        break;
                    }
                }
            }
            cur = c.parents.first().copied();
        }
        let first = first.ok_or_else(|| self.incomplete("no round of the run found"))?;
        let tree = ledger.read_commit(&first)?.tree;
        match ledger.lookup_path(&tree, "baseline-summary.json")? {
            Some(e) => Ok(e.id),
            None => Err(self.incomplete(format!(
                "the first round commit {first} has no baseline-summary.json"
            ))),
        }
    }
}

impl LoopMeta {
    /// The summaries a continuation starts from: (the next round's gate
    /// baseline, the campaign's initial summary). Version 2 references are
    /// read from the work dir `w` when the files there still have the
    /// recorded ids, else from the ledger. For version 1 records the bytes
    /// are the committed files (this round's `candidate-eval/summary.json`
    /// when it holds the current checkpoint, else its
    /// `baseline-summary.json`; the first round's `baseline-summary.json`),
    /// so the ids name objects of the ledger either way.
    pub fn summaries(
        &self,
        ledger: &Ledger,
        at: CommitId,
        w: &Path,
    ) -> Result<(LoadedSummary, LoadedSummary), MetaError> {
        let initial_file = w.join("baseline-eval").join("summary.json");
        let mut baseline_files = Vec::new();
        if let Some(r) = &self.current_checkpoint.round_id {
            baseline_files.push(w.join(r).join("candidate-eval").join("summary.json"));
        }
        baseline_files.push(initial_file.clone());
        let from_object = |id: ObjectId| -> Result<LoadedSummary, MetaError> {
            self.load_summary(ledger, &SummaryRef::Object(id), &[])
        };
        let baseline = match &self.baseline_summary {
            SummaryRef::Object(_) => {
                self.load_summary(ledger, &self.baseline_summary, &baseline_files)?
            }
            SummaryRef::Inline(_) => {
                let c = ledger.read_commit(&at)?;
                let own = round_id_of(&c.metadata).map(str::to_string);
                let path = if own.is_some() && own == self.current_checkpoint.round_id {
                    "candidate-eval/summary.json"
                } else {
                    "baseline-summary.json"
                };
                match ledger.lookup_path(&c.tree, path)? {
                    Some(e) => from_object(e.id)?,
                    None => self.load_summary(ledger, &self.baseline_summary, &[])?,
                }
            }
        };
        let initial = match &self.initial_summary {
            SummaryRef::Object(_) => {
                self.load_summary(ledger, &self.initial_summary, &[initial_file])?
            }
            SummaryRef::Inline(_) => match self.initial_summary_id(ledger, at) {
                Ok(id) => from_object(id)?,
                Err(_) => self.load_summary(ledger, &self.initial_summary, &[])?,
            },
        };
        Ok((baseline, initial))
    }
}

/// The object id a file's bytes are stored under.
pub fn file_object_id(path: &Path) -> std::io::Result<ObjectId> {
    std::fs::read(path).map(|b| ObjectId::of_bytes(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replayed round's metadata as stored: every member of the document
    /// kind, with an integer and a float score.
    fn replay_document() -> serde_json::Value {
        serde_json::json!({
            "schema": 1, "kind": "bat_round", "round_id": "r02",
            "target_stage": "S2", "next_target_stage": "E2E",
            "gate_status": "hold", "selection_reason": "weakest_stage",
            "candidate_checkpoint_sha256": "cc", "starting_checkpoint_sha256": "ss",
            "trained_from_checkpoint_sha256": "tt", "raw_eval_sha256": "rr",
            "raw_eval_blake3": null, "raw_eval_kept": false, "layout": "reference",
            "scores": {"overall": 0.25, "S1": 1, "task": null},
            "budget": {"steps": 3}, "replay_of": "aa", "replay_of_round_id": "r02",
            "ablation": "reward=terminal", "ablation_overrides": {"reward": "terminal"},
            "inherited": true,
        })
    }

    #[test]
    fn index_fields_are_the_documents_scalar_members_and_scores() {
        use bat_ledger::FieldValue;
        let doc = replay_document();
        let m = read(&doc).expect("reads").expect("a round");
        assert_eq!(m.gate_status, GateStatus::Hold);
        // The document is written back byte for byte.
        assert_eq!(m.to_value(), doc);
        let fields = m.index_fields();
        // What picking the members out of the stored JSON by name gives.
        let mut expected = BTreeMap::new();
        for k in [
            "kind",
            "round_id",
            "target_stage",
            "next_target_stage",
            "gate_status",
            "candidate_checkpoint_sha256",
            "starting_checkpoint_sha256",
            "raw_eval_sha256",
            "replay_of",
            "replay_of_round_id",
            "ablation",
        ] {
            let v = FieldValue::from_json(&doc[k]).expect("a scalar member");
            expected.insert(k.to_string(), v);
        }
        expected.insert("scores.overall".into(), FieldValue::Float(0.25));
        expected.insert("scores.S1".into(), FieldValue::Int(1));
        assert_eq!(fields, expected);
        // A round that is not a replay has no replay fields.
        let mut plain = doc.clone();
        for k in [
            "replay_of",
            "replay_of_round_id",
            "ablation",
            "ablation_overrides",
            "inherited",
        ] {
            plain.as_object_mut().expect("object").remove(k);
        }
        let f = read(&plain)
            .expect("reads")
            .expect("a round")
            .index_fields();
        assert!(
            !f.contains_key("replay_of") && !f.contains_key("ablation"),
            "{f:?}"
        );
        assert_eq!(f.get("gate_status"), Some(&FieldValue::Str("hold".into())));
    }

    #[test]
    fn an_unknown_gate_status_does_not_read() {
        let mut doc = replay_document();
        doc["gate_status"] = "promoted".into();
        assert!(matches!(read(&doc), Err(MetaError::Malformed { .. })));
    }

    #[test]
    fn a_path_only_log_ref_reads_without_a_tree_path() {
        let old = serde_json::json!({"path": "/x/logs/r01/trainer.stdout", "sha256": "ab"});
        let r: LogRef = serde_json::from_value(old.clone()).expect("old LogRef reads");
        assert_eq!(r.tree, None);
        assert_eq!(r.tree_file_name(), None);
        // And is written back unchanged.
        assert_eq!(serde_json::to_value(&r).expect("encode"), old);
    }

    #[test]
    fn tree_paths_stay_one_file_under_logs() {
        let p = LogRef::tree_path_for(Path::new("/runs/1/logs/r01/trainer.stderr"));
        assert_eq!(p.as_deref(), Some("logs/trainer.stderr"));
        let with = |t: &str| LogRef {
            path: String::new(),
            sha256: String::new(),
            tree: Some(t.to_string()),
        };
        assert_eq!(
            with("logs/evaluator.stdout").tree_file_name(),
            Some("evaluator.stdout")
        );
        for bad in [
            "logs/",
            "logs/..",
            "logs/a/b",
            "logsx/a",
            "data/train.jsonl",
            "logs",
        ] {
            assert_eq!(with(bad).tree_file_name(), None, "{bad}");
        }
    }
}
