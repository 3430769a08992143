//! Rounds as data: one typed row per round commit ([`RoundRow`]), the
//! column set shared by `bat export`, `bat query`'s `rounds` view,
//! `bat report` and the Python API's rounds frame. The columns are
//! documented in `docs/rounds.md`; adding a column is a compatible change,
//! renaming or removing one is not.
//!
//! A row is built from three sources, each read through its one typed
//! reader:
//!
//! - the commit's round metadata ([`crate::round::meta::read`]): round id,
//!   stage, gate, scores, replay link, ablation, reward mode (the
//!   campaign's `{reward_mode}` placeholder), candidate identity;
//! - the commit's `provenance.json`: the trainer's measured compute and the
//!   trainer wall time bat measured (the numbers `bat compare` sums);
//! - the audit tags of the commit ([`super::audit::audit_column`]): the
//!   same gating-vs-audit gap `bat log` shows.
//!
//! Rows come oldest first. [`RoundRows`] walks the history once to find the
//! round commits (keeping only their ids, times, parents and decoded
//! metadata) and then builds each row when it is asked for, so a caller
//! that writes rows as they come never holds more than one row's files.

use std::collections::{HashSet, VecDeque};

use bat_ledger::{CommitId, Ledger};
use serde::{Deserialize, Serialize};

use super::audit::{audit_column, audit_gap};
use super::InspectError;
use crate::round::meta::{self, MetaError, RoundMeta};
use bat_contract::vocabulary::GateStatus;

/// Stage names of the S1–S5 columns.
pub const STAGES: [&str; 5] = ["S1", "S2", "S3", "S4", "S5"];

/// The column names of [`RoundRow`], in output order (CSV header, SQL
/// columns). Kept next to the struct; a test checks they agree.
pub const COLUMNS: [&str; 35] = [
    "branch",
    "round_id",
    "round_number",
    "run_id",
    "commit",
    "parent",
    "time",
    "target_stage",
    "next_target_stage",
    "gate_status",
    "promoted",
    "reverted",
    "overall",
    "task",
    "agentic",
    "S1",
    "S2",
    "S3",
    "S4",
    "S5",
    "audit_count",
    "audit_protocol",
    "audit_overall",
    "audit_gap",
    "reward_mode",
    "ablation",
    "replay_of",
    "steps",
    "rollouts",
    "tokens",
    "wall_seconds",
    "trainer_wall_seconds",
    "budget_steps",
    "checkpoint",
    "bat_version",
];

/// One round commit as a flat record (see `docs/rounds.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundRow {
    /// The branch or revision the rows were listed from, as given.
    pub branch: String,
    /// The round id (`r01`).
    pub round_id: String,
    /// Rounds completed by the run with this one (`loop.round_number`).
    pub round_number: Option<i64>,
    /// The campaign's run id (`loop.run_id`).
    pub run_id: Option<String>,
    /// The round commit (hex in every serialized form).
    pub commit: CommitId,
    /// Its first parent (hex), `None` for a root commit.
    pub parent: Option<String>,
    /// Commit time, seconds since the Unix epoch.
    pub time: i64,
    /// The stage trained this round.
    pub target_stage: Option<String>,
    /// The stage the gate prescribed for the next round.
    pub next_target_stage: Option<String>,
    /// The gate's decision.
    pub gate_status: Option<GateStatus>,
    /// Whether the candidate became the next round's starting checkpoint
    /// (a promotion, or a replay round recorded as inherited).
    pub promoted: bool,
    /// Whether a later `bat revert` on the listed history undid it.
    pub reverted: bool,
    /// The candidate's Overall (gating evaluation).
    pub overall: Option<f64>,
    /// Its task mean.
    pub task: Option<f64>,
    /// Its agentic mean.
    pub agentic: Option<f64>,
    /// Stage score S1.
    #[serde(rename = "S1")]
    pub s1: Option<f64>,
    /// Stage score S2.
    #[serde(rename = "S2")]
    pub s2: Option<f64>,
    /// Stage score S3.
    #[serde(rename = "S3")]
    pub s3: Option<f64>,
    /// Stage score S4.
    #[serde(rename = "S4")]
    pub s4: Option<f64>,
    /// Stage score S5.
    #[serde(rename = "S5")]
    pub s5: Option<f64>,
    /// Number of audit evaluations attached.
    pub audit_count: u32,
    /// The protocol of the audit with the largest |gap| (`bat log`'s pick).
    pub audit_protocol: Option<String>,
    /// That audit's Overall.
    pub audit_overall: Option<f64>,
    /// Its Overall minus the gating Overall (`bat log`'s audit-gap).
    pub audit_gap: Option<f64>,
    /// The trainer's reward mode (`stage`, `terminal`), when recorded.
    pub reward_mode: Option<String>,
    /// Replays: the overrides `k=v,…`; `None` for recorded rounds.
    pub ablation: Option<String>,
    /// Replays: the replayed round commit.
    pub replay_of: Option<String>,
    /// Optimizer steps the trainer measured.
    pub steps: Option<f64>,
    /// Rollouts the trainer measured.
    pub rollouts: Option<f64>,
    /// Generated tokens the trainer measured.
    pub tokens: Option<f64>,
    /// Wall seconds the trainer reported itself.
    pub wall_seconds: Option<f64>,
    /// Wall seconds of the trainer process as measured by bat.
    pub trainer_wall_seconds: Option<f64>,
    /// Declared trainer steps of the round's budget.
    pub budget_steps: Option<f64>,
    /// The candidate checkpoint's identity (sha256).
    pub checkpoint: Option<String>,
    /// The bat version that recorded the round (`provenance.json`).
    pub bat_version: Option<String>,
}

