//! The simulator's trainer: GRPO over the round's train.jsonl.
//!
//! Per optimizer step the next batch of rows is taken (cycling when the
//! round has fewer batches than steps). Every row is one state; it is played
//! `continuations_per_state` times to form a group. The group's advantages
//! are reward − group mean (no std normalisation). The policy gradient of a
//! rollout is Σ_t A·∇log π(a_t|s_t) averaged over its decisions, then over
//! all rollouts of the step ("sequence mean, then token mean"). The KL term
//! is the exact KL(π‖π_ref) at every decision point a rollout visited, with
//! the same weighting; π_ref is the round's starting checkpoint. One update
//! per step (on-policy, so the PPO ratio is 1 and clipping never binds):
//! θ ← θ + lr·(g_pg − β·g_kl).

use std::path::Path;

use rayon::prelude::*;

use super::env::{
    condition_of_bucket, difficulty, play_stage, play_workflow, tokens_of, Decision, Environment,
    Situation, ACTIONS, TRAIN_DOMAIN,
};
use super::num::{ln, KeyedStream};
use super::policy::Policy;
use super::SimError;
use bat_contract::json::{self, Map, Value};
use bat_contract::pack::Pack;
use bat_contract::vocabulary::RewardMode;

/// One training row, as the simulator reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The row's state_id.
    pub state_id: String,
    /// Track index.
    pub track: usize,
    /// Stage index, `None` for an E2E row.
    pub stage: Option<usize>,
    /// Starting condition (from the outcome bucket).
    pub condition: usize,
}

/// Parse train.jsonl rows against the environment.
pub fn parse_rows(env: &Environment, bytes: &[u8], path: &Path) -> Result<Vec<Row>, SimError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SimError::Dataset {
        path: path.to_path_buf(),
        line: 0,
        reason: "not UTF-8".into(),
    })?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |reason: String| SimError::Dataset {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        let v = json::parse(line).map_err(|e| bad(e.to_string()))?;
        let extra = v
            .get("extra_info")
            .ok_or_else(|| bad("no extra_info".into()))?;
        let s = |k: &str| -> Result<&str, SimError> {
            extra
                .get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("extra_info.{k} must be a string")))
        };
        let state_id = s("state_id")?.to_string();
        let track_name = s("track")?;
        let track = env
            .tracks
            .iter()
            .position(|t| t == track_name)
            .ok_or_else(|| bad(format!("unknown track {track_name:?}")))?;
        let target = s("target_stage")?;
        let condition = condition_of_bucket(s("outcome_bucket")?)
            .ok_or_else(|| bad("unknown outcome_bucket".into()))?;
        let contract = extra
            .get("reward_contract")
            .ok_or_else(|| bad("no reward_contract".into()))?;
        let mode = contract.get("mode").and_then(Value::as_str).unwrap_or("");
        let stage = if target == "E2E" {
            if mode != "bat_e2e_rubric" {
                return Err(bad("an E2E row needs the bat_e2e_rubric contract".into()));
            }
            None
        } else {
            let st = env
                .stages
                .iter()
                .position(|x| x == target)
                .ok_or_else(|| bad(format!("unknown target_stage {target:?}")))?;
            let items = contract
                .get("items")
                .and_then(Value::as_array)
                .map(Vec::len);
            if mode != "bat_stage_rubric" || items != Some(env.items[st]) {
                return Err(bad(format!(
                    "the reward contract does not match the pack's {target} rubric"
                )));
            }
            Some(st)
        };
        rows.push(Row {
            state_id,
            track,
            stage,
            condition,
        });
    }
    Ok(rows)
}

/// GRPO advantages: reward minus the group mean (no std normalisation).
pub fn advantages(rewards: &[f64]) -> Vec<f64> {
    if rewards.is_empty() {
        return Vec::new();
    }
    let mean = rewards.iter().fold(0.0, |a, r| a + r) / rewards.len() as f64;
    rewards.iter().map(|r| r - mean).collect()
}

