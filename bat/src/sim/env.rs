//! The simulated environment: a medical research agent working through the
//! pack's stages (S1→S5) on a task of one track.
//!
//! At each stage the agent sees the *condition* of the evidence handed to it
//! (clean, inconsistent, missing) and picks one of four actions. The
//! environment — fixed, not learned — decides how likely each rubric item of
//! the stage is to be satisfied:
//!
//! | action  | runs tools | clean | inconsistent | missing |
//! |---------|------------|-------|--------------|---------|
//! | verify  | yes        | +2.0  | −1.0         | −2.0    |
//! | repair  | yes        | +0.8  | +1.5         | +1.0    |
//! | rush    | yes        | +0.8  | −0.2         | −1.0    |
//! | narrate | no         |  —    |  —           |  —      |
//!
//! An item is satisfied with probability `sigmoid(skill − difficulty −
//! hardness)`, where `difficulty` belongs to the task (derived from its id)
//! and `hardness` to the (track, stage) pair. A stage earns credit only with
//! execution evidence: `narrate` never does, and from the third stage on the
//! agent needs execution evidence from the earlier stages (the condition is
//! not `missing`) unless it repairs it. The stage score is the fraction of
//! its rubric items satisfied. The next stage's condition is `clean` when all
//! items were satisfied, `inconsistent` when some were, `missing` when the
//! stage earned nothing.
//!
//! The final outcome (task score) is the fraction of the task's 6 expected
//! ids answered correctly; answers exist only when the last stage's evidence
//! is clean and the one before it has evidence, and each is correct with
//! probability `sigmoid(0.5 + 1.0·[third-to-last clean] + 0.5·[second-to-last
//! clean] − difficulty)`.

use super::num::{keyed_uniform, sample_index, sigmoid, KeyedStream};
use super::policy::Policy;
use super::SimError;
use bat_contract::json::Value;
use bat_contract::pack::Pack;

pub use super::actions::{ACTIONS, CLEAN, CONDITIONS, MISSING, NARRATE, REPAIR};
/// Item-success logit of each tool-running action per condition.
const SKILL: [[f64; 3]; 3] = [[2.0, -1.0, -2.0], [0.8, 1.5, 1.0], [0.8, -0.2, -1.0]];
/// Simulated response tokens of each action.
pub const ACTION_TOKENS: [u64; 4] = [420, 640, 260, 180];
/// Expected ids per task (contract §C.4).
pub const TASK_IDS: usize = 6;
/// Stages before this index need no earlier execution evidence.
pub const EVIDENCE_FREE_STAGES: usize = 2;

/// The condition a source row's outcome bucket describes.
pub fn condition_of_bucket(bucket: &str) -> Option<usize> {
    match bucket {
        "success" => Some(0),
        "recovery" => Some(1),
        "failure" => Some(2),
        _ => None,
    }
}

/// Difficulty of a task in [−0.5, 0.5), from its id and a domain.
pub fn difficulty(domain: &str, id: &str) -> f64 {
    keyed_uniform(domain, &[id.as_bytes()]) - 0.5
}

/// Domain of training-state difficulties.
pub const TRAIN_DOMAIN: &str = "bat-sim train state v1";
/// Domain of held-out task difficulties.
pub const HELDOUT_DOMAIN: &str = "bat-sim-heldout v1";

/// What the environment knows about the pack.
#[derive(Debug, Clone)]
pub struct Environment {
    /// Tracks, in pack order.
    pub tracks: Vec<String>,
    /// Stages, in pack order.
    pub stages: Vec<String>,
    /// Rubric items per stage.
    pub items: Vec<usize>,
    /// Agentic weight per stage.
    pub stage_weights: Vec<f64>,
    /// Hardness per track × stage, row-major.
    pub hardness: Vec<f64>,
    /// Weight of the weighted stage mean in the E2E reward.
    pub stage_mean_weight: f64,
    /// Weight of the final outcome in the E2E reward.
    pub final_outcome_weight: f64,
}

fn number(v: Option<&Value>) -> Option<f64> {
    match v {
        Some(Value::Float(f)) => Some(*f),
        Some(Value::Int(i)) => Some(*i as f64),
        _ => None,
    }
}

