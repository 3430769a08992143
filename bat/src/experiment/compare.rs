//! `bat compare ARM ARM [ARM…]`: N arms, each a group of seeds, judged with
//! the statistics of [`super::stats`] on the cells of [`super::cells`].
//!
//! For every arm and every score (Overall, task, agentic, each stage, each
//! track) on the final checkpoint: mean, IQM and their bootstrap intervals.
//! For every pair of arms (in the order given: the first against each
//! later one) and every score: the difference of means with its interval,
//! the probability of improvement with its interval, and the verdict. Per
//! round (the checkpoint after round k, rounds aligned by position): each
//! arm's mean of every score with its interval and IQM, and each pair's
//! Overall difference and verdict. Per round with audits: the audit gap
//! (gating minus audit Overall) with its interval, and its least-squares
//! slope over rounds with an interval from the same resamples; an arm whose
//! slope interval lies above zero is flagged (its gating score pulls away
//! from the audit: scorer overfitting). Comparability ([`Field`]): what the
//! arms must share.
//!
//! Every interval of one comparison comes from one pass of
//! [`stats::resample`]: an arm's matrices of one shape (usually all of its
//! checkpoints) share their draws.

use std::collections::{BTreeMap, BTreeSet};

use bat_ledger::Ledger;
use serde::Serialize;

use super::arms::resolve_str;
use super::cells::{gather, matrix, ArmCells, Evaluation, Score};
use super::stats::{
    self, probability_of_improvement, resample, stream_of, ArmRequest, Bootstrap, Distribution,
    Estimate, PairRequest, Pairwise, ScoreMatrix, Verdict,
};
use super::ExperimentError;
use crate::Ctx;

/// What the arms of a comparison must share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Field {
    /// The evaluation protocol id.
    Protocol,
    /// The benchmark pack, by content digest (rounds recorded before
    /// packs were digested: by file path, or the embedded default).
    Pack,
    /// The evaluated (track, task) set and the repeats of each.
    Tasks,
    /// The runtime tool format.
    RuntimeToolFormat,
    /// The evaluator's argv template.
    Evaluator,
    /// The checkpoint the first round trained from.
    BaseCheckpoint,
    /// Each round's compute budget.
    Budget,
}

impl Field {
    /// Every field, in output order.
    pub const ALL: [Field; 7] = [
        Field::Protocol,
        Field::Pack,
        Field::Tasks,
        Field::RuntimeToolFormat,
        Field::Evaluator,
        Field::BaseCheckpoint,
        Field::Budget,
    ];

    /// The name used by `--allow-difference`.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Protocol => "protocol",
            Field::Pack => "pack",
            Field::Tasks => "tasks",
            Field::RuntimeToolFormat => "runtime-tool-format",
            Field::Evaluator => "evaluator",
            Field::BaseCheckpoint => "base-checkpoint",
            Field::Budget => "budget",
        }
    }

    /// Parse a field name.
    pub fn parse(s: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.as_str() == s)
    }
}

/// What a comparison is asked to do.
#[derive(Debug, Clone)]
pub struct CompareRequest {
    /// The arms as written (two or more).
    pub arms: Vec<String>,
    /// The bootstrap's settings.
    pub bootstrap: Bootstrap,
    /// Differences the caller accepts.
    pub allow: Vec<Field>,
}

/// One score of one arm.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreStats {
    /// The score.
    pub score: Score,
    /// Mean with its interval.
    pub mean: Estimate,
    /// IQM with its interval.
    pub iqm: Estimate,
    /// Strata ((track, task) pairs).
    pub strata: usize,
    /// Scores pooled (seeds × repeats × strata).
    pub runs: usize,
}

/// One score of the checkpoint after one round.
#[derive(Debug, Clone, Serialize)]
pub struct RoundScore {
    /// The score.
    pub score: Score,
    /// Mean with its interval.
    pub mean: Estimate,
    /// IQM (point only).
    pub iqm: f64,
}

/// One round of one arm.
#[derive(Debug, Clone, Serialize)]
pub struct RoundStats {
    /// Position (1-based) of the round in every member.
    pub round: usize,
    /// The members' round ids at that position.
    pub round_ids: Vec<String>,
    /// Overall of the checkpoint after this round: mean with interval
    /// (the same as `scores`' `overall`).
    pub overall: Estimate,
    /// Its IQM (point only).
    pub overall_iqm: f64,
    /// Every score of the checkpoint after this round, in the order of the
    /// final checkpoint's scores.
    pub scores: Vec<RoundScore>,
    /// Gating minus audit Overall with its interval (`None`: no audit).
    pub audit_gap: Option<Estimate>,
}

