//! Arm scores with confidence intervals, as rows: for each arm (an arm
//! group: one branch, a glob or a comma list, its branches the seeds),
//! every score of the checkpoint after each round and its audit gap, every
//! score of the final checkpoint, and the slope of the audit gap over
//! rounds, each with its mean, interval and the bootstrap that made it.
//! The statistics are [`crate::experiment`]'s (the same numbers as
//! `bat compare`); this module only lays them out for `bat export --ci`,
//! `bat query`'s `arm_scores` table and the Python frame.

use bat_ledger::Ledger;
use serde::Serialize;

use crate::experiment::arms::resolve_str;
use crate::experiment::cells::gather;
use crate::experiment::compare::{arm_statistics, audit_trends, ArmInput};
use crate::experiment::stats::{Bootstrap, Estimate};
use crate::experiment::ExperimentError;

/// Columns of an arm-score row, in output order.
pub const ARM_SCORE_COLUMNS: [&str; 14] = [
    "arm",
    "members",
    "round",
    "round_ids",
    "score",
    "mean",
    "ci_low",
    "ci_high",
    "iqm",
    "runs",
    "scheme",
    "resamples",
    "seed",
    "level",
];

/// One score of one arm at one round (or at the final checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmScoreRow {
    /// The arm's label (`bat/*`, `a,b`, `main`).
    pub arm: String,
    /// Its member branches (seeds), comma-separated.
    pub members: String,
    /// Round position (1-based) in every member; `None` for the final
    /// checkpoint's scores and for the whole-campaign audit-gap slope.
    pub round: Option<i64>,
    /// The members' round ids at that position, comma-separated.
    pub round_ids: Option<String>,
    /// `overall`, `task`, `agentic`, `S1`…, `track:<name>`, `audit_gap`
    /// (gating − audit Overall) or `audit_gap_slope` (per round).
    pub score: String,
    /// The point estimate (mean over the pooled runs; the slope itself).
    pub mean: Option<f64>,
    /// Lower bound of the interval.
    pub ci_low: Option<f64>,
    /// Upper bound of the interval.
    pub ci_high: Option<f64>,
    /// Interquartile mean, where computed.
    pub iqm: Option<f64>,
    /// Scores pooled (seeds × repeats × strata), final scores only.
    pub runs: Option<i64>,
    /// The resampling scheme (`runs`: within each (track, task) stratum,
    /// seeds, then each drawn seed's repeats; `tasks`: tasks within
    /// tracks as well).
    pub scheme: String,
    /// Bootstrap resamples.
    pub resamples: i64,
    /// Bootstrap seed.
    pub seed: u64,
    /// Interval coverage (0.95).
    pub level: f64,
}

impl ArmScoreRow {
    /// The row's values in [`ARM_SCORE_COLUMNS`] order.
    pub fn values(&self) -> Vec<serde_json::Value> {
        let v = serde_json::to_value(self).expect("an arm-score row is plain data");
        ARM_SCORE_COLUMNS.iter().map(|c| v[*c].clone()).collect()
    }

    /// Whether the interval lies above zero (the audit-gap slope flag).
    pub fn above_zero(&self) -> bool {
        self.ci_low.is_some_and(|lo| lo > 0.0)
    }
}

fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Each arm specification's branches resolved and their cells gathered.
fn arm_inputs(ledger: &Ledger, arms: &[String]) -> Result<Vec<ArmInput>, ExperimentError> {
    arms.iter()
        .map(|spec| {
            let group = resolve_str(ledger, spec)?;
            Ok(ArmInput::from_cells(&gather(ledger, &group)?))
        })
        .collect()
}

/// The arm-score rows of `arms` (each an arm specification; one group per
/// spec), arm by arm in the order given: per round, then the final
/// checkpoint's scores, then the audit-gap slope when there is one.
pub fn arm_scores(
    ledger: &Ledger,
    arms: &[String],
    cfg: &Bootstrap,
    ctx: &crate::Ctx,
) -> Result<Vec<ArmScoreRow>, ExperimentError> {
    let inputs = arm_inputs(ledger, arms)?;
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let exp = arm_statistics(&inputs, cfg, ctx)?;
    let mut out = Vec::new();
    for a in &exp.arms {
        let members = a.members.join(",");
        let row = |round: Option<usize>,
                   round_ids: Option<String>,
                   score: String,
                   e: &Estimate,
                   iqm: Option<f64>,
                   runs: Option<usize>| ArmScoreRow {
            arm: a.label.clone(),
            members: members.clone(),
            round: round.map(|r| r as i64),
            round_ids,
            score,
            mean: finite(e.point),
            ci_low: finite(e.lo),
            ci_high: finite(e.hi),
            iqm: iqm.and_then(finite),
            runs: runs.map(|r| r as i64),
            scheme: cfg.scheme.as_str().to_string(),
            resamples: cfg.resamples as i64,
            seed: cfg.seed,
            level: cfg.level,
        };
        for r in &a.rounds {
            let ids = Some(r.round_ids.join(","));
            for s in &r.scores {
                out.push(row(
                    Some(r.round),
                    ids.clone(),
                    s.score.name(),
                    &s.mean,
                    Some(s.iqm),
                    None,
                ));
            }
            if let Some(g) = &r.audit_gap {
                out.push(row(Some(r.round), ids, "audit_gap".into(), g, None, None));
            }
        }
        for s in &a.scores {
            out.push(row(
                None,
                None,
                s.score.name(),
                &s.mean,
                Some(s.iqm.point),
                Some(s.runs),
            ));
        }
        if let Some(t) = &a.audit {
            out.push(row(
                None,
                None,
                "audit_gap_slope".into(),
                &t.slope,
                None,
                None,
            ));
        }
    }
    Ok(out)
}

/// Only the `audit_gap_slope` rows of `arms` (one per arm with at least two
/// audited rounds): the same numbers as [`arm_scores`]' slope rows, at a
/// fraction of the cost (what `bat log` shows).
pub fn audit_slopes(
    ledger: &Ledger,
    arms: &[String],
    cfg: &Bootstrap,
    ctx: &crate::Ctx,
) -> Result<Vec<ArmScoreRow>, ExperimentError> {
    let inputs = arm_inputs(ledger, arms)?;
    let trends = audit_trends(&inputs, cfg, ctx)?;
    Ok(inputs
        .iter()
        .zip(trends)
        .filter_map(|(a, (_, t))| {
            let t = t?;
            Some(ArmScoreRow {
                arm: a.label.clone(),
                members: a.members.join(","),
                round: None,
                round_ids: None,
                score: "audit_gap_slope".into(),
                mean: finite(t.slope.point),
                ci_low: finite(t.slope.lo),
                ci_high: finite(t.slope.hi),
                iqm: None,
                runs: None,
                scheme: cfg.scheme.as_str().to_string(),
                resamples: cfg.resamples as i64,
                seed: cfg.seed,
                level: cfg.level,
            })
        })
        .collect())
}