impl Environment {
    /// The environment of a pack's tracks, stages, rubric items and weights.
    pub fn from_pack(pack: &Pack) -> Result<Environment, SimError> {
        let invalid = |reason: String| SimError::Pack { reason };
        let tracks = pack.str_list("tracks");
        let stages = pack.str_list("stages");
        if tracks.is_empty() || stages.len() < 3 {
            return Err(invalid(
                "the simulator needs at least one track and three stages".into(),
            ));
        }
        let mut items = Vec::new();
        let mut stage_weights = Vec::new();
        for s in &stages {
            let n = pack
                .get("reward_items")
                .and_then(|r| r.get(s))
                .and_then(Value::as_array)
                .map(Vec::len)
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid(format!("reward_items.{s} must be a non-empty list")))?;
            items.push(n);
            let w = number(pack.get("stage_weights").and_then(|w| w.get(s)))
                .filter(|w| w.is_finite())
                .ok_or_else(|| invalid(format!("stage_weights.{s} must be a number")))?;
            stage_weights.push(w);
        }
        let mut hardness = Vec::new();
        for t in &tracks {
            for s in &stages {
                hardness.push(
                    0.8 * keyed_uniform("bat-sim environment v1", &[t.as_bytes(), s.as_bytes()]),
                );
            }
        }
        Ok(Environment {
            tracks,
            stages,
            items,
            stage_weights,
            hardness,
            stage_mean_weight: 0.5,
            final_outcome_weight: 0.5,
        })
    }

    /// Hardness of (track, stage).
    pub fn hardness_of(&self, track: usize, stage: usize) -> f64 {
        self.hardness[track * self.stages.len() + stage]
    }

    /// The E2E reward of a finished workflow: stage_mean_weight × weighted
    /// stage mean + final_outcome_weight × task score.
    pub fn e2e_reward(&self, w: &Workflow) -> f64 {
        let mut mean = 0.0;
        for (score, weight) in w.stage_scores.iter().zip(&self.stage_weights) {
            mean += weight * score;
        }
        self.stage_mean_weight * mean + self.final_outcome_weight * w.task_score
    }
}

/// One action the policy took: where its logits are and which it chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Offset of the decision point's own logits in [`Policy::logits`].
    pub offset: usize,
    /// The chosen action.
    pub action: usize,
}

/// The outcome of one stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageResult {
    /// Fraction of rubric items satisfied (0 without credit).
    pub score: f64,
    /// The condition handed to the next stage.
    pub next_condition: usize,
}

/// A task instance as the agent meets it.
#[derive(Debug, Clone, Copy)]
pub struct Situation {
    /// Track index.
    pub track: usize,
    /// Task difficulty.
    pub difficulty: f64,
}

/// Play one stage: sample an action, then the rubric items. Always draws one
/// number for the action and one per item, so streams stay aligned across
/// policies (common random numbers).
pub fn play_stage(
    env: &Environment,
    policy: &Policy,
    at: Situation,
    stage: usize,
    condition: usize,
    rng: &mut KeyedStream,
    decisions: &mut Vec<Decision>,
) -> StageResult {
    let offset = policy.offset(at.track, stage, condition);
    let probs = policy.probs_at(offset);
    let action = sample_index(&probs, rng.uniform());
    decisions.push(Decision { offset, action });
    let n = env.items[stage];
    let draws: Vec<f64> = (0..n).map(|_| rng.uniform()).collect();
    let has_evidence = stage < EVIDENCE_FREE_STAGES || condition != MISSING || action == REPAIR;
    if action == NARRATE || !has_evidence {
        return StageResult {
            score: 0.0,
            next_condition: MISSING,
        };
    }
    let p = sigmoid(SKILL[action][condition] - at.difficulty - env.hardness_of(at.track, stage));
    let satisfied = draws.iter().filter(|u| **u < p).count();
    StageResult {
        score: satisfied as f64 / n as f64,
        next_condition: if satisfied == n { CLEAN } else { 1 },
    }
}

/// A full S1→S5 rollout.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// The actions taken, in stage order.
    pub decisions: Vec<Decision>,
    /// Score per stage.
    pub stage_scores: Vec<f64>,
    /// The final outcome in [0, 1].
    pub task_score: f64,
}