/// The audit gap's trend of one arm.
#[derive(Debug, Clone, Serialize)]
pub struct AuditTrend {
    /// The audit protocol used (the first, by name, of each round).
    pub protocol_id: String,
    /// Rounds with both a gating and an audit evaluation.
    pub rounds: usize,
    /// Least-squares slope of the gap per round, with its interval.
    pub slope: Estimate,
    /// The slope's interval lies above zero.
    pub rising: bool,
}

/// One arm's results.
#[derive(Debug, Clone, Serialize)]
pub struct ArmStats {
    /// Label in tables.
    pub label: String,
    /// The spec as written.
    pub spec: String,
    /// The members (seeds).
    pub members: Vec<String>,
    /// Per member, the round whose candidate is final (`None`: the base).
    pub final_rounds: Vec<Option<String>>,
    /// The final checkpoint's scores.
    pub scores: Vec<ScoreStats>,
    /// Per round.
    pub rounds: Vec<RoundStats>,
    /// The audit gap's trend (`None`: fewer than two audited rounds).
    pub audit: Option<AuditTrend>,
}

/// One score of one pair.
#[derive(Debug, Clone, Serialize)]
pub struct PairScore {
    /// The score.
    pub score: Score,
    /// Difference, P(A > B) and verdict, each with its interval.
    #[serde(flatten)]
    pub pairwise: Pairwise,
}

/// One round of one pair.
#[derive(Debug, Clone, Serialize)]
pub struct PairRound {
    /// Position (1-based).
    pub round: usize,
    /// Overall difference A − B with its interval.
    pub difference: Estimate,
    /// The verdict.
    pub verdict: Verdict,
}

/// A pair of arms.
#[derive(Debug, Clone, Serialize)]
pub struct PairStats {
    /// Arm A's label.
    pub a: String,
    /// Arm B's label.
    pub b: String,
    /// Final checkpoint, per score.
    pub scores: Vec<PairScore>,
    /// The Overall verdict in words ("bat ahead").
    pub verdict: String,
    /// Per round, Overall.
    pub rounds: Vec<PairRound>,
}

/// One field on which the arms differ.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// The field.
    pub field: Field,
    /// Per arm label, its distinct values.
    pub values: Vec<(String, Vec<String>)>,
    /// Named by `--allow-difference`.
    pub allowed: bool,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    /// The bootstrap's settings.
    pub bootstrap: Bootstrap,
    /// The arms, in the order given.
    pub arms: Vec<ArmStats>,
    /// The pairs: the first arm against each later one, then the second
    /// against each later one, and so on.
    pub pairs: Vec<PairStats>,
    /// Every difference found.
    pub differences: Vec<Difference>,
    /// No difference, or only allowed ones.
    pub comparable: bool,
}

impl Experiment {
    /// The differences not allowed.
    pub fn refused(&self) -> impl Iterator<Item = &Difference> {
        self.differences.iter().filter(|d| !d.allowed)
    }
}

/// Compare arms read from the ledger.
pub fn compare_arms(
    ledger: &Ledger,
    req: &CompareRequest,
    ctx: &Ctx,
) -> Result<Experiment, ExperimentError> {
    if req.arms.len() < 2 {
        return Err(ExperimentError::TooFewArms {
            given: req.arms.len(),
        });
    }
    let mut arms = Vec::with_capacity(req.arms.len());
    ctx.progress
        .start("reading arms", Some(req.arms.len() as u64));
    for spec in &req.arms {
        check(ctx)?;
        let group = resolve_str(ledger, spec)?;
        arms.push(gather(ledger, &group)?);
        ctx.progress.inc(1);
    }
    ctx.progress.finish();
    compare_cells(&arms, &req.bootstrap, &req.allow, ctx)
}

fn check(ctx: &Ctx) -> Result<(), ExperimentError> {
    if ctx.cancelled() {
        Err(ExperimentError::Ledger(bat_ledger::Error::Cancelled))
    } else {
        Ok(())
    }
}