/// Add `weight · ∇ Σ_t log π(a_t|s_t)` to `out` (with respect to the logits).
pub fn add_policy_gradient(policy: &Policy, decisions: &[Decision], weight: f64, out: &mut [f64]) {
    for d in decisions {
        let probs = policy.probs_at(d.offset);
        let h = policy.habit_index(d.offset);
        for (a, p) in probs.iter().enumerate() {
            let onehot = if a == d.action { 1.0 } else { 0.0 };
            let g = weight * (onehot - p);
            out[d.offset + a] += g;
            out[h + a] += g;
        }
    }
}

/// KL(π‖π_ref) at one decision point.
pub fn kl_at(policy: &Policy, reference: &Policy, offset: usize) -> f64 {
    let p = policy.probs_at(offset);
    let q = reference.probs_at(offset);
    p.iter()
        .zip(&q)
        .fold(0.0, |acc, (pi, qi)| acc + pi * (ln(*pi) - ln(*qi)))
}

/// Add `weight · ∇ KL(π‖π_ref)` at each decision point to `out`.
/// For a softmax, ∂KL/∂z_j = π_j·(log π_j − log π_ref,j − KL).
pub fn add_kl_gradient(
    policy: &Policy,
    reference: &Policy,
    decisions: &[Decision],
    weight: f64,
    out: &mut [f64],
) {
    for d in decisions {
        let p = policy.probs_at(d.offset);
        let q = reference.probs_at(d.offset);
        let kl = kl_at(policy, reference, d.offset);
        let h = policy.habit_index(d.offset);
        for a in 0..ACTIONS.len() {
            let g = weight * p[a] * (ln(p[a]) - ln(q[a]) - kl);
            out[d.offset + a] += g;
            out[h + a] += g;
        }
    }
}

/// One played continuation.
#[derive(Debug, Clone)]
pub struct Continuation {
    /// Its actions.
    pub decisions: Vec<Decision>,
    /// Its reward.
    pub reward: f64,
}

/// Play one continuation of `row` and reward it.
pub fn play_row(
    env: &Environment,
    policy: &Policy,
    row: &Row,
    mode: RewardMode,
    rng: &mut KeyedStream,
) -> Continuation {
    let at = Situation {
        track: row.track,
        difficulty: difficulty(TRAIN_DOMAIN, &row.state_id),
    };
    match (mode, row.stage) {
        (RewardMode::Stage, Some(stage)) => {
            let mut decisions = Vec::with_capacity(1);
            let r = play_stage(env, policy, at, stage, row.condition, rng, &mut decisions);
            Continuation {
                decisions,
                reward: r.score,
            }
        }
        _ => {
            let w = play_workflow(env, policy, at, row.condition, rng);
            Continuation {
                reward: env.e2e_reward(&w),
                decisions: w.decisions,
            }
        }
    }
}

/// The gradients of one group.
#[derive(Debug, Clone)]
pub struct GroupGradient {
    /// Σ over continuations of A_k/|τ_k|·∇log π(τ_k).
    pub policy: Vec<f64>,
    /// Σ over continuations of 1/|τ_k|·∇KL at the visited points.
    pub kl: Vec<f64>,
    /// The rewards, in continuation order.
    pub rewards: Vec<f64>,
    /// Simulated tokens generated.
    pub tokens: u64,
}

/// Gradients of a group of continuations (see the module docs).
pub fn group_gradient(
    policy: &Policy,
    reference: &Policy,
    group: &[Continuation],
) -> GroupGradient {
    let rewards: Vec<f64> = group.iter().map(|c| c.reward).collect();
    let adv = advantages(&rewards);
    let mut pg = vec![0.0; policy.len()];
    let mut kl = vec![0.0; policy.len()];
    let mut tokens = 0;
    for (c, a) in group.iter().zip(&adv) {
        let per = 1.0 / c.decisions.len().max(1) as f64;
        add_policy_gradient(policy, &c.decisions, a * per, &mut pg);
        add_kl_gradient(policy, reference, &c.decisions, per, &mut kl);
        tokens += tokens_of(&c.decisions);
    }
    GroupGradient {
        policy: pg,
        kl,
        rewards,
        tokens,
    }
}

