//! The replay arm: its state between the rounds of a chain, running one
//! recorded round again with the overrides applied, deciding what the arm
//! carries into the next round, and recording the replayed round.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bat_ledger::Ledger;

use super::inputs::{
    check_view, find_checkpoint, original_compute, source_for, tree_file, tree_json, write_file,
};
use super::plan::{campaign_of, Ablation, Original, ReplayPlan};
use super::verify::{summary_scores, verify_round, Criteria};
use super::{
    io_err, ComputeSide, ReplayError, ReplayObserver, ReplayRequest, RoundReplay, VerifyMode,
};
use crate::engine::rounds::{
    loop_metadata, remove_committed_logs, round_logs, run_round, LoopError, LoopState, RoundInputs,
    RoundOutcome, RunOptions,
};
use crate::round::campaign::Campaign;
use crate::round::meta::{self, LoopMeta};
use crate::round::provenance::{measured_compute, round_budget};
use crate::round::view::ViewKind;
use crate::round::{commit_round, CommandTemplates, CommitRoundOptions, ReplayLink};
use crate::Ctx;
use bat_contract::json::{self, Value};
use bat_contract::pack::Pack;
use bat_contract::round as cround;
use bat_contract::vocabulary::GateStatus;

/// The arm's state between rounds of a chain.
#[derive(Clone)]
pub(super) struct Arm {
    checkpoint: PathBuf,
    /// The round whose folder holds `checkpoint` (`None`: the inputs).
    pub(super) checkpoint_round: Option<String>,
    baseline: Value,
    baseline_file: PathBuf,
    /// The stage the next round targets.
    pub(super) target: String,
}

impl Arm {
    /// The same starting point with another next target.
    pub(super) fn with_target(self, target: String) -> Arm {
        Arm { target, ..self }
    }
}

/// A replayed round: its report, the arm it started from and the arm the
/// next round starts from.
pub(super) struct ReplayedRound {
    pub(super) round: RoundReplay,
    pub(super) started: Arm,
    pub(super) next: Arm,
}

/// A failed trainer or evaluator, with its stderr tail and log path; other
/// loop errors as they are.
fn child_failure(e: LoopError, logs: &Path, round_id: &str) -> ReplayError {
    use crate::engine::evaluation::EvaluationError;
    let child = match &e {
        LoopError::TrainerFailed { .. } | LoopError::TrainerArtifactsMissing { .. } => "trainer",
        LoopError::Evaluation {
            source: EvaluationError::Failed { .. } | EvaluationError::OutputMissing,
            ..
        } => "evaluator",
        _ => return e.into(),
    };
    let log = logs.join(round_id).join(format!("{child}.stderr"));
    ReplayError::ChildFailed {
        round_id: round_id.to_string(),
        child: child.to_string(),
        tail: super::tail_of(&log, super::STDERR_TAIL_LINES),
        log,
        source: Box::new(e),
    }
}

fn round_number(rid: &str) -> i64 {
    rid.trim_start_matches('r').parse().unwrap_or(0)
}

/// The first round's arm: the original's starting checkpoint (found in the
/// ledger) and its gate baseline.
fn start_arm(
    ledger: &mut Ledger,
    o: &Original,
    campaign: &Campaign,
    inputs: &Path,
    ctx: &Ctx<'_>,
) -> Result<Arm, ReplayError> {
    let sha = o.meta.trained_from_checkpoint_sha256.clone();
    let (checkpoint, checkpoint_round) = find_checkpoint(
        ledger,
        o.parent,
        &sha,
        &campaign.initial_checkpoint,
        &inputs.join("checkpoints"),
        &o.round_id,
        ctx,
    )?;
    let bytes = tree_file(ledger, &o.tree, "baseline-summary.json")?.ok_or_else(|| {
        ReplayError::BadRecord {
            commit: o.commit.to_string(),
            reason: "baseline-summary.json is missing from its tree".into(),
        }
    })?;
    let baseline = json::parse_bytes(&bytes).map_err(|e| ReplayError::BadRecord {
        commit: o.commit.to_string(),
        reason: format!("baseline-summary.json: {e}"),
    })?;
    let baseline_file = inputs.join(format!("baseline-{}.summary.json", o.round_id));
    write_file(&baseline_file, &bytes)?;
    Ok(Arm {
        checkpoint,
        checkpoint_round,
        baseline,
        baseline_file,
        target: o.meta.target_stage.clone(),
    })
}