/// An arm's inputs to the statistics, ledger-free.
#[derive(Debug, Clone)]
pub struct ArmInput {
    /// Label.
    pub label: String,
    /// Spec.
    pub spec: String,
    /// Member names.
    pub members: Vec<String>,
    /// Per member, the round whose candidate is final.
    pub final_rounds: Vec<Option<String>>,
    /// Per member, the final checkpoint's evaluation.
    pub finals: Vec<Evaluation>,
    /// Per round position, per member: round id and the evaluation of the
    /// checkpoint after it.
    pub rounds: Vec<Vec<(String, Evaluation)>>,
    /// Per round position, per member: the gating evaluation and the
    /// audit's (protocol id, evaluation), when audited.
    pub audits: Vec<Vec<(Evaluation, String, Evaluation)>>,
}

impl ArmInput {
    /// Build from cells read from the ledger.
    pub fn from_cells(a: &ArmCells) -> ArmInput {
        let mut finals = Vec::new();
        let mut final_rounds = Vec::new();
        for m in &a.members {
            let (r, e) = m.final_checkpoint();
            final_rounds.push(r.map(str::to_string));
            finals.push(e.cloned().unwrap_or_default());
        }
        let n = a.members.iter().map(|m| m.rounds.len()).max().unwrap_or(0);
        let mut rounds = Vec::with_capacity(n);
        let mut audits = Vec::with_capacity(n);
        for k in 0..n {
            let mut at = Vec::new();
            let mut au = Vec::new();
            for m in &a.members {
                let idx = k.min(m.rounds.len().saturating_sub(1));
                let Some(r) = m.rounds.get(idx) else { continue };
                let (_, e) = m.checkpoint_after(idx);
                at.push((r.round_id.clone(), e.cloned().unwrap_or_default()));
                if k < m.rounds.len() {
                    if let (Some(g), Some(audit)) = (&r.candidate, r.audits.first()) {
                        au.push((
                            g.clone(),
                            audit.protocol_id.clone(),
                            audit.evaluation.clone(),
                        ));
                    }
                }
            }
            rounds.push(at);
            audits.push(au);
        }
        ArmInput {
            label: a.group.label.clone(),
            spec: a.group.spec.clone(),
            members: a.members.iter().map(|m| m.name.clone()).collect(),
            final_rounds,
            finals,
            rounds,
            audits,
        }
    }
}

/// Compare arms already read (the part [`compare_arms`] times in the
/// benchmark): statistics and comparability.
pub fn compare_cells(
    arms: &[ArmCells],
    cfg: &Bootstrap,
    allow: &[Field],
    ctx: &Ctx,
) -> Result<Experiment, ExperimentError> {
    let inputs: Vec<ArmInput> = arms.iter().map(ArmInput::from_cells).collect();
    let mut out = compare_inputs(&inputs, cfg, ctx)?;
    out.differences = comparability(arms, allow);
    out.comparable = out.differences.iter().all(|d| d.allowed);
    Ok(out)
}

/// Where an arm's matrices are in its [`ArmRequest`].
struct Plan {
    matrices: Vec<ScoreMatrix>,
    iqm: Vec<bool>,
    /// Per score, the final checkpoint's matrix.
    finals: Vec<usize>,
    /// Per round position, per score.
    rounds: Vec<Vec<usize>>,
    /// Per round position with an audit: (gating, audit) Overall matrices
    /// and the protocol ids.
    audits: Vec<Option<(usize, usize, Vec<String>)>>,
}

impl Plan {
    /// The matrices of `a`: every score of the final checkpoint and of each
    /// of `n_rounds` rounds, then the audits (`scores` empty and
    /// `n_rounds` 0: the audits alone).
    fn of(a: &ArmInput, scores: &[Score], n_rounds: usize) -> Plan {
        let mut p = Plan {
            matrices: Vec::new(),
            iqm: Vec::new(),
            finals: Vec::new(),
            rounds: Vec::new(),
            audits: Vec::new(),
        };
        let push = |p: &mut Plan, m: ScoreMatrix, iqm: bool| {
            p.matrices.push(m);
            p.iqm.push(iqm);
            p.matrices.len() - 1
        };
        for s in scores {
            let k = push(&mut p, matrix(&a.finals, s), true);
            p.finals.push(k);
        }
        for k in 0..n_rounds {
            let evals: Vec<&Evaluation> = a
                .rounds
                .get(k)
                .or(a.rounds.last())
                .map(|r| r.iter().map(|(_, e)| e).collect())
                .unwrap_or_default();
            let ids = scores
                .iter()
                .map(|s| push(&mut p, matrix(evals.iter().copied(), s), false))
                .collect();
            p.rounds.push(ids);
        }
        for round in &a.audits {
            if round.is_empty() {
                p.audits.push(None);
                continue;
            }
            let g = push(
                &mut p,
                matrix(round.iter().map(|(g, _, _)| g), &Score::Overall),
                false,
            );
            let x = push(
                &mut p,
                matrix(round.iter().map(|(_, _, e)| e), &Score::Overall),
                false,
            );
            let protocols = round.iter().map(|(_, p, _)| p.clone()).collect();
            p.audits.push(Some((g, x, protocols)));
        }
        p
    }
}

