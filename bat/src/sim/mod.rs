//! The simulator backend: a deterministic simulated medical research agent
//! over the pack's tracks and stages, trained with a real GRPO update and
//! scored by a held-out evaluator (see docs/simulator.md).
//!
//! It plugs into the loop exactly like an external backend: the loop runs
//! `bat sim train` and `bat sim evaluate` as child processes from argv
//! templates, and the policy is a real model folder (`config.json` +
//! `model.safetensors`), so binding, commit, diff, resume and replay see
//! nothing special.
//!
//! Entry points for other code:
//! - [`trainer_template`] / [`evaluator_template`]: the argv templates. Their
//!   first element is the placeholder `{bat}` (the path of the bat binary),
//!   and they use `{reward_mode}` and `{seed}`; all three go into
//!   [`Campaign::extra_placeholders`] (see [`extra_placeholders`]). The
//!   templates hold no paths, so their digests are the same on every
//!   machine.
//! - [`init_model`]: write the initial policy for a seed.
//! - [`prepare_campaign`]: write the source grid and the initial policy into
//!   a setup folder and return the [`Campaign`] to hand to
//!   [`crate::engine::rounds::prepare_fresh`] and `run_loop`.
//! - [`train::train`] and [`evaluate::evaluate`]: what the children run.
//!
//! Outputs are bit-identical for identical inputs and seed, whatever the
//! thread count: every rollout draws from its own BLAKE3-keyed stream, work
//! is split per state or per cell and reduced in a fixed order, `exp`/`ln`
//! are computed from basic IEEE operations ([`num`]), and JSON is written
//! with sorted keys.

pub mod actions;
pub mod env;
pub mod evaluate;
pub mod num;
pub mod policy;
pub mod train;

use std::path::{Path, PathBuf};

use crate::round::campaign::{Campaign, BAT_PLACEHOLDER};
use bat_contract::json;
use bat_contract::pack::Pack;
use bat_contract::vocabulary::RewardMode;
use bat_contract::{round, source};

pub use policy::Policy;

/// The evaluation protocol id of simulator campaigns.
pub const PROTOCOL_ID: &str = "bat-sim-heldout-v1";
/// The runtime tool format simulator campaigns pass to the trainer.
pub const RUNTIME_TOOL_FORMAT: &str = "hermes";
/// Default batches per round of a simulator campaign (one per optimizer step).
pub const DEFAULT_BATCHES: i64 = 50;
/// Default campaign seed.
pub const DEFAULT_SEED: u64 = 0;