/// θ ← θ + lr·(Σ pg − β·Σ kl)/n, summing the groups in the order given.
pub fn apply_update(policy: &mut Policy, groups: &[GroupGradient], lr: f64, beta: f64, n: usize) {
    let scale = lr / n.max(1) as f64;
    for i in 0..policy.len() {
        let mut pg = 0.0;
        let mut kl = 0.0;
        for g in groups {
            pg += g.policy[i];
            kl += g.kl[i];
        }
        // Stored as F32: keep the working copy on the same grid, so a
        // trained policy and its reloaded file are the same policy.
        policy.set_param(
            i,
            f64::from((policy.param(i) + scale * (pg - beta * kl)) as f32),
        );
    }
}

/// A training run's inputs (the trainer template's placeholders).
#[derive(Debug, Clone)]
pub struct TrainRequest<'a> {
    /// The starting model folder (also the KL reference).
    pub checkpoint: &'a Path,
    /// train.jsonl.
    pub dataset: &'a Path,
    /// manifest.json.
    pub manifest: &'a Path,
    /// The candidate folder to write (must not exist).
    pub output: &'a Path,
    /// The health file to write last.
    pub health: &'a Path,
    /// The round id.
    pub round_id: &'a str,
    /// The round's target stage (recorded; rows carry their own stage).
    pub target_stage: &'a str,
    /// The runtime tool format (recorded).
    pub runtime_tool_format: &'a str,
    /// Reward mode.
    pub reward_mode: RewardMode,
    /// The campaign seed.
    pub seed: u64,
    /// Worker threads, 0 for rayon's default (results do not depend on it).
    pub threads: usize,
    /// The step metrics file to write (`{metrics}`), one line per step:
    /// `step` (1-based), `reward_mean`, `kl` (to the reference, after the
    /// step's update) and `tokens` (generated in the step).
    pub metrics: Option<&'a Path>,
}

/// What a training run did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TrainReport {
    /// Optimizer steps taken.
    pub steps: u64,
    /// Rollouts played.
    pub rollouts: u64,
    /// Simulated tokens generated.
    pub generated_tokens: u64,
    /// Mean reward of the first step's rollouts.
    pub mean_reward_first_step: f64,
    /// Mean reward of the last step's rollouts.
    pub mean_reward_last_step: f64,
    /// Mean reward over all rollouts.
    pub mean_reward: f64,
    /// Mean KL(π‖π_ref) over every decision point of the table at the end.
    pub kl_to_reference: f64,
    /// L2 norm of the change of the parameters.
    pub update_l2: f64,
}

fn int_field(v: &Value, key: &str, path: &Path) -> Result<i64, SimError> {
    match v.get(key) {
        Some(Value::Int(i)) if *i > 0 => Ok(*i),
        _ => Err(SimError::Manifest {
            path: path.to_path_buf(),
            reason: format!("{key} must be a positive integer"),
        }),
    }
}

/// Optimizer constants from the pack's prescription optimizer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Optimizer {
    /// Steps per round.
    pub steps: u64,
    /// KL coefficient β.
    pub kl_coefficient: f64,
}

impl Optimizer {
    /// Read `prescription_optimizer.steps` and `.kl_loss_coefficient`.
    pub fn from_pack(pack: &Pack) -> Result<Optimizer, SimError> {
        let o = pack.get("prescription_optimizer");
        let steps = match o.and_then(|o| o.get("steps")) {
            Some(Value::Int(i)) if *i > 0 => *i as u64,
            _ => {
                return Err(SimError::Pack {
                    reason: "prescription_optimizer.steps must be a positive integer".into(),
                })
            }
        };
        let kl_coefficient = match o.and_then(|o| o.get("kl_loss_coefficient")) {
            Some(Value::Float(f)) if f.is_finite() && *f >= 0.0 => *f,
            Some(Value::Int(i)) if *i >= 0 => *i as f64,
            _ => {
                return Err(SimError::Pack {
                    reason: "prescription_optimizer.kl_loss_coefficient must be a number ≥ 0"
                        .into(),
                })
            }
        };
        Ok(Optimizer {
            steps,
            kl_coefficient,
        })
    }
}