/// Errors while listing rounds.
#[derive(Debug, thiserror::Error)]
pub enum RoundsError {
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
    /// A round commit's metadata cannot be decoded.
    #[error("round metadata of commit {commit}: {source}")]
    Meta {
        /// The commit.
        commit: CommitId,
        /// Why (boxed: the ledger errors inside are large).
        source: Box<MetaError>,
    },
    /// A file or audit of a round could not be read (boxed: the
    /// inspection errors are large and this one is rare).
    #[error(transparent)]
    Inspect(Box<InspectError>),
}

impl bat_ledger::Diagnostic for RoundsError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            RoundsError::Ledger(e) => e.kind(),
            RoundsError::Inspect(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            RoundsError::Ledger(e) => e.hint(),
            RoundsError::Inspect(e) => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            RoundsError::Ledger(e) => e.code(),
            RoundsError::Inspect(e) => e.code(),
            _ => None,
        }
    }
}

impl From<InspectError> for RoundsError {
    fn from(e: InspectError) -> Self {
        RoundsError::Inspect(Box::new(e))
    }
}

/// The part of `provenance.json` a row reads.
#[derive(Debug, Default, Deserialize)]
struct Provenance {
    #[serde(default)]
    measured_compute: Option<MeasuredCompute>,
    #[serde(default)]
    measured_by_bat: Option<MeasuredByBat>,
    #[serde(default)]
    bat_version: Option<String>,
}

/// `measured_compute` (see `crate::round::provenance::COMPUTE_KEYS`).
#[derive(Debug, Default, Deserialize)]
struct MeasuredCompute {
    steps: Option<f64>,
    rollouts: Option<f64>,
    generated_tokens: Option<f64>,
    wall_seconds: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
struct MeasuredByBat {
    trainer_wall_seconds: Option<f64>,
}

/// The round's `budget` member (`crate::round::provenance::round_budget`).
#[derive(Debug, Default, Deserialize)]
struct Budget {
    #[serde(default)]
    trainer: Option<TrainerBudget>,
}

#[derive(Debug, Default, Deserialize)]
struct TrainerBudget {
    steps: Option<f64>,
}

/// A round commit found by the walk, waiting to become a row.
struct Pending {
    id: CommitId,
    parent: Option<CommitId>,
    time: i64,
    meta: RoundMeta,
}

/// The rows of the round commits reachable from a start commit, oldest
/// first, built one at a time.
pub struct RoundRows<'l> {
    ledger: &'l Ledger,
    branch: String,
    pending: VecDeque<Pending>,
    reverted: HashSet<CommitId>,
}

