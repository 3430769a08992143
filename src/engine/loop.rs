//! Loop orchestration (contract §H): baseline evaluation, then per round
//! materialize → train → evaluate → gate → inherit → state, handing every
//! finished round to a [`RoundSink`] before the next one starts.

use std::path::{Path, PathBuf};

use super::command::{self, ChildSpec, CommandError, OutputSink, Stream};
use super::evaluation::{run_evaluation, EvaluationError, EvaluationRun};
use crate::contract::binding::Arm;
use crate::contract::gate::{evaluate_gate, select_target, training_healthy, GateError, GateModel};
use crate::contract::json::{self, sha256_hex, Map, Value};
use crate::contract::pack::{Pack, PackError};
use crate::contract::prompt::Prompter;
use crate::contract::protocol::{validate_runtime_protocol, ProtocolError};
use crate::contract::round::{self as cround, BuildInputs, RoundError as MaterializeError};
use crate::contract::summary::{StageModel, SummaryError};

/// Version of the `"loop"` metadata object recorded with each round commit
/// (see [`crate::round::meta`]).
pub const LOOP_METADATA_VERSION: i64 = crate::round::meta::LOOP_CHAIN_VERSION;
/// The experiment name of every loop evaluation binding.
pub const EXPERIMENT: &str = "bat-loop";
/// Gate step of candidate evaluations.
pub const CANDIDATE_GATE_STEP: u64 = 50;
/// Placeholders the trainer template must use.
pub const TRAINER_REQUIRED: [&str; 5] = [
    "{checkpoint}",
    "{dataset}",
    "{output}",
    "{health}",
    "{runtime_tool_format}",
];

/// A loop failure. Contract codes are the messages where the contract has one.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// rounds < 1 or batches < 1.
    #[error("loop_size_invalid")]
    SizeInvalid,
    /// The runtime tool format is invalid.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The source or initial checkpoint does not exist.
    #[error("not found: {}: {source}", path.display())]
    Missing {
        /// The path as given.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The work dir (or a round folder in it) already exists.
    #[error("already exists: {}", path.display())]
    Exists {
        /// The folder.
        path: PathBuf,
    },
    /// A file could not be read or written.
    #[error("cannot write or read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The pack is unusable.
    #[error(transparent)]
    Pack(#[from] PackError),
    /// Materializing the round failed.
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
    /// The trainer template lacks a required placeholder.
    #[error("trainer_command_placeholders_missing")]
    TrainerPlaceholdersMissing,
    /// The trainer exited non-zero.
    #[error("trainer_failed:{round_id}:{rc}")]
    TrainerFailed {
        /// The round.
        round_id: String,
        /// Exit code (negative: signal).
        rc: i32,
    },
    /// The trainer left no candidate folder or no health file.
    #[error("trainer_artifacts_missing:{round_id}")]
    TrainerArtifactsMissing {
        /// The round.
        round_id: String,
    },
    /// The health file is not valid JSON.
    #[error("training health file of {round_id} is not valid JSON: {reason}")]
    HealthInvalid {
        /// The round.
        round_id: String,
        /// The parser's message.
        reason: String,
    },
    /// An evaluation run failed.
    #[error("{source} ({context})")]
    Evaluation {
        /// Which evaluation (`baseline`, `r02 candidate`).
        context: String,
        /// The §G.4 failure.
        source: EvaluationError,
    },
    /// The gate could not be evaluated.
    #[error(transparent)]
    Gate(#[from] GateError),
    /// Target selection on the baseline failed.
    #[error(transparent)]
    Summary(#[from] SummaryError),
    /// The trainer could not be run.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The finished round could not be recorded.
    #[error("round {round_id} finished but was not committed: {reason}")]
    Commit {
        /// The round.
        round_id: String,
        /// Why.
        reason: String,
    },
    /// A value could not be encoded as JSON.
    #[error("cannot encode loop state: {reason}")]
    Encode {
        /// Why.
        reason: String,
    },
}

pub use crate::round::campaign::Campaign;

/// Where a campaign stands after some rounds.
#[derive(Debug, Clone)]
pub struct LoopState {
    /// Rounds completed (and committed).
    pub completed_rounds: i64,
    /// The folder the next round trains from.
    pub current_checkpoint: PathBuf,
    /// The round whose candidate that is (`None`: the initial checkpoint).
    pub current_checkpoint_round: Option<String>,
    /// The summary later candidates are gated against.
    pub baseline_summary: Value,
    /// The object id of that summary's file (a file of a round commit's
    /// tree once the round is recorded).
    pub baseline_summary_id: bat_ledger::ObjectId,
    /// The object id of the initial checkpoint's summary,
    /// `baseline-eval/summary.json` (the first round's
    /// `baseline-summary.json`).
    pub initial_summary_id: bat_ledger::ObjectId,
    /// The next round's target stage.
    pub target_stage: String,
    /// One entry per completed round.
    pub history: Vec<Value>,
}

/// How a run starts.
#[derive(Debug, Clone)]
pub enum Start {
    /// A new campaign: create the work dir and evaluate the baseline.
    Fresh,
    /// Continue after `completed_rounds` (see [`super::resume`]).
    Resume(LoopState),
}

/// Progress of a run, for the caller to show.
#[derive(Debug, Clone)]
pub enum LoopEvent<'a> {
    /// An evaluation is starting.
    Evaluating {
        /// `baseline` or `r02 candidate`.
        context: &'a str,
    },
    /// The baseline was evaluated.
    Baseline {
        /// Its identity.
        checkpoint_sha256: &'a str,
        /// The first target.
        target_stage: &'a str,
    },
    /// A round is starting (data materialized next).
    RoundStart {
        /// The round.
        round_id: &'a str,
        /// Its target stage.
        target_stage: &'a str,
    },
    /// The trainer is starting.
    Training {
        /// The round.
        round_id: &'a str,
        /// The expanded argv.
        argv: &'a [String],
    },
    /// The gate decided.
    Gated {
        /// The round.
        round_id: &'a str,
        /// `promote` or `hold`.
        gate_status: &'a str,
        /// The next target.
        next_target_stage: &'a str,
    },
    /// The round was handed to the sink successfully.
    Recorded {
        /// The round.
        round_id: &'a str,
        /// What the sink reported (e.g. the commit id).
        note: &'a str,
    },
}

/// Receives progress and child output. Implemented by the CLI.
pub trait Observer {
    /// A progress event.
    fn event(&mut self, event: &LoopEvent<'_>);
    /// A chunk of a child's output.
    fn child_output(&mut self, label: &str, stream: Stream, bytes: &[u8]);
}

struct SinkAdapter<'a>(&'a mut dyn Observer);

impl OutputSink for SinkAdapter<'_> {
    fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]) {
        self.0.child_output(label, stream, bytes);
    }
}