/// The recorded campaign with the request's placeholder overrides (only
/// those the campaign has) and the ablations applied.
fn apply_overrides(campaign: &mut Campaign, req: &ReplayRequest) {
    for (k, v) in &req.placeholder_overrides {
        for (name, value) in campaign.extra_placeholders.iter_mut() {
            if name == k {
                *value = v.clone();
            }
        }
    }
    for a in &req.ablations {
        match a {
            Ablation::Reward(v) => {
                let key = "{reward_mode}".to_string();
                match campaign
                    .extra_placeholders
                    .iter_mut()
                    .find(|(n, _)| *n == key)
                {
                    Some(slot) => slot.1 = v.clone(),
                    None => campaign.extra_placeholders.push((key, v.clone())),
                }
            }
            Ablation::Batches(n) => campaign.batches = *n,
            Ablation::Seed(n) => campaign.set_seed(*n),
            Ablation::Target(_) | Ablation::GateOff | Ablation::Mixture(_) => {}
        }
    }
}

/// One round's setup: the campaign as it will run, its pack and manifest,
/// the original's results, and the arm it starts from.
struct RoundSetup<'o> {
    campaign: Campaign,
    loop_meta: &'o LoopMeta,
    pack: Pack,
    manifest: Value,
    original_scores: BTreeMap<String, f64>,
    original_compute: ComputeSide,
    current: Arm,
}

fn setup_round<'o>(
    ledger: &mut Ledger,
    req: &ReplayRequest,
    plan: &ReplayPlan,
    o: &'o Original,
    arm: Option<Arm>,
    ctx: &Ctx<'_>,
) -> Result<RoundSetup<'o>, ReplayError> {
    let (mut campaign, loop_meta) = campaign_of(o)?;
    let pack = Pack::load_or_default(campaign.pack.as_deref())?;
    let manifest = tree_json(ledger, o, "data/manifest.json")?;
    campaign.source = source_for(&campaign, &manifest, &pack, &plan.inputs, &o.round_id)?;
    check_view(&pack, &campaign.source, &manifest, &o.round_id)?;
    apply_overrides(&mut campaign, req);
    let original_summary = tree_json(ledger, o, "candidate-eval/summary.json")?;
    let original_compute = original_compute(ledger, o)?;
    let current = match arm {
        Some(a) => a,
        None => start_arm(ledger, o, &campaign, &plan.inputs, ctx)?,
    };
    Ok(RoundSetup {
        campaign,
        loop_meta,
        pack,
        manifest,
        original_scores: summary_scores(&original_summary),
        original_compute,
        current,
    })
}

/// What the arm carries into the next round: the candidate and its summary
/// when it was inherited, else what it started from; the round's
/// prescription as the next target.
fn next_arm(
    current: &Arm,
    done: &RoundOutcome,
    root: &Path,
    round_id: &str,
    inherited: bool,
) -> Arm {
    if inherited {
        Arm {
            checkpoint: root.join("candidate"),
            checkpoint_round: Some(round_id.to_string()),
            baseline: done.candidate_summary.clone(),
            baseline_file: root.join("candidate-eval").join("summary.json"),
            target: done.outcome.target_stage.clone(),
        }
    } else {
        Arm {
            checkpoint: current.checkpoint.clone(),
            checkpoint_round: current.checkpoint_round.clone(),
            baseline: current.baseline.clone(),
            baseline_file: current.baseline_file.clone(),
            target: done.outcome.target_stage.clone(),
        }
    }
}

/// The replayed round's compute, from its manifest and health file.
fn replay_compute(root: &Path, done: &RoundOutcome) -> Result<ComputeSide, ReplayError> {
    let replay_manifest = json::parse_bytes(
        &std::fs::read(root.join("data").join(cround::MANIFEST_FILE)).map_err(io_err(root))?,
    )
    .unwrap_or(Value::Null);
    Ok(ComputeSide {
        budget: round_budget(&replay_manifest, &done.health),
        measured: measured_compute(&done.health)
            .ok()
            .flatten()
            .unwrap_or(serde_json::Value::Null),
        trainer_wall_seconds: Some(done.trainer_wall_seconds),
    })
}

