//! Loop orchestration (contract §H): baseline evaluation, then per round
//! materialize → train → evaluate → gate → inherit → state, handing every
//! finished round to a [`RoundSink`] before the next one starts.

use std::path::{Path, PathBuf};

mod sink;
mod state;

pub use sink::{commit_loop_round, CompletedRound, LedgerSink, RoundSink, SinkError};
pub use state::{
    loop_metadata, prepare_fresh, round_id, state_document, HistoryLine, LoopOutcome, LoopState,
    Start,
};

use super::child::{self, ChildError, ChildSpec, OutputSink, Stream};
use super::evaluation::{run_evaluation, EvaluationError, EvaluationRun};
use super::template::{self, TRAINER_REQUIRED};
use crate::round::campaign::Campaign;
use crate::round::view::ViewKind;
use bat_contract::binding::Arm;
use bat_contract::gate::{evaluate_gate, select_target, training_healthy, GateError, GateModel};
use bat_contract::json::{self, sha256_hex, Map, Value};
use bat_contract::pack::{Pack, PackError};
use bat_contract::prompt::Prompter;
use bat_contract::protocol::{validate_runtime_protocol, ProtocolError};
use bat_contract::round::{self as cround, BuildInputs, ViewError};
use bat_contract::summary::{StageModel, SummaryError};
use bat_contract::vocabulary::GateStatus;

/// Version of the `"loop"` metadata object recorded with each round commit
/// (see [`crate::round::meta`]).
pub const LOOP_METADATA_VERSION: i64 = crate::round::meta::LOOP_CHAIN_VERSION;
/// The experiment name of every loop evaluation binding.
pub const EXPERIMENT: &str = "bat-loop";
/// Gate step of candidate evaluations.
pub const CANDIDATE_GATE_STEP: u64 = 50;

/// A loop failure. Contract codes are the messages where the contract has one.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// rounds < 1 or batches < 1.
    #[error("the loop size is not valid: rounds and batches must each be at least 1")]
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
    Materialize(#[from] ViewError),
    /// The trainer template lacks a required placeholder.
    #[error("the trainer command does not give every required placeholder as a whole argument")]
    TrainerPlaceholdersMissing,
    /// The trainer exited non-zero.
    #[error("the trainer exited with status {rc} in round {round_id}")]
    TrainerFailed {
        /// The round.
        round_id: String,
        /// Exit code (negative: signal).
        rc: i32,
    },
    /// The trainer left no candidate folder or no health file.
    #[error(
        "the trainer of round {round_id} left no candidate model folder or no training health file"
    )]
    TrainerArtifactsMissing {
        /// The round.
        round_id: String,
    },
    /// The step metrics file the trainer wrote is not valid.
    #[error("the trainer of round {round_id} wrote an invalid step metrics file: {source}")]
    StepMetrics {
        /// The round.
        round_id: String,
        /// The line (or read) failure.
        source: crate::round::steps::StepMetricsError,
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
    /// The trainer could not be run (or was stopped by a signal).
    #[error(transparent)]
    Command(#[from] ChildError),
    /// The caller asked the loop to stop before `round_id` started.
    #[error("stopped by {} before {round_id} started", signal.as_str())]
    Interrupted {
        /// The round that did not start (`baseline` for the baseline).
        round_id: String,
        /// The signal received.
        signal: nix::sys::signal::Signal,
    },
    /// The finished round could not be recorded.
    #[error("round {round_id} finished but was not committed: {source}")]
    Commit {
        /// The round.
        round_id: String,
        /// Why (boxed: a refused round commit carries a large error, and
        /// every loop function returns this type).
        source: Box<SinkError>,
    },
    /// A value could not be encoded as JSON.
    #[error("cannot encode loop state: {reason}")]
    Encode {
        /// Why.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for LoopError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            LoopError::Protocol(e) => e.kind(),
            LoopError::Pack(e) => e.kind(),
            LoopError::Materialize(e) => e.kind(),
            LoopError::Gate(e) => e.kind(),
            LoopError::Summary(e) => e.kind(),
            LoopError::Command(e) => e.kind(),
            LoopError::Evaluation { source: e, .. } => e.kind(),
            LoopError::Commit { source: e, .. } => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            LoopError::Protocol(e) => e.hint(),
            LoopError::Pack(e) => e.hint(),
            LoopError::Materialize(e) => e.hint(),
            LoopError::Gate(e) => e.hint(),
            LoopError::Summary(e) => e.hint(),
            LoopError::Command(e) => e.hint(),
            LoopError::Evaluation { source: e, .. } => e.hint(),
            LoopError::Commit { source: e, .. } => e.hint(),
            LoopError::StepMetrics { source: e, .. } => e.hint(),
            LoopError::TrainerFailed { .. } => Some(
                "the trainer's own output (streamed above and kept in the run's log files) says why it failed"
                    .to_string(),
            ),
            LoopError::TrainerArtifactsMissing { .. } => Some(
                "the trainer must write the candidate model folder and the training health file it is given"
                    .to_string(),
            ),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            LoopError::Protocol(e) => e.code(),
            LoopError::Pack(e) => e.code(),
            LoopError::Materialize(e) => e.code(),
            LoopError::Gate(e) => e.code(),
            LoopError::Summary(e) => e.code(),
            LoopError::Command(e) => e.code(),
            LoopError::Evaluation { source: e, .. } => e.code(),
            LoopError::Commit { source: e, .. } => e.code(),
            LoopError::StepMetrics { source: e, .. } => e.code(),
            LoopError::TrainerArtifactsMissing { round_id, .. } => {
                Some(format!("trainer_artifacts_missing:{round_id}"))
            }
            LoopError::TrainerFailed { round_id, rc, .. } => {
                Some(format!("trainer_failed:{round_id}:{rc}"))
            }
            LoopError::TrainerPlaceholdersMissing => {
                Some("trainer_command_placeholders_missing".to_string())
            }
            LoopError::SizeInvalid => Some("loop_size_invalid".to_string()),
            _ => None,
        }
    }
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
        /// The gate's decision.
        gate_status: GateStatus,
        /// The next target.
        next_target_stage: &'a str,
        /// Why the gate held, one sentence per failed check (empty on
        /// promote).
        hold_reasons: &'a [String],
    },
    /// The round was handed to the sink successfully.
    Recorded {
        /// The round.
        round_id: &'a str,
        /// What the sink reported (e.g. the commit id).
        note: &'a str,
    },
}