/// A finished round, as handed to the [`RoundSink`].
#[derive(Debug, Clone)]
pub struct CompletedRound<'a> {
    /// The round id.
    pub round_id: &'a str,
    /// `W/<round_id>`.
    pub round_dir: &'a Path,
    /// `promote` or `hold`.
    pub gate_status: &'a str,
    /// The `"loop"` metadata to record with the round (resume state).
    pub loop_metadata: &'a serde_json::Value,
    /// The summary the candidate was gated against, when it is on disk.
    pub baseline_summary: Option<&'a Path>,
    /// Wall-clock seconds of the trainer child, measured by bat.
    pub trainer_wall_seconds: Option<f64>,
}

/// Records finished rounds (the CLI commits them to the ledger).
pub trait RoundSink {
    /// Record a round; `Ok` carries a note for the progress output (e.g. the
    /// commit id). An error stops the loop.
    fn round_completed(&mut self, round: &CompletedRound<'_>) -> Result<String, String>;
}

/// Settings of a run besides the campaign.
#[derive(Debug, Clone)]
pub struct RunOptions<'a> {
    /// The benchmark pack.
    pub pack: &'a Pack,
    /// Where child logs go (`<label>.stdout|stderr`); keep it outside the
    /// work dir so the work dir stays identical to the reference's.
    pub log_dir: Option<&'a Path>,
    /// An id for this campaign, recorded in the metadata.
    pub run_id: &'a str,
    /// Remove each round folder once the sink has recorded it, except the
    /// folder of the current checkpoint's round (the next round trains
    /// from it). For work dirs bat owns; a work dir the user named is kept
    /// whole, as the reference loop leaves it.
    pub prune_round_dirs: bool,
}