impl<'l> RoundRows<'l> {
    /// Walk the history from `start` (every parent, as `bat log`) and queue
    /// its round commits; `branch` is copied into every row.
    pub fn new(ledger: &'l Ledger, branch: &str, start: CommitId) -> Result<Self, RoundsError> {
        let mut newest_first = Vec::new();
        let mut reverted = HashSet::new();
        for item in ledger.history(start, None)? {
            let (id, c) = item?;
            match meta::read(&c.metadata) {
                Ok(Some(m)) => newest_first.push(Pending {
                    id,
                    parent: c.parents.first().copied(),
                    time: c.time,
                    meta: m,
                }),
                Ok(None) => reverted.extend(crate::round::reverted_by(&c)),
                Err(e) => {
                    return Err(RoundsError::Meta {
                        commit: id,
                        source: Box::new(e),
                    })
                }
            }
        }
        newest_first.reverse();
        Ok(RoundRows {
            ledger,
            branch: branch.to_string(),
            pending: newest_first.into(),
            reverted,
        })
    }

    /// Rounds not yet returned.
    pub fn remaining(&self) -> usize {
        self.pending.len()
    }

    fn build(&self, p: Pending) -> Result<RoundRow, RoundsError> {
        let m = &p.meta;
        let scores = m.score_values();
        let score = |k: &str| scores.get(k).copied();
        let c = self.ledger.read_commit(&p.id)?;
        let prov: Provenance = match self.ledger.lookup_path(&c.tree, "provenance.json")? {
            // An unreadable provenance file leaves the compute columns
            // empty, as `bat compare` does; it never hides the round.
            Some(e) => serde_json::from_slice(&self.ledger.read_bytes(&e.id)?).unwrap_or_default(),
            None => Provenance::default(),
        };
        let measured = prov.measured_compute.unwrap_or_default();
        let budget: Budget = serde_json::from_value(m.budget.clone()).unwrap_or_default();
        let (audit_count, audit_protocol, audit_gap_v, audit_overall) =
            match audit_column(self.ledger, &p.id)? {
                None => (0, None, None, None),
                Some(cell) => {
                    let overall = match (&cell.protocol_id, audit_gap(self.ledger, &p.id)?) {
                        (Some(pid), Some(g)) => g
                            .audits
                            .iter()
                            .find(|a| &a.protocol_id == pid)
                            .and_then(|a| a.scores.overall),
                        _ => None,
                    };
                    (
                        u32::try_from(cell.audits).unwrap_or(u32::MAX),
                        cell.protocol_id,
                        cell.overall_gap,
                        overall,
                    )
                }
            };
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let loop_meta = m.loop_meta.as_ref();
        let reward_mode = loop_meta.and_then(|l| {
            l.campaign
                .extra_placeholders
                .iter()
                .find(|(k, _)| k == "{reward_mode}")
                .map(|(_, v)| v.clone())
        });
        let commit = p.id;
        Ok(RoundRow {
            branch: self.branch.clone(),
            round_id: m.round_id.clone(),
            round_number: loop_meta.map(|l| l.round_number),
            run_id: loop_meta.map(|l| l.run_id.clone()),
            reverted: self.reverted.contains(&commit),
            commit,
            parent: p.parent.map(|x| x.to_string()),
            time: p.time,
            target_stage: nonempty(&m.target_stage),
            next_target_stage: loop_meta
                .map(|l| l.next_target_stage(&m.next_target_stage).to_string())
                .or_else(|| nonempty(&m.next_target_stage))
                .filter(|s| !s.is_empty()),
            gate_status: Some(m.gate_status),
            promoted: m.inherited(),
            overall: score("overall"),
            task: score("task"),
            agentic: score("agentic"),
            s1: score("S1"),
            s2: score("S2"),
            s3: score("S3"),
            s4: score("S4"),
            s5: score("S5"),
            audit_count,
            audit_protocol,
            audit_overall,
            audit_gap: audit_gap_v,
            reward_mode,
            ablation: m.ablation.clone(),
            replay_of: m.replay_of.clone(),
            steps: measured.steps,
            rollouts: measured.rollouts,
            tokens: measured.generated_tokens,
            wall_seconds: measured.wall_seconds,
            trainer_wall_seconds: prov.measured_by_bat.and_then(|b| b.trainer_wall_seconds),
            budget_steps: budget.trainer.and_then(|t| t.steps),
            checkpoint: nonempty(&m.candidate_checkpoint_sha256),
            bat_version: prov.bat_version,
        })
    }
}