/// Receives progress events; as an [`OutputSink`] it also receives the
/// children's output and may supervise them. Its
/// [`OutputSink::stop_signal`] is also checked before the baseline and
/// before every round, so a stop between children ends the loop there.
/// Implemented by the CLI.
pub trait Observer: OutputSink {
    /// A progress event.
    fn event(&mut self, event: &LoopEvent<'_>);
}

/// Stop before `round_id` when the observer asks.
fn check_stop(observer: &dyn Observer, round_id: &str) -> Result<(), LoopError> {
    match observer.stop_signal() {
        Some(signal) => Err(LoopError::Interrupted {
            round_id: round_id.to_string(),
            signal,
        }),
        None => Ok(()),
    }
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

/// Write `text` to `path` via a temporary file, fsync and rename.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), LoopError> {
    bat_contract::fsutil::write_atomic(path, text).map_err(io_err(path))
}

fn plain_write(path: &Path, text: &str) -> Result<(), LoopError> {
    std::fs::write(path, text).map_err(io_err(path))
}

fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A fresh campaign's state: the initial checkpoint evaluated as the
/// baseline, and the first target chosen from its stage scores.
fn baseline_state(
    campaign: &Campaign,
    opts: &RunOptions<'_>,
    observer: &mut dyn Observer,
    stage_model: &StageModel,
) -> Result<LoopState, LoopError> {
    let w = &campaign.work_dir;
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
    let (target, _) = select_target(stages, stages, true, stage_model)?;
    observer.event(&LoopEvent::Baseline {
        checkpoint_sha256: str_of(&summary, "checkpoint_sha256"),
        target_stage: &target,
    });
    let summary_file = w.join("baseline-eval").join("summary.json");
    let summary_id =
        crate::round::meta::file_object_id(&summary_file).map_err(io_err(&summary_file))?;
    Ok(LoopState {
        completed_rounds: 0,
        current_checkpoint: campaign.initial_checkpoint.clone(),
        current_checkpoint_round: None,
        baseline_summary: summary,
        baseline_summary_id: summary_id,
        initial_summary_id: summary_id,
        target_stage: target,
        history: Vec::new(),
    })
}

/// A round's entry in the loop history.
fn history_entry(
    rid: &str,
    target: &str,
    gate_status: GateStatus,
    outcome: &bat_contract::gate::GateOutcome,
) -> Value {
    let field = |doc: &Value, k: &str| doc.get(k).cloned().unwrap_or(Value::Null);
    Value::Object(
        Map::new()
            .with("round_id", rid)
            .with("target_stage", target)
            .with("gate_status", gate_status.as_str())
            .with(
                "starting_checkpoint_sha256",
                field(&outcome.prescription, "starting_checkpoint_sha256"),
            )
            .with(
                "candidate_checkpoint_sha256",
                field(&outcome.gate, "candidate_checkpoint_sha256"),
            ),
    )
}

/// Remove a committed round's log files: those its loop record names with
/// a tree path (the round commit holds their bytes under `logs/`) and whose
/// bytes still have the recorded sha256; then their folder
/// `<log dir>/<round>` when that leaves it empty. Called only after the
/// commit is durable: a kill before this leaves the files, which a resume
/// removes ([`super::resume::prepare_resume_with`]).
pub fn remove_committed_logs(
    logs: &std::collections::BTreeMap<String, crate::round::meta::LogRef>,
) -> Result<(), LoopError> {
    for log in logs.values().filter(|l| l.tree.is_some()) {
        let p = Path::new(&log.path);
        let sha = match crate::round::meta::log_sha256(p) {
            Ok(sha) => sha,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(LoopError::Io {
                    path: p.to_path_buf(),
                    source,
                })
            }
        };
        // Other bytes than the committed ones are not the ledger's to drop.
        if sha != log.sha256 {
            continue;
        }
        std::fs::remove_file(p).map_err(io_err(p))?;
        // Not empty (another child's logs) or already gone: both fine.
        if let Some(parent) = p.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}

/// The child logs of a round that exist (`<label>.stdout|stderr`).
pub(crate) fn round_logs(
    log_dir: Option<&Path>,
    trainer_label: &str,
    rid: &str,
) -> Vec<(String, PathBuf)> {
    let mut logs = Vec::new();
    if let Some(dir) = log_dir {
        for label in [trainer_label.to_string(), format!("{rid}/evaluator")] {
            for s in [Stream::Stdout, Stream::Stderr] {
                let name = format!("{label}.{}", s.as_str());
                let p = dir.join(&name);
                if p.is_file() {
                    logs.push((name, p));
                }
            }
        }
    }
    logs
}

/// Run (or continue) a campaign whose paths are already resolved (see
/// [`prepare_fresh`] and [`super::resume`]). Returns where the campaign
/// ended.
pub fn run_loop(
    campaign: &Campaign,
    start: Start,
    opts: &RunOptions<'_>,
    observer: &mut dyn Observer,
    sink: &mut dyn RoundSink,
) -> Result<LoopOutcome, LoopError> {
    if campaign.rounds < 1 || campaign.batches < 1 {
        return Err(LoopError::SizeInvalid);
    }
    validate_runtime_protocol(Some(&campaign.runtime_tool_format))?;
    let w = &campaign.work_dir;
    // An unusable pack fails before the baseline is evaluated.
    opts.pack.contract()?;
    GateModel::from_pack(opts.pack)?;
    let stage_model = StageModel::from_pack(opts.pack)?;
    let pack_blake3 = crate::round::meta::pack_blake3(opts.pack);
    let mut state = match start {
        Start::Resume(s) => s,
        Start::Fresh => {
            check_stop(observer, "baseline")?;
            baseline_state(campaign, opts, observer, &stage_model)?
        }
    };
    for n in state.completed_rounds + 1..=campaign.rounds {
        let rid = round_id(n);
        check_stop(observer, &rid)?;
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
                mixture: ViewKind::THREE_POOL,
            },
            observer,
        )?;
        let trainer_label = done.trainer_label.clone();
        let candidate = root.join("candidate");
        let outcome = done.outcome;
        let cand_summary = done.candidate_summary;
        let gate_status = GateStatus::from_promoted(outcome.promoted);
        state
            .history
            .push(history_entry(&rid, &target, gate_status, &outcome));
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
        let hold_reasons = bat_contract::gate::hold_reasons(&outcome.gate);
        observer.event(&LoopEvent::Gated {
            round_id: &rid,
            gate_status,
            next_target_stage: &state.target_stage,
            hold_reasons: &hold_reasons,
        });
        write_atomic(
            &w.join("state.json"),
            json::pretty_json_file(&state_document(&state)).as_bytes(),
        )?;
        // Record the round before the next one starts.
        let logs = round_logs(opts.log_dir, &trainer_label, &rid);
        let loop_meta = loop_metadata(campaign, opts.run_id, &pack_blake3, &state, &logs)?;
        let note = sink
            .round_completed(&CompletedRound {
                round_id: &rid,
                round_dir: &root,
                gate_status,
                loop_meta: &loop_meta,
                baseline_summary: Some(baseline_path.as_path()).filter(|p| p.is_file()),
                trainer_wall_seconds: Some(done.trainer_wall_seconds),
            })
            .map_err(|source| LoopError::Commit {
                round_id: rid.clone(),
                source: Box::new(source),
            })?;
        observer.event(&LoopEvent::Recorded {
            round_id: &rid,
            note: &note,
        });
        // Logs the sink committed with the round are not kept twice.
        if sink.stores_logs() {
            remove_committed_logs(&loop_meta.logs)?;
        }
        // The round is durable in the ledger now: its work files need not
        // be kept twice (the current checkpoint's round stays for training).
        if opts.prune_round_dirs {
            prune_round_dirs(w, state.current_checkpoint_round.as_deref())?;
        }
    }
    Ok(LoopOutcome::of(campaign, &state))
}

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
    pub mixture: ViewKind,
}