/// Whether a work-dir entry name is a round folder (`r` + digits).
fn is_round_folder(name: &str) -> bool {
    name.strip_prefix('r')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Remove every round folder of work dir `w` except `keep`'s. Only called
/// for rounds already recorded in the ledger (or, on resume, for a folder
/// left by an interrupted round), which can be checked out again.
pub fn prune_round_dirs(w: &Path, keep: Option<&str>) -> Result<(), LoopError> {
    let rd = match std::fs::read_dir(w) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(LoopError::Io {
                path: w.to_path_buf(),
                source,
            })
        }
    };
    for e in rd {
        let e = e.map_err(io_err(w))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !is_round_folder(&name) || Some(name.as_str()) == keep {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).map_err(io_err(&p))?;
        }
    }
    Ok(())
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LoopError + '_ {
    move |source| LoopError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Convert a contract value to serde JSON (for ledger metadata).
pub fn to_serde(v: &Value) -> Result<serde_json::Value, LoopError> {
    let text = json::to_cj(v).map_err(|e| LoopError::Encode {
        reason: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| LoopError::Encode {
        reason: e.to_string(),
    })
}

/// Convert serde JSON (from ledger metadata) to a contract value.
pub fn from_serde(v: &serde_json::Value) -> Result<Value, LoopError> {
    let text = serde_json::to_string(v).map_err(|e| LoopError::Encode {
        reason: e.to_string(),
    })?;
    json::parse(&text).map_err(|e| LoopError::Encode {
        reason: e.to_string(),
    })
}

/// Write `text` to `path` via a temporary file, fsync and rename.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), LoopError> {
    crate::fsutil::write_atomic(path, text).map_err(io_err(path))
}

fn plain_write(path: &Path, text: &str) -> Result<(), LoopError> {
    std::fs::write(path, text).map_err(io_err(path))
}

fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The round id of round `n` (`r01`…`r99`, `r100`…).
pub fn round_id(n: i64) -> String {
    format!("r{n:02}")
}

/// The PJ state document (`W/state.json`).
pub fn state_document(state: &LoopState) -> Value {
    Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("completed_rounds", state.completed_rounds)
            .with(
                "current_checkpoint_sha256",
                str_of(&state.baseline_summary, "checkpoint_sha256"),
            )
            .with("next_target_stage", state.target_stage.as_str())
            .with("history", Value::Array(state.history.clone())),
    )
}

/// The `"loop"` metadata recorded with a round commit: the campaign, the
/// run id, this round's history element and references to the summaries
/// (constant size; see [`crate::round::meta`]).
pub fn loop_metadata(
    campaign: &Campaign,
    run_id: &str,
    state: &LoopState,
    logs: &[(String, PathBuf)],
) -> Result<serde_json::Value, LoopError> {
    use crate::round::meta::{CurrentCheckpoint, LogRef, LoopMeta, SummaryRef};
    let mut log_entries = std::collections::BTreeMap::new();
    for (name, path) in logs {
        let sha = std::fs::read(path)
            .map(|b| sha256_hex(&b))
            .unwrap_or_default();
        log_entries.insert(
            name.clone(),
            LogRef {
                path: path.to_string_lossy().into_owned(),
                sha256: sha,
            },
        );
    }
    let entry = match state.history.last() {
        Some(e) => to_serde(e)?,
        None => {
            return Err(LoopError::Encode {
                reason: "a round is recorded with an empty history".into(),
            })
        }
    };
    Ok(LoopMeta {
        schema_version: LOOP_METADATA_VERSION,
        run_id: run_id.to_string(),
        campaign: campaign.clone(),
        round_number: state.completed_rounds,
        current_checkpoint: CurrentCheckpoint {
            path: state.current_checkpoint.to_string_lossy().into_owned(),
            sha256: str_of(&state.baseline_summary, "checkpoint_sha256").to_string(),
            round_id: state.current_checkpoint_round.clone(),
        },
        baseline_summary: SummaryRef::Object(state.baseline_summary_id),
        initial_summary: SummaryRef::Object(state.initial_summary_id),
        history_entry: Some(entry),
        history_len: Some(state.history.len() as u64),
        next_target_stage: Some(state.target_stage.clone()),
        state: None,
        logs: log_entries,
    }
    .to_value())
}