/// Run one recorded round again. Returns its report, the arm it started
/// from and the arm for the next round; `history` gains the round's entry,
/// and the round is committed to the replay branch unless this is a
/// verify.
#[allow(clippy::too_many_arguments)]
pub(super) fn replay_round(
    ledger: &mut Ledger,
    req: &ReplayRequest,
    plan: &ReplayPlan,
    o: &Original,
    arm: Option<Arm>,
    history: &mut Vec<Value>,
    observer: &mut dyn ReplayObserver,
    ctx: &Ctx<'_>,
) -> Result<ReplayedRound, ReplayError> {
    let s = setup_round(ledger, req, plan, o, arm, ctx)?;
    let target = plan
        .fixed_target
        .clone()
        .unwrap_or(s.current.target.clone());
    let root = plan.rounds_dir.join(&o.round_id);
    let done = run_round(
        &s.campaign,
        &RunOptions {
            pack: &s.pack,
            log_dir: Some(&plan.logs),
            run_id: &plan.run_id,
            prune_round_dirs: false,
        },
        &RoundInputs {
            round_id: &o.round_id,
            root: &root,
            starting_checkpoint: &s.current.checkpoint,
            baseline_summary: &s.current.baseline,
            target_stage: &target,
            // A round recorded with an ablation's view is re-run with it.
            mixture: match crate::round::view::kind_of(&s.manifest) {
                ViewKind::THREE_POOL => plan.mixture,
                recorded => recorded,
            },
        },
        observer.loop_observer(),
    )
    .map_err(|e| child_failure(e, &plan.logs, &o.round_id))?;
    let compute = replay_compute(&root, &done)?;
    let same_budget = compute.budget == s.original_compute.budget;
    if !same_budget && !req.allow_compute_change {
        return Err(ReplayError::BudgetMismatch {
            round_id: o.round_id.clone(),
            original: s.original_compute.budget.to_string(),
            replay: compute.budget.to_string(),
        });
    }
    let gate_status = GateStatus::from_promoted(done.outcome.promoted);
    // A verify follows the record's inheritance (a `gate=off` arm inherited
    // held candidates too); a replay decides for itself.
    let inherited = if req.verify {
        o.meta.inherited()
    } else {
        done.outcome.promoted || plan.gate_off
    };
    let scores = summary_scores(&done.candidate_summary);
    let verify = if req.verify {
        let criteria = match req.tolerance {
            None => Criteria {
                mode: VerifyMode::Exact,
                tolerance: 0.0,
            },
            Some(tolerance) => Criteria {
                mode: VerifyMode::Tolerance,
                tolerance,
            },
        };
        Some(verify_round(
            ledger,
            o,
            &root,
            criteria,
            &s.original_scores,
            &scores,
        )?)
    } else {
        None
    };
    let next = next_arm(&s.current, &done, &root, &o.round_id, inherited);
    history.push(Value::Object(
        json::Map::new()
            .with("round_id", o.round_id.as_str())
            .with("target_stage", target.as_str())
            .with("gate_status", gate_status.as_str())
            .with(
                "candidate_checkpoint_sha256",
                done.outcome
                    .gate
                    .get("candidate_checkpoint_sha256")
                    .cloned()
                    .unwrap_or(Value::Null),
            ),
    ));
    let recorded = RecordInputs {
        setup: &s,
        done: &done,
        next: &next,
        root: &root,
        target: &target,
        gate_status,
        inherited,
        overall: scores.get("overall").copied(),
        history,
    };
    let commit = match &plan.branch {
        None => None,
        Some(b) => Some(commit_replayed(ledger, req, plan, o, b, &recorded, ctx)?),
    };
    let r = RoundReplay {
        round_id: o.round_id.clone(),
        original: o.commit.to_string(),
        commit,
        original_target_stage: o.meta.target_stage.clone(),
        target_stage: target,
        original_gate_status: o.meta.gate_status,
        gate_status,
        inherited,
        original_scores: s.original_scores,
        scores,
        original_compute: s.original_compute,
        compute,
        same_budget,
        verify,
        work_dir: root,
    };
    Ok(ReplayedRound {
        round: r,
        started: s.current.clone(),
        next,
    })
}