/// What one round produced (its files are in the round folder).
#[derive(Debug, Clone)]
pub struct RoundOutcome {
    /// The gate and prescription documents and the next target.
    pub outcome: bat_contract::gate::GateOutcome,
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
    let gate_model = GateModel::from_pack(opts.pack)?;
    observer.event(&LoopEvent::RoundStart {
        round_id: inp.round_id,
        target_stage: inp.target_stage,
    });
    create_new_dir(inp.root)?;
    let view = build_view(campaign, &k, inp)?;
    let trained = train(campaign, opts, inp, &view, observer)?;
    let candidate_summary = evaluate_candidate(campaign, opts, inp, observer)?;
    let outcome = gate(inp, &candidate_summary, &trained.health, &gate_model)?;
    Ok(RoundOutcome {
        outcome,
        candidate_summary,
        health: trained.health,
        trainer_wall_seconds: trained.wall_seconds,
        trainer_label: trained.label,
    })
}

/// The files of a round's view, in `<round>/data/`.
struct ViewFiles {
    /// `train.jsonl`.
    train: PathBuf,
    /// `manifest.json`.
    manifest: PathBuf,
}

/// Materialize the round's view of the source grid into `<round>/data/`
/// (plain writes, as the reference).
fn build_view(
    campaign: &Campaign,
    k: &bat_contract::contract_pack::ContractPack,
    inp: &RoundInputs<'_>,
) -> Result<ViewFiles, LoopError> {
    let prompter = Prompter::new(k);
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
        round_id: inp.round_id,
        target_stage: Some(inp.target_stage),
        prescription: None,
        batches: campaign.batches,
        seed: None,
    };
    let built = crate::round::view::view(inp.mixture).build(k, &prompter, &inputs)?;
    let data = inp.root.join("data");
    create_new_dir(&data)?;
    let train = data.join(cround::TRAIN_FILE);
    std::fs::write(&train, &built.train).map_err(io_err(&train))?;
    let manifest = data.join(cround::MANIFEST_FILE);
    plain_write(&manifest, &json::pretty_json_file(&built.manifest))?;
    Ok(ViewFiles { train, manifest })
}