impl Iterator for RoundRows<'_> {
    type Item = Result<RoundRow, RoundsError>;

    fn next(&mut self) -> Option<Self::Item> {
        let p = self.pending.pop_front()?;
        Some(self.build(p))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.pending.len(), Some(self.pending.len()))
    }
}

/// Every round row reachable from `start`, oldest first; `branch` is the
/// name the caller listed them by.
pub fn round_rows(
    ledger: &Ledger,
    branch: &str,
    start: CommitId,
) -> Result<Vec<RoundRow>, RoundsError> {
    RoundRows::new(ledger, branch, start)?.collect()
}

impl RoundRow {
    /// The row's values in [`COLUMNS`] order, as JSON values (`null` for
    /// absent), for writers that need positional columns (CSV, SQL).
    pub fn values(&self) -> Vec<serde_json::Value> {
        let v = serde_json::to_value(self).expect("a round row is plain data");
        COLUMNS.iter().map(|c| v[*c].clone()).collect()
    }

    /// Stage score `S1`…`S5` by 0-based index.
    pub fn stage(&self, i: usize) -> Option<f64> {
        [self.s1, self.s2, self.s3, self.s4, self.s5]
            .get(i)
            .copied()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RoundRow {
        RoundRow {
            branch: "main".into(),
            round_id: "r01".into(),
            round_number: Some(1),
            run_id: Some("run".into()),
            commit: CommitId(bat_ledger::ObjectId::of_bytes(b"c")),
            parent: None,
            time: 1,
            target_stage: Some("S1".into()),
            next_target_stage: Some("S2".into()),
            gate_status: Some(GateStatus::Promote),
            promoted: true,
            reverted: false,
            overall: Some(0.5),
            task: None,
            agentic: None,
            s1: Some(0.1),
            s2: None,
            s3: None,
            s4: None,
            s5: Some(0.5),
            audit_count: 0,
            audit_protocol: None,
            audit_overall: None,
            audit_gap: None,
            reward_mode: None,
            ablation: None,
            replay_of: None,
            steps: None,
            rollouts: None,
            tokens: None,
            wall_seconds: None,
            trainer_wall_seconds: None,
            budget_steps: None,
            checkpoint: None,
            bat_version: None,
        }
    }

    #[test]
    fn columns_name_every_serialized_member_in_order() {
        let v = serde_json::to_value(sample()).expect("serializes");
        let keys: Vec<&str> = v
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut want: Vec<&str> = COLUMNS.to_vec();
        let mut got = keys.clone();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        let vals = sample().values();
        assert_eq!(
            vals[COLUMNS.iter().position(|c| *c == "S5").expect("S5")],
            0.5
        );
        assert_eq!(vals[0], "main");
        assert_eq!(sample().stage(0), Some(0.1));
        assert_eq!(sample().stage(4), Some(0.5));
    }

    #[test]
    fn revert_metadata_is_recognised_by_kind() {
        let reverted = CommitId(bat_ledger::ObjectId([7; 32]));
        let commit = |metadata| bat_ledger::Commit {
            tree: bat_ledger::TreeId(bat_ledger::ObjectId([0; 32])),
            parents: vec![],
            author: String::new(),
            time: 0,
            message: String::new(),
            metadata,
            fields: Default::default(),
        };
        let revert = commit(serde_json::json!({
            "kind": "bat_revert", "reverts": reverted.to_string(), "restored_commit": null
        }));
        assert_eq!(crate::round::reverted_by(&revert), Some(reverted));
        let other = commit(serde_json::json!({
            "kind": "bat_round", "reverts": reverted.to_string()
        }));
        assert_eq!(crate::round::reverted_by(&other), None);
    }
}