/// Play the whole workflow from `start` (the first stage's condition).
pub fn play_workflow(
    env: &Environment,
    policy: &Policy,
    at: Situation,
    start: usize,
    rng: &mut KeyedStream,
) -> Workflow {
    let s = env.stages.len();
    let mut decisions = Vec::with_capacity(s);
    let mut stage_scores = Vec::with_capacity(s);
    let mut conditions = Vec::with_capacity(s);
    let mut condition = start;
    for stage in 0..s {
        let r = play_stage(env, policy, at, stage, condition, rng, &mut decisions);
        stage_scores.push(r.score);
        condition = r.next_condition;
        conditions.push(condition);
    }
    let draws: Vec<f64> = (0..TASK_IDS).map(|_| rng.uniform()).collect();
    let (third, second, last) = (conditions[s - 3], conditions[s - 2], conditions[s - 1]);
    let task_score = if last == CLEAN && second != MISSING {
        let bonus =
            if third == CLEAN { 1.0 } else { 0.0 } + if second == CLEAN { 0.5 } else { 0.0 };
        let q = sigmoid(0.5 + bonus - at.difficulty);
        draws.iter().filter(|u| **u < q).count() as f64 / TASK_IDS as f64
    } else {
        0.0
    };
    Workflow {
        decisions,
        stage_scores,
        task_score,
    }
}

/// Simulated tokens of a list of decisions.
pub fn tokens_of(decisions: &[Decision]) -> u64 {
    decisions.iter().map(|d| ACTION_TOKENS[d.action]).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Environment, Policy) {
        let env = Environment::from_pack(&Pack::default_pack()).expect("default pack");
        let policy = Policy::initial(&env.tracks, &env.stages, 3);
        (env, policy)
    }

    /// A policy that always picks `action` (logit gap of 60).
    fn always(policy: &Policy, action: usize) -> Policy {
        let mut p = policy.clone();
        for (i, z) in p.logits.iter_mut().enumerate() {
            *z = if i % ACTIONS.len() == action {
                60.0
            } else {
                0.0
            };
        }
        p
    }

    #[test]
    fn narrating_never_earns_credit_and_breaks_the_chain() {
        let (env, policy) = setup();
        let p = always(&policy, NARRATE);
        let at = Situation {
            track: 0,
            difficulty: -0.5,
        };
        for i in 0..50u64 {
            let mut rng = KeyedStream::new("t", &[&i.to_le_bytes()]);
            let w = play_workflow(&env, &p, at, CLEAN, &mut rng);
            assert!(w.stage_scores.iter().all(|s| *s == 0.0));
            assert_eq!(w.task_score, 0.0);
            assert_eq!(env.e2e_reward(&w), 0.0);
        }
    }

    #[test]
    fn late_stages_need_execution_evidence_unless_repaired() {
        let (env, policy) = setup();
        let at = Situation {
            track: 1,
            difficulty: -0.5,
        };
        let verify = always(&policy, 0);
        let repair = always(&policy, REPAIR);
        let mut earned_by_repair = 0.0;
        for i in 0..200u64 {
            let mut d = Vec::new();
            let mut rng = KeyedStream::new("t", &[&i.to_le_bytes()]);
            let r = play_stage(&env, &verify, at, 2, MISSING, &mut rng, &mut d);
            assert_eq!(r.score, 0.0);
            assert_eq!(r.next_condition, MISSING);
            let mut rng = KeyedStream::new("t", &[&i.to_le_bytes()]);
            earned_by_repair += play_stage(&env, &repair, at, 2, MISSING, &mut rng, &mut d).score;
        }
        assert!(earned_by_repair > 50.0, "{earned_by_repair}");
        // The first stages need no earlier evidence.
        let mut d = Vec::new();
        let mut total = 0.0;
        for i in 0..200u64 {
            let mut rng = KeyedStream::new("t", &[&i.to_le_bytes()]);
            total += play_stage(&env, &verify, at, 0, MISSING, &mut rng, &mut d).score;
        }
        assert!(total > 0.0);
    }

    #[test]
    fn difficulty_domains_differ_and_stay_in_range() {
        for id in ["a", "b", "sim-heldout-vqa-00"] {
            let t = difficulty(TRAIN_DOMAIN, id);
            let h = difficulty(HELDOUT_DOMAIN, id);
            assert!((-0.5..0.5).contains(&t) && (-0.5..0.5).contains(&h));
            assert_ne!(t, h);
        }
    }

    #[test]
    fn e2e_reward_is_half_weighted_stage_mean_half_outcome() {
        let (env, _) = setup();
        let w = Workflow {
            decisions: Vec::new(),
            stage_scores: vec![1.0, 0.0, 1.0, 0.0, 1.0],
            task_score: 0.5,
        };
        let expected = 0.5 * (0.25 + 0.35 + 0.1) + 0.5 * 0.5;
        assert!((env.e2e_reward(&w) - expected).abs() < 1e-12);
    }
}