/// What recording a replayed round needs.
struct RecordInputs<'a> {
    setup: &'a RoundSetup<'a>,
    done: &'a RoundOutcome,
    next: &'a Arm,
    root: &'a Path,
    target: &'a str,
    gate_status: GateStatus,
    inherited: bool,
    overall: Option<f64>,
    history: &'a [Value],
}

/// The replay commit's message.
fn replay_message(o: &Original, r: &RecordInputs<'_>, pairs: &[(String, String)]) -> String {
    format!(
        "Replay of round {} ({}){}: {}{}",
        o.round_id,
        r.target,
        if pairs.is_empty() {
            String::new()
        } else {
            format!(
                " with {}",
                pairs
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        },
        r.gate_status,
        r.overall
            .map(|x| format!(" overall {x:.4}"))
            .unwrap_or_default()
    )
}

/// Commit a replayed round to the replay branch (created at the first
/// original's parent by the first commit; an orphan branch when the first
/// original has none), linked to the original with `replay_of`.
fn commit_replayed(
    ledger: &mut Ledger,
    req: &ReplayRequest,
    plan: &ReplayPlan,
    o: &Original,
    branch: &str,
    r: &RecordInputs<'_>,
    ctx: &Ctx<'_>,
) -> Result<String, ReplayError> {
    let first = plan
        .originals
        .first()
        .expect("a replay plan holds at least one round");
    let first_commit = !ledger
        .list_refs("refs/heads/")?
        .iter()
        .any(|(n, _)| n == branch);
    let campaign = &r.setup.campaign;
    let state = LoopState {
        completed_rounds: round_number(&o.round_id),
        current_checkpoint: r.next.checkpoint.clone(),
        current_checkpoint_round: r.next.checkpoint_round.clone(),
        baseline_summary: r.next.baseline.clone(),
        baseline_summary_id: meta::file_object_id(&r.next.baseline_file)
            .map_err(io_err(&r.next.baseline_file))?,
        initial_summary_id: r
            .setup
            .loop_meta
            .initial_summary_id(ledger, o.commit)
            .map_err(|e| ReplayError::BadRecord {
                commit: o.commit.to_string(),
                reason: e.to_string(),
            })?,
        target_stage: r.next.target.clone(),
        history: r.history.to_vec(),
    };
    // The arm's child logs go into the round commit like a run's.
    let logs = round_logs(Some(&plan.logs), &r.done.trainer_label, &o.round_id);
    let pack_blake3 = meta::pack_blake3(&r.setup.pack);
    let loop_meta = loop_metadata(campaign, &plan.run_id, &pack_blake3, &state, &logs)?;
    let opts = CommitRoundOptions {
        branch: Some(branch.to_string()),
        pack: r.setup.pack.clone(),
        command_templates: Some(CommandTemplates {
            trainer: campaign.trainer.clone(),
            evaluator: campaign.evaluator.clone(),
        }),
        loop_meta: Some(loop_meta.clone()),
        baseline_summary: Some(r.setup.current.baseline_file.clone()),
        author: Some(req.author.clone()),
        replay: Some(ReplayLink {
            replay_of: o.commit.to_string(),
            replay_of_round_id: o.round_id.clone(),
            ablation: plan.ablation_pairs.clone(),
            inherited: r.inherited,
        }),
        trainer_wall_seconds: Some(r.done.trainer_wall_seconds),
        orphan_branch: first_commit && first.parent.is_none(),
        message: Some(replay_message(o, r, &plan.ablation_pairs)),
        ..Default::default()
    };
    if first_commit {
        if let Some(p) = first.parent {
            ledger.create_branch(branch, p)?;
        }
    }
    let rc = commit_round(ledger, r.root, &opts, ctx)?;
    // Durable now: the replay's work folder need not keep the logs twice.
    remove_committed_logs(&loop_meta.logs)?;
    Ok(rc.commit.to_string())
}