fn max_response_tokens(pack: &Pack) -> i64 {
    match pack
        .get("agentic_budget")
        .and_then(|b| b.get("max_response_tokens"))
    {
        Some(Value::Int(i)) => *i,
        _ => 0,
    }
}

pub(crate) fn thread_pool(threads: usize) -> Result<rayon::ThreadPool, SimError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| SimError::Threads {
            reason: e.to_string(),
        })
}

/// The run's shape that `training-health.json` records besides the report.
struct HealthShape {
    rows_per_batch: usize,
    continuations: usize,
    learning_rate: f64,
    dataset_rows: usize,
}

/// `training-health.json`: what ran (compute), against what budget, and
/// the simulator's own measurements.
fn health_document(
    req: &TrainRequest<'_>,
    pack: &Pack,
    opt: &Optimizer,
    report: &TrainReport,
    shape: HealthShape,
) -> Value {
    let HealthShape {
        rows_per_batch,
        continuations,
        learning_rate: lr,
        dataset_rows,
    } = shape;
    Value::Object(
        Map::new()
            .with("status", "passed")
            .with(
                "compute",
                Map::new()
                    .with("steps", report.steps)
                    .with("rollouts", report.rollouts)
                    .with("generated_tokens", report.generated_tokens),
            )
            .with(
                "budget",
                Map::new()
                    .with("steps", opt.steps)
                    .with("groups_per_step", rows_per_batch)
                    .with("continuations_per_state", continuations)
                    .with("max_response_tokens", max_response_tokens(pack)),
            )
            .with("reward_mode", req.reward_mode.as_str())
            .with("seed", req.seed)
            .with("round_id", req.round_id)
            .with("target_stage", req.target_stage)
            .with("runtime_tool_format", req.runtime_tool_format)
            .with(
                "sim",
                Map::new()
                    .with("backend", "bat-sim")
                    .with("learning_rate", lr)
                    .with("kl_loss_coefficient", opt.kl_coefficient)
                    .with("dataset_rows", dataset_rows)
                    .with("mean_reward_first_step", report.mean_reward_first_step)
                    .with("mean_reward_last_step", report.mean_reward_last_step)
                    .with("mean_reward", report.mean_reward)
                    .with("kl_to_reference", report.kl_to_reference)
                    .with("update_l2", report.update_l2),
            ),
    )
}