/// The statistics of ledger-free inputs (no comparability check).
pub fn compare_inputs(
    inputs: &[ArmInput],
    cfg: &Bootstrap,
    ctx: &Ctx,
) -> Result<Experiment, ExperimentError> {
    statistics(inputs, cfg, true, ctx)
}

/// Each arm's statistics alone, without the pairs (what `bat report`,
/// `export --ci`, `query` and Python show): the same numbers as
/// [`compare_inputs`]' arms, without the cost of the pairwise resampling.
pub fn arm_statistics(
    inputs: &[ArmInput],
    cfg: &Bootstrap,
    ctx: &Ctx,
) -> Result<Experiment, ExperimentError> {
    statistics(inputs, cfg, false, ctx)
}

fn statistics(
    inputs: &[ArmInput],
    cfg: &Bootstrap,
    with_pairs: bool,
    ctx: &Ctx,
) -> Result<Experiment, ExperimentError> {
    let scores = Score::all_of(inputs.iter().flat_map(|a| a.finals.iter()));
    // An arm's stream is its position on the command line: the same flags
    // give the same intervals on any copy of the experiment, whatever its
    // branch names (a replay branch's name holds a commit id).
    let streams: Vec<u64> = (0..inputs.len())
        .map(|i| stream_of([format!("arm {i}").as_str()]))
        .collect();
    let n_rounds = inputs.iter().map(|a| a.rounds.len()).max().unwrap_or(0);
    let plans: Vec<Plan> = inputs
        .iter()
        .map(|a| Plan::of(a, &scores, n_rounds))
        .collect();
    let requests: Vec<ArmRequest<'_>> = plans
        .iter()
        .zip(&streams)
        .map(|(p, s)| ArmRequest {
            matrices: p.matrices.iter().collect(),
            iqm: p.iqm.clone(),
            stream: *s,
        })
        .collect();
    let mut pair_requests = Vec::new();
    for i in 0..inputs.len() {
        for j in (i + 1..inputs.len()).filter(|_| with_pairs) {
            pair_requests.push(PairRequest {
                a: i,
                b: j,
                items: plans[i]
                    .finals
                    .iter()
                    .zip(&plans[j].finals)
                    .map(|(x, y)| (*x, *y))
                    .collect(),
            });
        }
    }
    ctx.progress.start("resampling", Some(cfg.resamples as u64));
    let mut done = 0usize;
    let resampled = resample(&requests, &pair_requests, cfg, &mut |r| {
        ctx.progress.inc((r - done) as u64);
        done = r;
        !ctx.cancelled()
    });
    ctx.progress.finish();
    let Some(resampled) = resampled else {
        return Err(ExperimentError::Ledger(bat_ledger::Error::Cancelled));
    };
    let mut arms_out = Vec::with_capacity(inputs.len());
    for ((a, p), ds) in inputs.iter().zip(&plans).zip(&resampled.arms) {
        arms_out.push(arm_stats(a, p, ds, &scores, cfg));
    }
    let mut pairs = Vec::with_capacity(pair_requests.len());
    for (req, pis) in pair_requests.iter().zip(&resampled.pairs) {
        let (i, j) = (req.a, req.b);
        pairs.push(pair(
            (&inputs[i], &plans[i], &resampled.arms[i]),
            (&inputs[j], &plans[j], &resampled.arms[j]),
            pis,
            &scores,
            cfg,
        ));
    }
    Ok(Experiment {
        bootstrap: *cfg,
        arms: arms_out,
        pairs,
        differences: Vec::new(),
        comparable: true,
    })
}

/// One arm's audit gap per round (`None`: not audited) and its trend.
pub type Trend = (Vec<Option<Estimate>>, Option<AuditTrend>);