/// The run's stdout document.
pub fn outcome_document(campaign: &Campaign, state: &LoopState) -> Value {
    Value::Object(
        Map::new()
            .with("status", "complete")
            .with("rounds", campaign.rounds)
            .with(
                "current_checkpoint_sha256",
                str_of(&state.baseline_summary, "checkpoint_sha256"),
            )
            .with("next_target_stage", state.target_stage.as_str())
            .with("history", Value::Array(state.history.clone())),
    )
}

/// Validate sizes and the runtime format, resolve the inputs and create the
/// work dir; returns the campaign with absolute paths.
pub fn prepare_fresh(campaign: &Campaign) -> Result<Campaign, LoopError> {
    if campaign.rounds < 1 || campaign.batches < 1 {
        return Err(LoopError::SizeInvalid);
    }
    validate_runtime_protocol(Some(&campaign.runtime_tool_format))?;
    let resolve = |p: &Path| {
        std::fs::canonicalize(p).map_err(|source| LoopError::Missing {
            path: p.to_path_buf(),
            source,
        })
    };
    let source = resolve(&campaign.source)?;
    let initial = resolve(&campaign.initial_checkpoint)?;
    let w = std::path::absolute(&campaign.work_dir).map_err(io_err(&campaign.work_dir))?;
    if let Some(parent) = w.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    match std::fs::create_dir(&w) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(LoopError::Exists { path: w })
        }
        Err(source) => return Err(LoopError::Io { path: w, source }),
    }
    let work_dir = std::fs::canonicalize(&w).map_err(io_err(&w))?;
    let pack = match &campaign.pack {
        Some(p) => Some(resolve(p)?),
        None => None,
    };
    Ok(Campaign {
        source,
        initial_checkpoint: initial,
        work_dir,
        pack,
        ..campaign.clone()
    })
}