/// What the trainer left.
struct Trained {
    /// The parsed training health file.
    health: Value,
    /// Wall-clock seconds of the trainer child.
    wall_seconds: f64,
    /// Its log label (`r01/trainer`).
    label: String,
}

/// Run the trainer on the view: it writes `<round>/candidate/` and
/// `<round>/training-health.json`.
fn train(
    campaign: &Campaign,
    opts: &RunOptions<'_>,
    inp: &RoundInputs<'_>,
    view: &ViewFiles,
    observer: &mut dyn Observer,
) -> Result<Trained, LoopError> {
    let rid = inp.round_id;
    let candidate = inp.root.join("candidate");
    let health = inp.root.join("training-health.json");
    let metrics = inp.root.join(crate::round::steps::STEP_METRICS_PATH);
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let values = [
        ("{checkpoint}", text(inp.starting_checkpoint)),
        ("{dataset}", text(&view.train)),
        ("{manifest}", text(&view.manifest)),
        ("{output}", text(&candidate)),
        ("{health}", text(&health)),
        ("{metrics}", text(&metrics)),
        ("{round_id}", rid.to_string()),
        ("{target_stage}", inp.target_stage.to_string()),
        (
            "{runtime_tool_format}",
            campaign.runtime_tool_format.clone(),
        ),
    ];
    let mut values: Vec<(&str, String)> = values.to_vec();
    let extra = campaign.placeholder_values();
    for (k, v) in &extra {
        if !values.iter().any(|(name, _)| name == k) {
            values.push((k.as_str(), v.clone()));
        }
    }
    let argv = template::expand(&campaign.trainer, &values);
    let required: Vec<&str> = values
        .iter()
        .filter(|(k, _)| TRAINER_REQUIRED.contains(k))
        .map(|(_, v)| v.as_str())
        .collect();
    if !template::all_present(&argv, &required) {
        return Err(LoopError::TrainerPlaceholdersMissing);
    }
    observer.event(&LoopEvent::Training {
        round_id: rid,
        argv: &argv,
    });
    let label = format!("{rid}/trainer");
    let started = std::time::Instant::now();
    let trained = child::run_child(
        &ChildSpec {
            label: &label,
            argv: &argv,
            log_dir: opts.log_dir,
        },
        observer,
    )?;
    let wall_seconds = started.elapsed().as_secs_f64();
    if trained.rc != 0 {
        return Err(LoopError::TrainerFailed {
            round_id: rid.to_string(),
            rc: trained.rc,
        });
    }
    if !candidate.is_dir() || !health.is_file() {
        return Err(LoopError::TrainerArtifactsMissing {
            round_id: rid.to_string(),
        });
    }
    // Step metrics are optional; a file that is there must be valid, so a
    // curve is never committed with lines silently missing.
    if metrics.is_file() {
        crate::round::steps::StepMetrics::read(&metrics).map_err(|source| {
            LoopError::StepMetrics {
                round_id: rid.to_string(),
                source,
            }
        })?;
    }
    let health_bytes = std::fs::read(&health).map_err(io_err(&health))?;
    let health = json::parse_bytes(&health_bytes).map_err(|e| LoopError::HealthInvalid {
        round_id: rid.to_string(),
        reason: e.to_string(),
    })?;
    Ok(Trained {
        health,
        wall_seconds,
        label,
    })
}