/// The audit gap of every arm per round and its trend, without the other
/// statistics (what `bat log` needs: much cheaper than
/// [`compare_inputs`], with the same numbers for the gap and its slope).
pub fn audit_trends(
    inputs: &[ArmInput],
    cfg: &Bootstrap,
    ctx: &Ctx,
) -> Result<Vec<Trend>, ExperimentError> {
    let plans: Vec<Plan> = inputs.iter().map(|a| Plan::of(a, &[], 0)).collect();
    let requests: Vec<ArmRequest<'_>> = plans
        .iter()
        .enumerate()
        .map(|(i, p)| ArmRequest {
            matrices: p.matrices.iter().collect(),
            iqm: p.iqm.clone(),
            stream: stream_of([format!("arm {i}").as_str()]),
        })
        .collect();
    let resampled = resample(&requests, &[], cfg, &mut |_| !ctx.cancelled())
        .ok_or(ExperimentError::Ledger(bat_ledger::Error::Cancelled))?;
    Ok(plans
        .iter()
        .zip(&resampled.arms)
        .map(|(p, ds)| audit_trend(p, ds, cfg))
        .collect())
}

fn arm_stats(
    a: &ArmInput,
    p: &Plan,
    ds: &[Distribution],
    scores: &[Score],
    cfg: &Bootstrap,
) -> ArmStats {
    let score_stats = scores
        .iter()
        .zip(&p.finals)
        .map(|(s, k)| ScoreStats {
            score: s.clone(),
            mean: ds[*k].mean_estimate(cfg.level),
            iqm: ds[*k].iqm_estimate(cfg.level),
            strata: p.matrices[*k].strata.len(),
            runs: p.matrices[*k].len(),
        })
        .collect();
    let (gaps, audit) = audit_trend(p, ds, cfg);
    let rounds = p
        .rounds
        .iter()
        .enumerate()
        .map(|(k, ids)| {
            let scores: Vec<RoundScore> = scores
                .iter()
                .zip(ids)
                .map(|(s, m)| RoundScore {
                    score: s.clone(),
                    mean: ds[*m].mean_estimate(cfg.level),
                    iqm: ds[*m].iqm,
                })
                .collect();
            let (overall, overall_iqm) = scores
                .iter()
                .find(|s| s.score == Score::Overall)
                .map(|s| (s.mean, s.iqm))
                .unwrap_or((
                    Estimate {
                        point: f64::NAN,
                        lo: f64::NAN,
                        hi: f64::NAN,
                    },
                    f64::NAN,
                ));
            RoundStats {
                round: k + 1,
                round_ids: a
                    .rounds
                    .get(k)
                    .map(|r| r.iter().map(|(id, _)| id.clone()).collect())
                    .unwrap_or_default(),
                overall,
                overall_iqm,
                scores,
                audit_gap: gaps.get(k).copied().flatten(),
            }
        })
        .collect();
    ArmStats {
        label: a.label.clone(),
        spec: a.spec.clone(),
        members: a.members.clone(),
        final_rounds: a.final_rounds.clone(),
        scores: score_stats,
        rounds,
        audit,
    }
}

/// The difference of means of two distributions, with its interval.
fn difference(x: &Distribution, y: &Distribution, level: f64) -> Estimate {
    let mut diffs: Vec<f64> = x.means.iter().zip(&y.means).map(|(p, q)| p - q).collect();
    Estimate::from_dist(x.mean - y.mean, &mut diffs, level)
}

type Side<'a> = (&'a ArmInput, &'a Plan, &'a [Distribution]);