/// Run (or continue) a campaign whose paths are already resolved (see
/// [`prepare_fresh`] and [`super::resume`]). Returns the stdout document.
pub fn run_loop(
    campaign: &Campaign,
    start: Start,
    opts: &RunOptions<'_>,
    observer: &mut dyn Observer,
    sink: &mut dyn RoundSink,
) -> Result<Value, LoopError> {
    if campaign.rounds < 1 || campaign.batches < 1 {
        return Err(LoopError::SizeInvalid);
    }
    validate_runtime_protocol(Some(&campaign.runtime_tool_format))?;
    let w = &campaign.work_dir;
    // An unusable pack fails before the baseline is evaluated.
    opts.pack.contract()?;
    GateModel::from_pack(opts.pack)?;
    let stage_model = StageModel::from_pack(opts.pack)?;
    let mut state = match start {
        Start::Resume(s) => s,
        Start::Fresh => {
            observer.event(&LoopEvent::Evaluating {
                context: "baseline",
            });
            let summary = evaluate(
                campaign,
                opts,
                observer,
                &campaign.initial_checkpoint,
                &w.join("baseline-eval"),
                0,
                Arm::Baseline,
                "baseline",
            )?;
            let stages = summary.get("stage_scores");
            let (target, _) = select_target(stages, stages, true, &stage_model)?;
            observer.event(&LoopEvent::Baseline {
                checkpoint_sha256: str_of(&summary, "checkpoint_sha256"),
                target_stage: &target,
            });
            let summary_file = w.join("baseline-eval").join("summary.json");
            let summary_id =
                crate::round::meta::file_object_id(&summary_file).map_err(io_err(&summary_file))?;
            LoopState {
                completed_rounds: 0,
                current_checkpoint: campaign.initial_checkpoint.clone(),
                current_checkpoint_round: None,
                baseline_summary: summary,
                baseline_summary_id: summary_id,
                initial_summary_id: summary_id,
                target_stage: target,
                history: Vec::new(),
            }
        }
    };
    for n in state.completed_rounds + 1..=campaign.rounds {
        let rid = round_id(n);
        let root = w.join(&rid);
        let target = state.target_stage.clone();
        let done = run_round(
            campaign,
            opts,
            &RoundInputs {
                round_id: &rid,
                root: &root,
                starting_checkpoint: &state.current_checkpoint,
                baseline_summary: &state.baseline_summary,
                target_stage: &target,
                mixture: Mixture::THREE_POOL,
            },
            observer,
        )?;
        let trainer_label = done.trainer_label.clone();
        let candidate = root.join("candidate");
        let outcome = done.outcome;
        let cand_summary = done.candidate_summary;
        let gate_status = str_of(&outcome.gate, "status").to_string();
        state.history.push(Value::Object(
            Map::new()
                .with("round_id", rid.as_str())
                .with("target_stage", target.as_str())
                .with("gate_status", gate_status.as_str())
                .with(
                    "starting_checkpoint_sha256",
                    outcome
                        .prescription
                        .get("starting_checkpoint_sha256")
                        .cloned()
                        .unwrap_or(Value::Null),
                )
                .with(
                    "candidate_checkpoint_sha256",
                    outcome
                        .gate
                        .get("candidate_checkpoint_sha256")
                        .cloned()
                        .unwrap_or(Value::Null),
                ),
        ));
        // The file behind `state.baseline_summary` before inheritance moves
        // it: the round commit re-checks the gate against exactly this one.
        let baseline_path = match &state.current_checkpoint_round {
            Some(r) => w.join(r).join("candidate-eval").join("summary.json"),
            None => w.join("baseline-eval").join("summary.json"),
        };
        if outcome.promoted {
            state.current_checkpoint = candidate.clone();
            state.current_checkpoint_round = Some(rid.clone());
            state.baseline_summary = cand_summary;
            let file = root.join("candidate-eval").join("summary.json");
            state.baseline_summary_id =
                crate::round::meta::file_object_id(&file).map_err(io_err(&file))?;
        }
        state.target_stage = outcome.target_stage.clone();
        state.completed_rounds = n;
        observer.event(&LoopEvent::Gated {
            round_id: &rid,
            gate_status: &gate_status,
            next_target_stage: &state.target_stage,
        });
        write_atomic(
            &w.join("state.json"),
            json::to_pj_file(&state_document(&state)).as_bytes(),
        )?;
        // Record the round before the next one starts.
        let mut logs = Vec::new();
        if let Some(dir) = opts.log_dir {
            for label in [trainer_label.clone(), format!("{rid}/evaluator")] {
                for s in [Stream::Stdout, Stream::Stderr] {
                    let name = format!("{label}.{}", s.as_str());
                    let p = dir.join(&name);
                    if p.is_file() {
                        logs.push((name, p));
                    }
                }
            }
        }
        let meta = loop_metadata(campaign, opts.run_id, &state, &logs)?;
        let note = sink
            .round_completed(&CompletedRound {
                round_id: &rid,
                round_dir: &root,
                gate_status: &gate_status,
                loop_metadata: &meta,
                baseline_summary: Some(baseline_path.as_path()).filter(|p| p.is_file()),
                trainer_wall_seconds: Some(done.trainer_wall_seconds),
            })
            .map_err(|reason| LoopError::Commit {
                round_id: rid.clone(),
                reason,
            })?;
        observer.event(&LoopEvent::Recorded {
            round_id: &rid,
            note: &note,
        });
        // The round is durable in the ledger now: its work files need not
        // be kept twice (the current checkpoint's round stays for training).
        if opts.prune_round_dirs {
            prune_round_dirs(w, state.current_checkpoint_round.as_deref())?;
        }
    }
    Ok(outcome_document(campaign, &state))
}

/// Which data mixture (round view) a round trains on: a key of the
/// round-view registry ([`crate::round::view`]).
pub use crate::round::view::ViewKind as Mixture;

/// The inputs of one round, as the loop or a replay hands them over.
#[derive(Debug, Clone, Copy)]
pub struct RoundInputs<'a> {
    /// The round id (`r01`).
    pub round_id: &'a str,
    /// The round folder; must not exist.
    pub root: &'a Path,
    /// The model folder the trainer starts from.
    pub starting_checkpoint: &'a Path,
    /// The summary the candidate is gated against (the starting
    /// checkpoint's).
    pub baseline_summary: &'a Value,
    /// The stage this round targets.
    pub target_stage: &'a str,
    /// The data mixture.
    pub mixture: Mixture,
}

