//! `bat compare A B`: two arms (branches or revisions) round by round and
//! final, in the shape of the BaT paper's headline table: base → final
//! Overall per arm, task and agentic, and the per-stage view S1–S5.
//!
//! An arm is the chain of round commits reachable from its tip, oldest
//! first. Its base is the gate baseline of its oldest round
//! (`baseline-summary.json`: the initial checkpoint's evaluation); its final
//! checkpoint is the newest round whose candidate was inherited (promoted,
//! or any candidate of a `gate=off` replay), scored by that round's
//! candidate evaluation — or the base when no candidate was ever inherited.
//! Compute per arm is the sum of the rounds' trainer-measured compute and
//! bat's trainer wall time, next to the budget of each round.

use std::collections::BTreeMap;

use bat_ledger::{CommitId, Ledger};

use super::{summary_scores, ReplayError};
use crate::round::{resolve_rev, round_commits};
use bat_contract::json;
use bat_contract::vocabulary::GateStatus;

/// One round of an arm.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArmRound {
    /// Round id.
    pub round_id: String,
    /// The commit.
    pub commit: String,
    /// The stage it targeted.
    pub target_stage: String,
    /// The gate's decision.
    pub gate_status: GateStatus,
    /// Whether its candidate became the arm's checkpoint.
    pub inherited: bool,
    /// The candidate's Overall.
    pub overall: Option<f64>,
    /// The replayed commit, for a replay round.
    pub replay_of: Option<String>,
    /// The ablation (`KEY=VALUE,…`; empty for none).
    pub ablation: String,
    /// The round's budget (`null` for rounds recorded before budgets were).
    pub budget: serde_json::Value,
    /// The trainer's measured compute.
    pub measured: serde_json::Value,
    /// Trainer wall seconds measured by bat.
    pub trainer_wall_seconds: Option<f64>,
}

/// One arm.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArmSummary {
    /// The revision as given.
    pub rev: String,
    /// Its commit.
    pub tip: String,
    /// The ablation of its replay rounds (empty: the recorded method).
    pub ablation: String,
    /// Rounds, oldest first.
    pub rounds: Vec<ArmRound>,
    /// The base checkpoint's scores.
    pub base: BTreeMap<String, f64>,
    /// The final checkpoint's scores.
    pub final_scores: BTreeMap<String, f64>,
    /// The round whose candidate is final (`None`: the base).
    pub final_round: Option<String>,
    /// Summed measured compute (`steps`, `rollouts`, `generated_tokens`, …)
    /// and `trainer_wall_seconds`.
    pub compute: BTreeMap<String, f64>,
}

/// Two arms.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    /// Arm A.
    pub a: ArmSummary,
    /// Arm B.
    pub b: ArmSummary,
    /// Whether every round pair (by round id) has the same budget.
    pub same_budget: bool,
}

fn arm(ledger: &Ledger, rev: &str) -> Result<ArmSummary, ReplayError> {
    let tip: CommitId = resolve_rev(ledger, rev).map_err(|_| ReplayError::NotARound {
        rev: rev.to_string(),
    })?;
    let mut infos = round_commits(ledger, tip)?;
    if infos.is_empty() {
        return Err(ReplayError::NotARound {
            rev: rev.to_string(),
        });
    }
    infos.reverse();
    let mut rounds = Vec::new();
    let mut compute: BTreeMap<String, f64> = BTreeMap::new();
    let mut final_scores = None;
    let mut final_round = None;
    let mut ablation = String::new();
    for info in &infos {
        let m = &info.metadata;
        let c = ledger.read_commit(&info.commit)?;
        let prov: serde_json::Value = match ledger.lookup_path(&c.tree, "provenance.json")? {
            Some(e) => serde_json::from_slice(&ledger.read_bytes(&e.id)?).unwrap_or_default(),
            None => serde_json::Value::Null,
        };
        let measured = prov
            .get("measured_compute")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        let wall = prov
            .get("measured_by_bat")
            .and_then(|x| x.get("trainer_wall_seconds"))
            .and_then(serde_json::Value::as_f64);
        if let Some(obj) = measured.as_object() {
            for (k, v) in obj {
                if let Some(x) = v.as_f64() {
                    *compute.entry(k.clone()).or_default() += x;
                }
            }
        }
        if let Some(x) = wall {
            *compute.entry("trainer_wall_seconds".into()).or_default() += x;
        }
        let inherited = m.inherited();
        let scores = m.score_values();
        if inherited {
            final_scores = Some(scores.clone());
            final_round = Some(info.round_id.clone());
        }
        let ab = m.ablation.clone().unwrap_or_default();
        if !ab.is_empty() {
            ablation = ab.clone();
        }
        rounds.push(ArmRound {
            round_id: info.round_id.clone(),
            commit: info.commit.to_string(),
            target_stage: m.target_stage.clone(),
            gate_status: info.gate_status,
            inherited,
            overall: scores.get("overall").copied(),
            replay_of: m.replay_of.clone(),
            ablation: ab,
            budget: m.budget.clone(),
            measured,
            trainer_wall_seconds: wall,
        });
    }
    let oldest = &infos[0];
    let oc = ledger.read_commit(&oldest.commit)?;
    let base = match ledger.lookup_path(&oc.tree, "baseline-summary.json")? {
        Some(e) => json::parse_bytes(&ledger.read_bytes(&e.id)?)
            .map(|v| summary_scores(&v))
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    Ok(ArmSummary {
        rev: rev.to_string(),
        tip: tip.to_string(),
        ablation,
        rounds,
        final_scores: final_scores.unwrap_or_else(|| base.clone()),
        base,
        final_round,
        compute,
    })
}

/// Compare two arms.
pub fn compare(ledger: &Ledger, a: &str, b: &str) -> Result<Comparison, ReplayError> {
    let a = arm(ledger, a)?;
    let b = arm(ledger, b)?;
    let budgets = |x: &ArmSummary| -> BTreeMap<String, serde_json::Value> {
        x.rounds
            .iter()
            .map(|r| (r.round_id.clone(), r.budget.clone()))
            .collect()
    };
    let (ba, bb) = (budgets(&a), budgets(&b));
    let same_budget = ba.len() == bb.len()
        && ba
            .iter()
            .all(|(k, v)| bb.get(k).is_some_and(|w| w == v && !v.is_null()));
    Ok(Comparison { a, b, same_budget })
}