/// Failures of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A file could not be read or written.
    #[error("cannot read or write {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A model folder is not a simulator policy.
    #[error("{}: {reason}", path.display())]
    Model {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The output folder already holds files.
    #[error("{} already exists; the simulator writes only new model folders", path.display())]
    OutputExists {
        /// The folder.
        path: PathBuf,
    },
    /// The pack lacks what the simulator needs.
    #[error("the pack cannot drive the simulator: {reason}")]
    Pack {
        /// What is missing.
        reason: String,
    },
    /// A train.jsonl row is unusable.
    #[error("{}:{line}: {reason}", path.display())]
    Dataset {
        /// The dataset.
        path: PathBuf,
        /// 1-based line (0: the whole file).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The manifest is unusable or disagrees with the dataset.
    #[error("{}: {reason}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The evaluation request is unusable.
    #[error("{}: {reason}", path.display())]
    Request {
        /// The request file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The update produced non-finite logits.
    #[error("round {round_id}: the update produced non-finite logits")]
    Diverged {
        /// The round.
        round_id: String,
    },
    /// The worker pool could not be built.
    #[error("cannot start worker threads: {reason}")]
    Threads {
        /// Why.
        reason: String,
    },
    /// Building the source grid failed.
    #[error("cannot build the source grid: {reason}")]
    Source {
        /// Why.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for SimError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The trainer argv template of the simulator.
pub fn trainer_template() -> Vec<String> {
    strings(&[
        BAT_PLACEHOLDER,
        "sim",
        "train",
        "--checkpoint",
        "{checkpoint}",
        "--dataset",
        "{dataset}",
        "--manifest",
        "{manifest}",
        "--output",
        "{output}",
        "--health",
        "{health}",
        "--metrics",
        "{metrics}",
        "--round-id",
        "{round_id}",
        "--target-stage",
        "{target_stage}",
        "--runtime-tool-format",
        "{runtime_tool_format}",
        "--reward-mode",
        "{reward_mode}",
        "--seed",
        "{seed}",
    ])
}

/// The evaluator argv template of the simulator.
pub fn evaluator_template() -> Vec<String> {
    strings(&[
        BAT_PLACEHOLDER,
        "sim",
        "evaluate",
        "--checkpoint",
        "{checkpoint}",
        "--output",
        "{output}",
        "--request",
        "{request}",
        "--seed",
        "{seed}",
    ])
}

/// The extra placeholders a simulator campaign needs: `{bat}` (the binary),
/// `{reward_mode}` and `{seed}`.
pub fn extra_placeholders(bat: &Path, mode: RewardMode, seed: u64) -> Vec<(String, String)> {
    vec![
        (
            BAT_PLACEHOLDER.to_string(),
            bat.to_string_lossy().into_owned(),
        ),
        ("{reward_mode}".to_string(), mode.as_str().to_string()),
        ("{seed}".to_string(), seed.to_string()),
    ]
}

/// Write the initial policy for `seed` (default pack, default learning
/// rate) into `dir`, which must not exist or be empty. Returns the policy.
pub fn init_model(dir: &Path, seed: u64) -> Result<Policy, SimError> {
    init_model_with(dir, seed, policy::DEFAULT_LEARNING_RATE)
}

/// [`init_model`] with another learning rate kept in the config.
pub fn init_model_with(dir: &Path, seed: u64, learning_rate: f64) -> Result<Policy, SimError> {
    let env = env::Environment::from_pack(&Pack::default_pack())?;
    let mut policy = Policy::initial(&env.tracks, &env.stages, seed);
    if !(learning_rate.is_finite() && learning_rate > 0.0) {
        return Err(SimError::Model {
            path: dir.join("config.json"),
            reason: format!("learning rate {learning_rate} must be a positive number"),
        });
    }
    policy.learning_rate = learning_rate;
    policy.save(dir)?;
    Ok(policy)
}

/// A simulator campaign to prepare.
#[derive(Debug, Clone)]
pub struct SimCampaign {
    /// Where `source/` and `initial-policy/` are written.
    pub setup_dir: PathBuf,
    /// The loop's work dir (must not exist).
    pub work_dir: PathBuf,
    /// The bat binary the children run.
    pub bat: PathBuf,
    /// Rounds.
    pub rounds: i64,
    /// Batches per round.
    pub batches: i64,
    /// Campaign seed (initial policy, rollouts, evaluation draws).
    pub seed: u64,
    /// Reward mode of the trainer.
    pub reward_mode: RewardMode,
    /// The simulator learning rate, kept in the initial policy's config
    /// ([`policy::DEFAULT_LEARNING_RATE`] unless measuring).
    pub learning_rate: f64,
    /// The ledger branch (`None`: current).
    pub branch: Option<String>,
}

impl SimCampaign {
    /// A campaign with the defaults of `bat run --backend sim`: 10 rounds,
    /// [`DEFAULT_BATCHES`], seed [`DEFAULT_SEED`], stage rewards, the default
    /// learning rate, the current branch.
    pub fn new(setup_dir: PathBuf, work_dir: PathBuf, bat: PathBuf) -> SimCampaign {
        SimCampaign {
            setup_dir,
            work_dir,
            bat,
            rounds: 10,
            batches: DEFAULT_BATCHES,
            seed: DEFAULT_SEED,
            reward_mode: RewardMode::Stage,
            learning_rate: policy::DEFAULT_LEARNING_RATE,
            branch: None,
        }
    }
}

/// Write the default pack's source grid to `setup_dir/source/source.jsonl`
/// and the initial policy to `setup_dir/initial-policy/` (both may already
/// exist with identical bytes), and return the campaign (paths not yet
/// resolved: pass it to `prepare_fresh`).
pub fn prepare_campaign(spec: &SimCampaign) -> Result<Campaign, SimError> {
    let pack = Pack::default_pack();
    let k = pack.contract().map_err(|e| SimError::Pack {
        reason: e.to_string(),
    })?;
    let built = source::build_source(&k).map_err(|e| SimError::Source {
        reason: e.to_string(),
    })?;
    let source_dir = spec.setup_dir.join("source");
    std::fs::create_dir_all(&source_dir).map_err(|e| SimError::Io {
        path: source_dir.clone(),
        source: e,
    })?;
    let source_path = source_dir.join(source::SOURCE_FILE);
    let immutable = |path: &Path, bytes: &[u8]| {
        round::write_immutable(path, bytes).map_err(|e| SimError::Model {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    };
    immutable(&source_path, &built.jsonl)?;
    immutable(
        &source_dir.join("manifest.json"),
        json::pretty_json_file(&built.manifest).as_bytes(),
    )?;
    let initial = spec.setup_dir.join("initial-policy");
    let env = env::Environment::from_pack(&pack)?;
    let mut policy = Policy::initial(&env.tracks, &env.stages, spec.seed);
    policy.learning_rate = spec.learning_rate;
    if initial.exists() {
        std::fs::create_dir_all(&initial).map_err(|e| SimError::Io {
            path: initial.clone(),
            source: e,
        })?;
        immutable(
            &initial.join("model.safetensors"),
            &policy.safetensors_bytes()?,
        )?;
        immutable(
            &initial.join("config.json"),
            json::pretty_json_file(&policy.config()).as_bytes(),
        )?;
    } else {
        policy.save(&initial)?;
    }
    Ok(Campaign {
        source: source_path,
        initial_checkpoint: initial,
        work_dir: spec.work_dir.clone(),
        trainer: trainer_template(),
        evaluator: evaluator_template(),
        protocol_id: PROTOCOL_ID.to_string(),
        runtime_tool_format: RUNTIME_TOOL_FORMAT.to_string(),
        rounds: spec.rounds,
        batches: spec.batches,
        pack: None,
        branch: spec.branch.clone(),
        extra_placeholders: extra_placeholders(&spec.bat, spec.reward_mode, spec.seed),
        seed: Some(spec.seed),
    })
}