fn pair(
    a: Side<'_>,
    b: Side<'_>,
    pis: &[Vec<f64>],
    scores: &[Score],
    cfg: &Bootstrap,
) -> PairStats {
    let (ia, pa, da) = a;
    let (ib, pb, db) = b;
    let mut out = Vec::with_capacity(scores.len());
    for (k, s) in scores.iter().enumerate() {
        let (x, y) = (pa.finals[k], pb.finals[k]);
        let diff = difference(&da[x], &db[y], cfg.level);
        let point = probability_of_improvement(&pa.matrices[x], &pb.matrices[y]);
        let mut dist = pis.get(k).cloned().unwrap_or_default();
        out.push(PairScore {
            score: s.clone(),
            pairwise: Pairwise {
                difference: diff,
                improvement: Estimate::from_dist(point, &mut dist, cfg.level),
                verdict: Verdict::of(&diff),
            },
        });
    }
    let verdict = out
        .first()
        .map(|p| p.pairwise.verdict.sentence(&ia.label, &ib.label))
        .unwrap_or_default();
    let overall = scores.iter().position(|s| *s == Score::Overall);
    let rounds = pa
        .rounds
        .iter()
        .zip(&pb.rounds)
        .enumerate()
        .filter_map(|(k, (ra, rb))| {
            let o = overall?;
            let difference = difference(&da[ra[o]], &db[rb[o]], cfg.level);
            Some(PairRound {
                round: k + 1,
                difference,
                verdict: Verdict::of(&difference),
            })
        })
        .collect();
    PairStats {
        a: ia.label.clone(),
        b: ib.label.clone(),
        scores: out,
        verdict,
        rounds,
    }
}

/// Per round the audit gap (gating − audit Overall) with its interval, and
/// the slope of the gap over the audited rounds.
fn audit_trend(p: &Plan, ds: &[Distribution], cfg: &Bootstrap) -> Trend {
    let mut gaps = Vec::with_capacity(p.audits.len());
    let mut xs = Vec::new();
    let mut dists: Vec<Vec<f64>> = Vec::new();
    let mut points = Vec::new();
    let mut protocol = BTreeSet::new();
    for (k, round) in p.audits.iter().enumerate() {
        let Some((g, x, protocols)) = round else {
            gaps.push(None);
            continue;
        };
        protocol.extend(protocols.iter().cloned());
        let (dg, dau) = (&ds[*g], &ds[*x]);
        let dist: Vec<f64> = dg
            .means
            .iter()
            .zip(&dau.means)
            .map(|(g, x)| g - x)
            .collect();
        let point = dg.mean - dau.mean;
        gaps.push(Some(Estimate::from_dist(
            point,
            &mut dist.clone(),
            cfg.level,
        )));
        xs.push((k + 1) as f64);
        points.push(point);
        dists.push(dist);
    }
    if xs.len() < 2 {
        return (gaps, None);
    }
    let slope_point = stats::slope(&xs, &points);
    let mut ys = vec![0.0; dists.len()];
    let mut slopes: Vec<f64> = (0..cfg.resamples)
        .map(|r| {
            for (y, d) in ys.iter_mut().zip(&dists) {
                *y = d[r];
            }
            stats::slope(&xs, &ys)
        })
        .collect();
    let slope = Estimate::from_dist(slope_point, &mut slopes, cfg.level);
    let trend = AuditTrend {
        protocol_id: protocol.into_iter().collect::<Vec<_>>().join(","),
        rounds: xs.len(),
        slope,
        rising: slope.above_zero(),
    };
    (gaps, Some(trend))
}

/// The comparability of the arms `specs` name (each a group): their cells
/// read from the ledger and [`comparability`] applied — the check `bat
/// report` makes, without the statistics.
pub fn differences_of(
    ledger: &Ledger,
    specs: &[String],
    allow: &[Field],
) -> Result<Vec<Difference>, ExperimentError> {
    let mut arms = Vec::with_capacity(specs.len());
    for spec in specs {
        let group = resolve_str(ledger, spec)?;
        arms.push(gather(ledger, &group)?);
    }
    Ok(comparability(&arms, allow))
}

/// The values of every [`Field`] per arm, and the fields where they differ.
pub fn comparability(arms: &[ArmCells], allow: &[Field]) -> Vec<Difference> {
    let mut out = Vec::new();
    for field in Field::ALL {
        let values: Vec<(String, Vec<String>)> = arms
            .iter()
            .map(|a| {
                (
                    a.group.label.clone(),
                    field_values(a, field).into_iter().collect(),
                )
            })
            .collect();
        // Seeds may legitimately vary within an arm (the simulator's seed
        // is also its initial policy's): arms differ when their sets of
        // values differ.
        let differs = values.windows(2).any(|w| w[0].1 != w[1].1);
        if differs {
            out.push(Difference {
                field,
                values,
                allowed: allow.contains(&field),
            });
        }
    }
    out
}