/// Evaluate `<round>/candidate/` into `<round>/candidate-eval/`; returns
/// its summary.
fn evaluate_candidate(
    campaign: &Campaign,
    opts: &RunOptions<'_>,
    inp: &RoundInputs<'_>,
    observer: &mut dyn Observer,
) -> Result<Value, LoopError> {
    let context = format!("{} candidate", inp.round_id);
    observer.event(&LoopEvent::Evaluating { context: &context });
    evaluate(
        campaign,
        opts,
        observer,
        &inp.root.join("candidate"),
        &inp.root.join("candidate-eval"),
        CANDIDATE_GATE_STEP,
        Arm::Candidate,
        &context,
    )
}

/// Gate the candidate against the round's baseline and write
/// `gate.json` and `prescription.json`.
fn gate(
    inp: &RoundInputs<'_>,
    candidate_summary: &Value,
    health: &Value,
    gate_model: &GateModel,
) -> Result<bat_contract::gate::GateOutcome, LoopError> {
    let outcome = evaluate_gate(
        inp.baseline_summary,
        candidate_summary,
        training_healthy(health),
        gate_model,
    )?;
    plain_write(
        &inp.root.join("gate.json"),
        &json::pretty_json_file(&outcome.gate),
    )?;
    plain_write(
        &inp.root.join("prescription.json"),
        &json::pretty_json_file(&outcome.prescription),
    )?;
    Ok(outcome)
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
    let extra = campaign.placeholder_values();
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
            extra_placeholders: &extra,
        },
        opts.pack,
        observer,
    )
    .map_err(|source| LoopError::Evaluation {
        context: context.to_string(),
        source,
    })
}