/// One line of the step metrics file (`{metrics}`).
fn step_line(step: u64, reward_mean: f64, kl: f64, tokens: u64) -> String {
    let line = serde_json::json!({
        "step": step,
        "reward_mean": reward_mean,
        "kl": kl,
        "tokens": tokens,
    });
    format!("{line}\n")
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SimError> {
    bat_contract::fsutil::write_atomic(path, bytes).map_err(|source| SimError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The mean KL divergence to the reference over every decision point.
fn mean_kl(policy: &Policy, reference: &Policy) -> f64 {
    let points = policy.logits.len() / ACTIONS.len();
    let total = (0..points).fold(0.0, |a, i| a + kl_at(policy, reference, i * ACTIONS.len()));
    total / points as f64
}

/// Train one round and write the candidate folder, then the health file.
pub fn train(req: &TrainRequest<'_>, pack: &Pack) -> Result<TrainReport, SimError> {
    let env = Environment::from_pack(pack)?;
    let opt = Optimizer::from_pack(pack)?;
    let reference = Policy::load(req.checkpoint)?;
    if reference.tracks != env.tracks || reference.stages != env.stages {
        return Err(SimError::Model {
            path: req.checkpoint.to_path_buf(),
            reason: "its tracks/stages differ from the pack's".into(),
        });
    }
    let manifest_bytes =
        bat_contract::fsutil::read_json_input(req.manifest).map_err(|source| SimError::Io {
            path: req.manifest.to_path_buf(),
            source,
        })?;
    let manifest = json::parse_bytes(&manifest_bytes).map_err(|e| SimError::Manifest {
        path: req.manifest.to_path_buf(),
        reason: e.to_string(),
    })?;
    let rows_per_batch = int_field(&manifest, "rows_per_batch", req.manifest)? as usize;
    let batches = int_field(&manifest, "batches", req.manifest)? as usize;
    let continuations = int_field(&manifest, "continuations_per_state", req.manifest)? as usize;
    let dataset =
        bat_contract::fsutil::read_json_input(req.dataset).map_err(|source| SimError::Io {
            path: req.dataset.to_path_buf(),
            source,
        })?;
    let rows = parse_rows(&env, &dataset, req.dataset)?;
    if Some(rows.len()) != rows_per_batch.checked_mul(batches) {
        return Err(SimError::Manifest {
            path: req.manifest.to_path_buf(),
            reason: format!(
                "{} rows in the dataset, but the manifest says {batches} batches of {rows_per_batch}",
                rows.len()
            ),
        });
    }
    if req.output.exists() {
        return Err(SimError::OutputExists {
            path: req.output.to_path_buf(),
        });
    }
    let pool = thread_pool(req.threads)?;
    let mut policy = reference.clone();
    let lr = policy.learning_rate;
    let mut rollouts = 0u64;
    let mut tokens = 0u64;
    let mut reward_total = 0.0;
    let mut first_mean = 0.0;
    let mut last_mean = 0.0;
    let mut step_lines = String::new();
    for step in 0..opt.steps {
        let batch = (step as usize) % batches;
        let pass = (step as usize / batches) as u64;
        let chunk = &rows[batch * rows_per_batch..(batch + 1) * rows_per_batch];
        let current = &policy;
        let groups: Vec<GroupGradient> = pool.install(|| {
            chunk
                .par_iter()
                .map(|row| {
                    let group: Vec<Continuation> = (0..continuations as u64)
                        .map(|k| {
                            let mut rng = KeyedStream::new(
                                "bat-sim rollout v1",
                                &[
                                    &req.seed.to_le_bytes(),
                                    req.round_id.as_bytes(),
                                    row.state_id.as_bytes(),
                                    &pass.to_le_bytes(),
                                    &k.to_le_bytes(),
                                ],
                            );
                            play_row(&env, current, row, req.reward_mode, &mut rng)
                        })
                        .collect();
                    group_gradient(current, &reference, &group)
                })
                .collect()
        });
        let n = chunk.len() * continuations;
        let step_sum = groups
            .iter()
            .flat_map(|g| g.rewards.iter())
            .fold(0.0, |a, r| a + r);
        let step_mean = step_sum / n as f64;
        if step == 0 {
            first_mean = step_mean;
        }
        last_mean = step_mean;
        reward_total += step_sum;
        rollouts += n as u64;
        let step_tokens = groups.iter().map(|g| g.tokens).sum::<u64>();
        tokens += step_tokens;
        apply_update(&mut policy, &groups, lr, opt.kl_coefficient, n);
        if req.metrics.is_some() {
            let kl = mean_kl(&policy, &reference);
            step_lines.push_str(&step_line(step + 1, step_mean, kl, step_tokens));
        }
    }
    if (0..policy.len()).any(|i| !policy.param(i).is_finite()) {
        return Err(SimError::Diverged {
            round_id: req.round_id.to_string(),
        });
    }
    let kl_mean = mean_kl(&policy, &reference);
    let update_l2 = (0..policy.len())
        .fold(0.0, |a, i| {
            let d = policy.param(i) - reference.param(i);
            a + d * d
        })
        .sqrt();
    let report = TrainReport {
        steps: opt.steps,
        rollouts,
        generated_tokens: tokens,
        mean_reward_first_step: first_mean,
        mean_reward_last_step: last_mean,
        mean_reward: reward_total / rollouts.max(1) as f64,
        kl_to_reference: kl_mean,
        update_l2,
    };
    policy.save(req.output)?;
    if let Some(p) = req.metrics {
        write_file(p, step_lines.as_bytes())?;
    }
    let health = health_document(
        req,
        pack,
        &opt,
        &report,
        HealthShape {
            rows_per_batch,
            continuations,
            learning_rate: lr,
            dataset_rows: rows.len(),
        },
    );
    bat_contract::fsutil::write_atomic(req.health, json::pretty_json_file(&health).as_bytes())
        .map_err(|source| SimError::Io {
            path: req.health.to_path_buf(),
            source,
        })?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Policy {
        Policy::initial(
            &["vqa".to_string()],
            &["S1".into(), "S2".into(), "S3".into()],
            7,
        )
    }

    fn cont(policy: &Policy, action: usize, reward: f64) -> Continuation {
        Continuation {
            decisions: vec![Decision {
                offset: policy.offset(0, 1, 0),
                action,
            }],
            reward,
        }
    }

    #[test]
    fn advantage_is_reward_minus_group_mean_without_std() {
        assert_eq!(
            advantages(&[3.0, 1.0, 1.0, 1.0]),
            vec![1.5, -0.5, -0.5, -0.5]
        );
        // A std-normalised advantage would be ±1 here; ours keeps the scale.
        assert_eq!(advantages(&[0.2, 0.0]), vec![0.1, -0.1]);
        assert!(advantages(&[]).is_empty());
    }

    #[test]
    fn equal_rewards_give_no_policy_gradient_only_kl() {
        let reference = tiny();
        let mut policy = reference.clone();
        let o = policy.offset(0, 1, 0);
        policy.logits[o] += 0.7;
        let group: Vec<Continuation> = (0..4).map(|a| cont(&policy, a, 0.4)).collect();
        let g = group_gradient(&policy, &reference, &group);
        assert!(g.policy.iter().all(|x| *x == 0.0), "{:?}", g.policy);
        assert!(g.kl[o..o + 4].iter().any(|x| x.abs() > 1e-3));
        // At the reference itself the KL gradient vanishes too.
        let at_ref = group_gradient(&reference, &reference, &group);
        assert!(at_ref.kl.iter().all(|x| x.abs() < 1e-15));
    }

    #[test]
    fn the_kl_term_pulls_toward_the_reference() {
        let reference = tiny();
        let mut policy = reference.clone();
        let o = policy.offset(0, 1, 0);
        policy.logits[o + 2] += 1.5;
        let before = kl_at(&policy, &reference, o);
        let group: Vec<Continuation> = (0..4).map(|_| cont(&policy, 2, 1.0)).collect();
        for _ in 0..20 {
            let g = group_gradient(&policy, &reference, &group);
            apply_update(&mut policy, &[g], 1.0, 0.5, 4);
        }
        let after = kl_at(&policy, &reference, o);
        assert!(after < before * 0.9, "KL {before} -> {after}");
    }

    #[test]
    fn a_positive_advantage_action_becomes_more_likely() {
        let reference = tiny();
        let mut policy = reference.clone();
        let o = policy.offset(0, 1, 0);
        let p0 = policy.probs_at(o);
        let group = vec![
            cont(&policy, 1, 1.0),
            cont(&policy, 2, 0.0),
            cont(&policy, 3, 0.0),
            cont(&policy, 1, 1.0),
        ];
        let g = group_gradient(&policy, &reference, &group);
        apply_update(&mut policy, &[g], 1.0, 0.006, 4);
        let p1 = policy.probs_at(o);
        assert!(p1[1] > p0[1], "{p0:?} -> {p1:?}");
        assert!(p1[2] < p0[2] && p1[3] < p0[3]);
        // Other decision points keep their own logits; they feel the update
        // only through the shared habit, which moved the same way.
        let other = policy.offset(0, 2, 1);
        assert_eq!(
            policy.logits[other..other + 4],
            reference.logits[other..other + 4]
        );
        assert!(policy.habit[1] > reference.habit[1]);
        assert!(policy.probs_at(other)[1] > reference.probs_at(other)[1]);
    }

    #[test]
    fn the_group_reduction_is_order_fixed_and_reproducible() {
        let reference = tiny();
        let group: Vec<Continuation> = (0..4).map(|a| cont(&reference, a, a as f64)).collect();
        let g1 = group_gradient(&reference, &reference, &group);
        let g2 = group_gradient(&reference, &reference, &group);
        let mut a = reference.clone();
        let mut b = reference.clone();
        apply_update(&mut a, &[g1.clone(), g2.clone()], 2.0, 0.006, 8);
        apply_update(&mut b, &[g1, g2], 2.0, 0.006, 8);
        assert_eq!(a, b);
        assert_ne!(a, reference);
    }
}