fn field_values(a: &ArmCells, field: Field) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for m in &a.members {
        match field {
            Field::Tasks => {
                let evals = m
                    .base
                    .iter()
                    .chain(m.rounds.iter().filter_map(|r| r.candidate.as_ref()));
                for e in evals {
                    out.insert(task_fingerprint(e));
                }
            }
            Field::BaseCheckpoint => {
                if let Some(r) = m.rounds.first() {
                    out.insert(or_unrecorded(&r.meta.trained_from_checkpoint_sha256));
                }
            }
            Field::Budget => {
                for r in &m.rounds {
                    out.insert(if r.meta.budget.is_null() {
                        "unrecorded".to_string()
                    } else {
                        r.meta.budget.to_string()
                    });
                }
            }
            Field::Pack => {
                for r in &m.rounds {
                    out.insert(match &r.meta.loop_meta {
                        Some(l) => pack_value(l),
                        None => "unrecorded".to_string(),
                    });
                }
            }
            Field::Protocol | Field::RuntimeToolFormat | Field::Evaluator => {
                for r in &m.rounds {
                    out.insert(match &r.meta.loop_meta {
                        Some(l) => campaign_value(&l.campaign, field),
                        None => "unrecorded".to_string(),
                    });
                }
            }
        }
    }
    out
}

/// The pack a round ran with: its content digest, or, for a round
/// recorded before packs were digested, the campaign's pack path (the
/// value says so: the same pack then compares unequal to its digest).
fn pack_value(l: &crate::round::meta::LoopMeta) -> String {
    match &l.pack_blake3 {
        Some(d) => format!("blake3 {d}"),
        None => match &l.campaign.pack {
            Some(p) => format!(
                "file {} (no digest recorded: compared by path)",
                p.display()
            ),
            None => "embedded default pack (no digest recorded: compared by name)".to_string(),
        },
    }
}

/// A field recorded in the campaign of a round (`bat run`'s metadata).
fn campaign_value(c: &crate::round::campaign::Campaign, field: Field) -> String {
    match field {
        Field::Protocol => or_unrecorded(&c.protocol_id),
        Field::RuntimeToolFormat => or_unrecorded(&c.runtime_tool_format),
        Field::Evaluator => or_unrecorded(&c.evaluator.join(" ")),
        Field::Pack | Field::Tasks | Field::BaseCheckpoint | Field::Budget => {
            "recorded outside the campaign".to_string()
        }
    }
}

fn or_unrecorded(s: &str) -> String {
    if s.is_empty() {
        "unrecorded".to_string()
    } else {
        s.to_string()
    }
}