/// What one round produced (its files are in the round folder).
#[derive(Debug, Clone)]
pub struct RoundOutcome {
    /// The gate and prescription documents and the next target.
    pub outcome: crate::contract::gate::GateOutcome,
    /// The candidate's evaluation summary.
    pub candidate_summary: Value,
    /// The parsed training health file.
    pub health: Value,
    /// Wall-clock seconds of the trainer child, measured by bat.
    pub trainer_wall_seconds: f64,
    /// The trainer's log label (`r01/trainer`).
    pub trainer_label: String,
}

fn create_new_dir(path: &Path) -> Result<(), LoopError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(LoopError::Exists {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(LoopError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// One round: materialize the view → train → evaluate the candidate → gate.
/// Inheritance (which checkpoint the next round starts from) is the
/// caller's decision; [`run_loop`] inherits promoted candidates only.
pub fn run_round(
    campaign: &Campaign,
    opts: &RunOptions<'_>,
    inp: &RoundInputs<'_>,
    observer: &mut dyn Observer,
) -> Result<RoundOutcome, LoopError> {
    let k = opts.pack.contract()?;
    let prompter = Prompter::new(&k);
    let gate_model = GateModel::from_pack(opts.pack)?;
    let rid = inp.round_id.to_string();
    let root = inp.root;
    let target = inp.target_stage;
    observer.event(&LoopEvent::RoundStart {
        round_id: &rid,
        target_stage: target,
    });
    create_new_dir(root)?;
    // Materialize (plain writes, as the reference).
    let source_bytes = std::fs::read(&campaign.source).map_err(io_err(&campaign.source))?;
    let source_name = campaign
        .source
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let source_sha = sha256_hex(&source_bytes);
    let inputs = BuildInputs {
        source_bytes: &source_bytes,
        source_file_name: &source_name,
        source_sha256: &source_sha,
        round_id: &rid,
        target_stage: Some(target),
        prescription: None,
        batches: campaign.batches,
        seed: None,
    };
    let built = crate::round::view::view(inp.mixture).build(&k, &prompter, &inputs)?;
    let data = root.join("data");
    create_new_dir(&data)?;
    let train = data.join(cround::TRAIN_FILE);
    std::fs::write(&train, &built.train).map_err(io_err(&train))?;
    let manifest = data.join(cround::MANIFEST_FILE);
    plain_write(&manifest, &json::to_pj_file(&built.manifest))?;
    // Train.
    let candidate = root.join("candidate");
    let health = root.join("training-health.json");
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let values = [
        ("{checkpoint}", text(inp.starting_checkpoint)),
        ("{dataset}", text(&train)),
        ("{manifest}", text(&manifest)),
        ("{output}", text(&candidate)),
        ("{health}", text(&health)),
        ("{round_id}", rid.clone()),
        ("{target_stage}", target.to_string()),
        (
            "{runtime_tool_format}",
            campaign.runtime_tool_format.clone(),
        ),
    ];
    let mut values: Vec<(&str, String)> = values.to_vec();
    for (k, v) in &campaign.extra_placeholders {
        if !values.iter().any(|(name, _)| name == k) {
            values.push((k.as_str(), v.clone()));
        }
    }
    let argv = command::expand(&campaign.trainer, &values);
    let required: Vec<&str> = values
        .iter()
        .filter(|(k, _)| TRAINER_REQUIRED.contains(k))
        .map(|(_, v)| v.as_str())
        .collect();
    if !command::all_present(&argv, &required) {
        return Err(LoopError::TrainerPlaceholdersMissing);
    }
    observer.event(&LoopEvent::Training {
        round_id: &rid,
        argv: &argv,
    });
    let trainer_label = format!("{rid}/trainer");
    let started = std::time::Instant::now();
    let trained = command::run_child(
        &ChildSpec {
            label: &trainer_label,
            argv: &argv,
            log_dir: opts.log_dir,
        },
        &mut SinkAdapter(observer),
    )?;
    let trainer_wall_seconds = started.elapsed().as_secs_f64();
    if trained.rc != 0 {
        return Err(LoopError::TrainerFailed {
            round_id: rid,
            rc: trained.rc,
        });
    }
    if !candidate.is_dir() || !health.is_file() {
        return Err(LoopError::TrainerArtifactsMissing { round_id: rid });
    }
    let health_bytes = std::fs::read(&health).map_err(io_err(&health))?;
    let health_value = json::parse_bytes(&health_bytes).map_err(|e| LoopError::HealthInvalid {
        round_id: rid.clone(),
        reason: e.to_string(),
    })?;
    // Evaluate the candidate.
    let context = format!("{rid} candidate");
    observer.event(&LoopEvent::Evaluating { context: &context });
    let cand_summary = evaluate(
        campaign,
        opts,
        observer,
        &candidate,
        &root.join("candidate-eval"),
        CANDIDATE_GATE_STEP,
        Arm::Candidate,
        &context,
    )?;
    // Gate.
    let outcome = evaluate_gate(
        inp.baseline_summary,
        &cand_summary,
        training_healthy(&health_value),
        &gate_model,
    )?;
    plain_write(&root.join("gate.json"), &json::to_pj_file(&outcome.gate))?;
    plain_write(
        &root.join("prescription.json"),
        &json::to_pj_file(&outcome.prescription),
    )?;
    Ok(RoundOutcome {
        outcome,
        candidate_summary: cand_summary,
        health: health_value,
        trainer_wall_seconds,
        trainer_label,
    })
}

#[allow(clippy::too_many_arguments)]
fn evaluate(
    campaign: &Campaign,
    opts: &RunOptions<'_>,
    observer: &mut dyn Observer,
    checkpoint: &Path,
    output_dir: &Path,
    gate_step: u64,
    arm: Arm,
    context: &str,
) -> Result<Value, LoopError> {
    let label = match arm {
        Arm::Baseline => "baseline-eval/evaluator".to_string(),
        Arm::Candidate => format!(
            "{}/evaluator",
            output_dir
                .parent()
                .and_then(Path::file_name)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
    };
    run_evaluation(
        &EvaluationRun {
            checkpoint,
            output_dir,
            protocol_id: &campaign.protocol_id,
            command: &campaign.evaluator,
            repeats: 1,
            experiment_name: EXPERIMENT,
            gate_step,
            arm,
            log_dir: opts.log_dir,
            log_label: &label,
            extra_placeholders: &campaign.extra_placeholders,
        },
        opts.pack,
        &mut SinkAdapter(observer),
    )
    .map_err(|source| LoopError::Evaluation {
        context: context.to_string(),
        source,
    })
}

/// The [`RoundSink`] that commits every finished round to a ledger with
/// [`crate::round::commit_round`], the loop state under `"loop"`.
pub struct LedgerSink<'l> {
    /// The ledger.
    pub ledger: &'l mut bat_ledger::Ledger,
    /// Options for every round commit; `extra_metadata` is set per round.
    pub options: crate::round::CommitRoundOptions,
}

/// Commit one finished round. The single place the loop commits through.
pub fn commit_loop_round(
    ledger: &mut bat_ledger::Ledger,
    round: &CompletedRound<'_>,
    options: &crate::round::CommitRoundOptions,
) -> Result<crate::round::RoundCommit, crate::round::RoundError> {
    let mut opts = options.clone();
    opts.extra_metadata = Some(round.loop_metadata.clone());
    if let Some(b) = round.baseline_summary {
        opts.baseline_summary = Some(b.to_path_buf());
    }
    if round.trainer_wall_seconds.is_some() {
        opts.trainer_wall_seconds = round.trainer_wall_seconds;
    }
    crate::round::commit_round(ledger, round.round_dir, &opts)
}

impl RoundSink for LedgerSink<'_> {
    fn round_completed(&mut self, round: &CompletedRound<'_>) -> Result<String, String> {
        // The campaign's starting checkpoint goes into the ledger with its
        // first round (once per identity), so replays need no outside copy.
        let lm = crate::round::meta::LoopMeta::from_value(round.loop_metadata)
            .map_err(|e| e.to_string())?;
        if lm.round_number == 1 {
            let initial = &lm.campaign.initial_checkpoint;
            let author = self.options.author.as_deref().unwrap_or("unknown");
            crate::round::initial::record_checkpoint(self.ledger, initial, author).map_err(
                |e| {
                    format!(
                        "cannot record the starting checkpoint {}: {e}",
                        initial.display()
                    )
                },
            )?;
        }
        commit_loop_round(self.ledger, round, &self.options)
            .map(|c| format!("committed {} ({})", c.commit.0.short(), c.gate_status))
            .map_err(|e| e.to_string())
    }
}
