//! The simulator's held-out evaluator: every track × held-out task × rerun
//! is one raw evaluation cell (contract §D), whose scores are means over
//! many sampled S1→S5 workflows.
//!
//! Held-out tasks are named `sim-heldout-<track>-<k>` and take their
//! difficulty from their own BLAKE3 domain, disjoint from the training
//! states (`bat:<hex>` ids in the training domain). The sampling streams are
//! keyed by (seed, task, rerun, sample) only — not by the checkpoint — so
//! every checkpoint meets the same draws (common random numbers), and a
//! candidate's scores differ from its baseline's only through its policy.

use std::path::Path;

use rayon::prelude::*;

use super::env::{difficulty, play_workflow, Environment, Situation, CLEAN, HELDOUT_DOMAIN};
use super::num::KeyedStream;
use super::policy::Policy;
use super::train::thread_pool;
use super::SimError;
use bat_contract::json::{self, Map, Value};
use bat_contract::pack::Pack;

/// Held-out tasks per track.
pub const HELDOUT_TASKS_PER_TRACK: usize = 4;
/// Reruns per task unless the request asks for more.
pub const DEFAULT_RERUNS: usize = 3;
/// Sampled workflows averaged into one cell.
pub const SAMPLES_PER_CELL: usize = 64;

/// The id of held-out task `k` of `track`.
pub fn heldout_task_id(track: &str, k: usize) -> String {
    format!("sim-heldout-{track}-{k:02}")
}

/// An evaluation run's inputs (the evaluator template's placeholders).
#[derive(Debug, Clone)]
pub struct EvaluateRequest<'a> {
    /// The model folder.
    pub checkpoint: &'a Path,
    /// raw-evaluation.json to write.
    pub output: &'a Path,
    /// eval-request.json (contract §G.3).
    pub request: &'a Path,
    /// The campaign seed.
    pub seed: u64,
    /// Worker threads (results do not depend on it).
    pub threads: usize,
}

/// What an evaluation produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EvaluateReport {
    /// Cells written.
    pub cells: usize,
    /// Reruns per task.
    pub reruns: usize,
    /// Mean task score over cells.
    pub mean_task: f64,
    /// Mean stage scores over cells, in stage order.
    pub mean_stages: Vec<f64>,
}

/// One cell's means.
#[derive(Debug, Clone, PartialEq)]
pub struct CellScores {
    /// Mean task score.
    pub task: f64,
    /// Mean score per stage.
    pub stages: Vec<f64>,
}

/// Score one (track, task, rerun) cell.
pub fn score_cell(
    env: &Environment,
    policy: &Policy,
    track: usize,
    task_id: &str,
    rerun: usize,
    seed: u64,
) -> CellScores {
    let at = Situation {
        track,
        difficulty: difficulty(HELDOUT_DOMAIN, task_id),
    };
    let mut task = 0.0;
    let mut stages = vec![0.0; env.stages.len()];
    for sample in 0..SAMPLES_PER_CELL as u64 {
        let mut rng = KeyedStream::new(
            "bat-sim-heldout rollout v1",
            &[
                &seed.to_le_bytes(),
                task_id.as_bytes(),
                &(rerun as u64).to_le_bytes(),
                &sample.to_le_bytes(),
            ],
        );
        let w = play_workflow(env, policy, at, CLEAN, &mut rng);
        task += w.task_score;
        for (acc, s) in stages.iter_mut().zip(&w.stage_scores) {
            *acc += s;
        }
    }
    let n = SAMPLES_PER_CELL as f64;
    CellScores {
        task: task / n,
        stages: stages.into_iter().map(|s| s / n).collect(),
    }
}

/// Evaluate a model folder and write raw-evaluation.json.
pub fn evaluate(req: &EvaluateRequest<'_>, pack: &Pack) -> Result<EvaluateReport, SimError> {
    let env = Environment::from_pack(pack)?;
    let policy = Policy::load(req.checkpoint)?;
    if policy.tracks != env.tracks || policy.stages != env.stages {
        return Err(SimError::Model {
            path: req.checkpoint.to_path_buf(),
            reason: "its tracks/stages differ from the pack's".into(),
        });
    }
    let bad = |reason: &str| SimError::Request {
        path: req.request.to_path_buf(),
        reason: reason.to_string(),
    };
    let bytes =
        bat_contract::fsutil::read_json_input(req.request).map_err(|source| SimError::Io {
            path: req.request.to_path_buf(),
            source,
        })?;
    let request = json::parse_bytes(&bytes).map_err(|e| bad(&e.to_string()))?;
    if request.get("artifact_kind").and_then(Value::as_str) != Some("bat_eval_request") {
        return Err(bad("artifact_kind must be bat_eval_request"));
    }
    let repeats = match request.get("repeats") {
        Some(Value::Int(i)) if *i >= 1 => *i as usize,
        _ => return Err(bad("repeats must be an integer ≥ 1")),
    };
    let reruns = repeats.max(DEFAULT_RERUNS);
    let mut keys = Vec::new();
    for (t, track) in env.tracks.iter().enumerate() {
        for k in 0..HELDOUT_TASKS_PER_TRACK {
            for r in 0..reruns {
                keys.push((t, track.clone(), heldout_task_id(track, k), r));
            }
        }
    }
    let pool = thread_pool(req.threads)?;
    let scores: Vec<CellScores> = pool.install(|| {
        keys.par_iter()
            .map(|(t, _, task_id, r)| score_cell(&env, &policy, *t, task_id, *r, req.seed))
            .collect()
    });
    let mut cells = Vec::with_capacity(keys.len());
    let mut mean_task = 0.0;
    let mut mean_stages = vec![0.0; env.stages.len()];
    for ((_, track, task_id, r), s) in keys.iter().zip(&scores) {
        let mut stages = Map::new();
        for (name, v) in env.stages.iter().zip(&s.stages) {
            stages.insert(name.clone(), Value::Float(*v));
        }
        for (acc, v) in mean_stages.iter_mut().zip(&s.stages) {
            *acc += v;
        }
        mean_task += s.task;
        cells.push(Value::Object(
            Map::new()
                .with("track", track.as_str())
                .with("task_id", task_id.as_str())
                .with("repeat", *r)
                .with("valid", true)
                .with("task_score", s.task)
                .with("stages", stages),
        ));
    }
    let n = cells.len() as f64;
    let raw = Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("status", "complete")
            .with(
                "protocol_id",
                request.get("protocol_id").cloned().unwrap_or(Value::Null),
            )
            .with(
                "checkpoint_sha256",
                request
                    .get("checkpoint_sha256")
                    .cloned()
                    .unwrap_or(Value::Null),
            )
            .with(
                "simulator",
                Map::new()
                    .with("heldout_tasks_per_track", HELDOUT_TASKS_PER_TRACK)
                    .with("reruns", reruns)
                    .with("samples_per_cell", SAMPLES_PER_CELL)
                    .with("seed", req.seed),
            )
            .with("cells", Value::Array(cells)),
    );
    bat_contract::fsutil::write_atomic(req.output, json::pretty_json_file(&raw).as_bytes())
        .map_err(|source| SimError::Io {
            path: req.output.to_path_buf(),
            source,
        })?;
    Ok(EvaluateReport {
        cells: keys.len(),
        reruns,
        mean_task: mean_task / n,
        mean_stages: mean_stages.into_iter().map(|v| v / n).collect(),
    })
}