/// "N tasks × R repeats (digest)" or, with uneven repeats, the count of
/// cells; the digest (FNV-1a of the sorted (track, task, repeats) list)
/// tells two task sets of the same size apart.
pub fn task_fingerprint(e: &Evaluation) -> String {
    let reps: BTreeMap<(String, String), usize> = e.repeats();
    let key: Vec<String> = reps
        .iter()
        .map(|((t, k), n)| format!("{t}/{k}×{n}"))
        .collect();
    let digest = stream_of(key.iter().map(String::as_str));
    let counts: BTreeSet<usize> = reps.values().copied().collect();
    let shape = if counts.len() == 1 {
        format!(
            "{} tasks × {} repeats",
            reps.len(),
            counts.iter().next().copied().unwrap_or(0)
        )
    } else {
        format!("{} tasks, {} cells", reps.len(), e.cells.len())
    };
    format!("{shape} ({digest:016x})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::cells::Cell;

    fn eval(level: f64, jitter: u64) -> Evaluation {
        let mut g = stats::SplitMix64::for_resample(jitter, 1, 2);
        let cells = (0..24)
            .map(|i| {
                let x = level + ((g.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.02;
                Cell {
                    track: format!("track{}", i % 3),
                    task: format!("t{}", i % 12),
                    repeat: (i / 12).to_string(),
                    task_score: x,
                    agentic: x,
                    overall: x,
                    stages: BTreeMap::new(),
                }
            })
            .collect();
        Evaluation { cells }
    }

    /// An arm whose gating score pulls away from its audit by `drift` per
    /// round.
    fn arm(label: &str, drift: f64) -> ArmInput {
        let rounds: Vec<Vec<(String, Evaluation)>> = (0..4)
            .map(|k| vec![(format!("r0{}", k + 1), eval(0.5, k))])
            .collect();
        let audits = (0..4)
            .map(|k| {
                vec![(
                    eval(0.5 + drift * k as f64, 10 + k),
                    "audit-v1".to_string(),
                    eval(0.5, 20 + k),
                )]
            })
            .collect();
        ArmInput {
            label: label.into(),
            spec: label.into(),
            members: vec![label.into()],
            final_rounds: vec![Some("r04".into())],
            finals: vec![rounds[3][0].1.clone()],
            rounds,
            audits,
        }
    }

    #[test]
    fn a_widening_audit_gap_is_flagged_and_a_flat_one_is_not() {
        let cfg = Bootstrap {
            resamples: 2000,
            ..Bootstrap::default()
        };
        let e = compare_inputs(
            &[arm("drifts", 0.05), arm("flat", 0.0)],
            &cfg,
            &Ctx::quiet(),
        )
        .expect("compare");
        let drift = e.arms[0].audit.as_ref().expect("audited");
        assert!(drift.rising, "{drift:?}");
        assert!((drift.slope.point - 0.05).abs() < 0.01, "{drift:?}");
        assert_eq!(drift.rounds, 4);
        assert_eq!(drift.protocol_id, "audit-v1");
        let flat = e.arms[1].audit.as_ref().expect("audited");
        assert!(!flat.rising, "{flat:?}");
        let gap = e.arms[0].rounds[3].audit_gap.expect("gap");
        assert!(
            gap.lo <= gap.point && gap.point <= gap.hi && gap.lo > 0.1,
            "{gap:?}"
        );
        assert_eq!(e.pairs.len(), 1);
    }

    /// A loop record as an older bat wrote it: no `pack_blake3`.
    fn old_loop(pack: Option<&str>) -> crate::round::meta::LoopMeta {
        serde_json::from_value(serde_json::json!({
            "schema_version": 2, "run_id": "run-1", "round_number": 1,
            "campaign": {"source": "s", "initial_checkpoint": "c", "work_dir": "w",
                "trainer": ["t"], "evaluator": ["e"], "protocol_id": "p",
                "runtime_tool_format": "hermes", "rounds": 1, "batches": 1, "pack": pack},
            "current_checkpoint": {"path": "c", "sha256": "aa"},
            "baseline_summary": {"inline": true}, "initial_summary": {"inline": true},
        }))
        .expect("an old loop record decodes")
    }

    #[test]
    fn a_round_without_a_pack_digest_compares_by_path_and_says_so() {
        let by_path = pack_value(&old_loop(Some("/packs/a.json")));
        assert_eq!(
            by_path,
            "file /packs/a.json (no digest recorded: compared by path)"
        );
        assert!(pack_value(&old_loop(None)).contains("no digest recorded"));
        let mut new = old_loop(Some("/packs/a.json"));
        let digest = crate::round::meta::pack_blake3(&bat_contract::pack::Pack::default_pack());
        new.pack_blake3 = Some(digest.clone());
        assert_eq!(pack_value(&new), format!("blake3 {digest}"));
        // The recorded member survives a write and a read; an old record
        // writes no member at all.
        let back: crate::round::meta::LoopMeta =
            serde_json::from_value(serde_json::to_value(&new).expect("encodes")).expect("decodes");
        assert_eq!(back.pack_blake3, Some(digest));
        let old = serde_json::to_value(old_loop(None)).expect("encodes");
        assert!(old.get("pack_blake3").is_none(), "{old}");
    }

    #[test]
    fn the_pack_digest_ignores_layout_and_follows_values() {
        use bat_contract::pack::{Pack, DEFAULT_PACK_JSON};
        let default = crate::round::meta::pack_blake3(&Pack::default_pack());
        assert_eq!(default.len(), 64);
        // The same values, another layout: the same digest.
        let v: serde_json::Value = serde_json::from_str(DEFAULT_PACK_JSON).expect("json");
        let compact = serde_json::to_string(&v).expect("encodes");
        let same = Pack::parse(&compact, "compact").expect("parses");
        assert_eq!(crate::round::meta::pack_blake3(&same), default);
        // One value more: another digest.
        let mut edited = v.clone();
        edited["note"] = serde_json::json!("edited");
        let other = Pack::parse(&edited.to_string(), "edited").expect("parses");
        assert_ne!(crate::round::meta::pack_blake3(&other), default);
    }

    #[test]
    fn field_names_round_trip() {
        for f in Field::ALL {
            assert_eq!(Field::parse(f.as_str()), Some(f));
        }
        assert_eq!(Field::parse("nope"), None);
    }
}
