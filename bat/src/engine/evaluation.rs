//! The evaluation run adapter (contract §G.4): bind the checkpoint, write the
//! request, run the external evaluator, summarize its raw output and write
//! the receipt.

use std::path::{Path, PathBuf};

use super::child::{self, ChildError, ChildSpec, OutputSink};
use super::template;
use bat_contract::binding::{
    build_binding, eval_run_receipt, evaluation_request, Arm, BindingError, RequestError,
};
use bat_contract::json::{self, sha256_hex, Value};
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::round::{write_immutable, WriteError};
use bat_contract::summary::{build_summary, SummaryError};

/// File names inside an evaluation folder.
pub const BINDING_FILE: &str = "checkpoint-binding.json";
/// The evaluation request.
pub const REQUEST_FILE: &str = "eval-request.json";
/// The evaluator's raw output.
pub const RAW_FILE: &str = "raw-evaluation.json";
/// The summary (§D).
pub const SUMMARY_FILE: &str = "summary.json";
/// The run receipt.
pub const RECEIPT_FILE: &str = "receipt.json";

/// An evaluation-run failure. Contract codes are the messages.
#[derive(Debug, thiserror::Error)]
pub enum EvaluationError {
    /// The checkpoint does not exist.
    #[error("checkpoint not found: {}: {source}", path.display())]
    CheckpointMissing {
        /// The checkpoint as given.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The output folder already exists.
    #[error("evaluation output folder already exists: {}", path.display())]
    OutputExists {
        /// The folder.
        path: PathBuf,
    },
    /// A file could not be written or read.
    #[error("cannot write or read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The binding could not be built.
    #[error(transparent)]
    Binding(#[from] BindingError),
    /// The binding could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The request could not be built.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The template is empty.
    #[error("the evaluator command template is empty")]
    CommandEmpty,
    /// `{checkpoint}`, `{output}` or `{request}` is missing from the template.
    #[error("the evaluator command does not give the checkpoint, output and request paths each as a whole argument")]
    PlaceholdersMissing,
    /// The evaluator exited non-zero (negative: killed by a signal).
    #[error("the external evaluator exited with status {rc}")]
    Failed {
        /// The exit code.
        rc: i32,
    },
    /// The evaluator wrote no raw file.
    #[error("the external evaluator finished without writing its raw evaluation file")]
    OutputMissing,
    /// The raw evaluation failed validation (§D).
    #[error(transparent)]
    Summary(#[from] SummaryError),
    /// The evaluator could not be run.
    #[error(transparent)]
    Command(#[from] ChildError),
}

impl bat_ledger::Diagnostic for EvaluationError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            EvaluationError::Binding(e) => e.kind(),
            EvaluationError::Write(e) => e.kind(),
            EvaluationError::Request(e) => e.kind(),
            EvaluationError::Summary(e) => e.kind(),
            EvaluationError::Command(e) => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            EvaluationError::Binding(e) => e.hint(),
            EvaluationError::Write(e) => e.hint(),
            EvaluationError::Request(e) => e.hint(),
            EvaluationError::Summary(e) => e.hint(),
            EvaluationError::Command(e) => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            EvaluationError::Binding(e) => e.code(),
            EvaluationError::Write(e) => e.code(),
            EvaluationError::Request(e) => e.code(),
            EvaluationError::Summary(e) => e.code(),
            EvaluationError::Command(e) => e.code(),
            EvaluationError::OutputMissing => Some("external_evaluator_output_missing".to_string()),
            EvaluationError::Failed { rc, .. } => Some(format!("external_evaluator_failed:{rc}")),
            EvaluationError::PlaceholdersMissing => {
                Some("evaluator_command_placeholders_missing".to_string())
            }
            EvaluationError::CommandEmpty => Some("evaluator_command_empty".to_string()),
            _ => None,
        }
    }
}

/// One evaluation run (the reference's `run_evaluation` arguments).
#[derive(Debug, Clone)]
pub struct EvaluationRun<'a> {
    /// The model folder.
    pub checkpoint: &'a Path,
    /// The output folder; must not exist.
    pub output_dir: &'a Path,
    /// The protocol id (recorded stripped in the request, unstripped in the receipt).
    pub protocol_id: &'a str,
    /// The evaluator argv template.
    pub command: &'a [String],
    /// Repeats per cell requested.
    pub repeats: i64,
    /// The binding's experiment name.
    pub experiment_name: &'a str,
    /// The binding's gate step.
    pub gate_step: u64,
    /// The binding's arm.
    pub arm: Arm,
    /// Folder for the evaluator's output logs (`None`: not kept).
    pub log_dir: Option<&'a Path>,
    /// Log label (e.g. `r01/evaluator`).
    pub log_label: &'a str,
    /// Extra optional placeholders, `("{name}", value)` (for example
    /// `{bat}`, the path of the running bat binary).
    pub extra_placeholders: &'a [(String, String)],
}

fn path_text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn plain_write(path: &Path, text: &str) -> Result<(), EvaluationError> {
    std::fs::write(path, text).map_err(|source| EvaluationError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// §G.4: run the evaluator for a checkpoint and return the summary.
pub fn run_evaluation(
    run: &EvaluationRun<'_>,
    pack: &Pack,
    sink: &mut dyn OutputSink,
) -> Result<Value, EvaluationError> {
    let checkpoint = std::fs::canonicalize(run.checkpoint).map_err(|source| {
        EvaluationError::CheckpointMissing {
            path: run.checkpoint.to_path_buf(),
            source,
        }
    })?;
    let out = std::path::absolute(run.output_dir).map_err(|source| EvaluationError::Io {
        path: run.output_dir.to_path_buf(),
        source,
    })?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|source| EvaluationError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    match std::fs::create_dir(&out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(EvaluationError::OutputExists { path: out })
        }
        Err(source) => return Err(EvaluationError::Io { path: out, source }),
    }
    let binding = build_binding(&checkpoint, run.experiment_name, run.gate_step, run.arm)?;
    write_immutable(
        &out.join(BINDING_FILE),
        json::pretty_json_file(&binding).as_bytes(),
    )?;
    let request = evaluation_request(&binding, run.protocol_id, run.repeats)?;
    let request_path = out.join(REQUEST_FILE);
    plain_write(&request_path, &json::pretty_json_file(&request))?;
    let raw_path = out.join(RAW_FILE);
    if run.command.is_empty() {
        return Err(EvaluationError::CommandEmpty);
    }
    let values = [
        ("{checkpoint}", path_text(&checkpoint)),
        ("{output}", path_text(&raw_path)),
        ("{request}", path_text(&request_path)),
    ];
    let required: Vec<&str> = values.iter().map(|(_, v)| v.as_str()).collect();
    let mut all: Vec<(&str, String)> = values.to_vec();
    for (k, v) in run.extra_placeholders {
        if !all.iter().any(|(name, _)| name == k) {
            all.push((k.as_str(), v.clone()));
        }
    }
    let argv = template::expand(run.command, &all);
    if !template::all_present(&argv, &required) {
        return Err(EvaluationError::PlaceholdersMissing);
    }
    let outcome = child::run_child(
        &ChildSpec {
            label: run.log_label,
            argv: &argv,
            log_dir: run.log_dir,
        },
        sink,
    )?;
    if outcome.rc != 0 {
        return Err(EvaluationError::Failed { rc: outcome.rc });
    }
    if !raw_path.is_file() {
        return Err(EvaluationError::OutputMissing);
    }
    let raw =
        bat_contract::fsutil::read_json_input(&raw_path).map_err(|source| EvaluationError::Io {
            path: raw_path.clone(),
            source,
        })?;
    let identity = binding
        .get("model_identity_sha256")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let summary = build_summary(&raw, &identity, pack, SumMode::Plain)?;
    let summary_text = json::pretty_json_file(&summary);
    plain_write(&out.join(SUMMARY_FILE), &summary_text)?;
    let receipt = eval_run_receipt(
        &identity,
        run.protocol_id,
        run.command,
        &sha256_hex(&raw),
        &sha256_hex(summary_text.as_bytes()),
    );
    plain_write(&out.join(RECEIPT_FILE), &json::pretty_json_file(&receipt))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::child::Discard;

    fn initial() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/loop/fixtures/initial")
    }

    fn run_with(command: &[String], out: &Path) -> Result<Value, EvaluationError> {
        run_evaluation(
            &EvaluationRun {
                checkpoint: &initial(),
                output_dir: out,
                protocol_id: " p ",
                command,
                repeats: 1,
                experiment_name: "bat-loop",
                gate_step: 0,
                arm: Arm::Baseline,
                log_dir: None,
                extra_placeholders: &[],
                log_label: "e",
            },
            &Pack::default_pack(),
            &mut Discard,
        )
    }

    fn argv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn binding_and_request_are_written_before_the_template_is_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("a/eval");
        assert!(matches!(
            run_with(&[], &out),
            Err(EvaluationError::CommandEmpty)
        ));
        assert!(out.join(BINDING_FILE).is_file());
        let req = json::parse_bytes(&std::fs::read(out.join(REQUEST_FILE)).unwrap()).unwrap();
        assert_eq!(req.get("protocol_id").and_then(Value::as_str), Some("p"));
        // The folder must not exist.
        assert!(matches!(
            run_with(&argv(&["true"]), &out),
            Err(EvaluationError::OutputExists { .. })
        ));
    }

    #[test]
    fn a_successful_run_writes_summary_and_receipt() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("eval");
        let cmd = argv(&[
            "sh",
            "-c",
            "cp \"$0/raw.json\" \"$2\"",
            "{checkpoint}",
            "{request}",
            "{output}",
        ]);
        let summary = run_with(&cmd, &out).unwrap();
        let receipt = json::parse_bytes(&std::fs::read(out.join(RECEIPT_FILE)).unwrap()).unwrap();
        assert_eq!(
            receipt.get("protocol_id").and_then(Value::as_str),
            Some(" p "),
            "the receipt keeps the protocol id unstripped"
        );
        assert_eq!(
            receipt.get("checkpoint_sha256"),
            summary.get("checkpoint_sha256")
        );
        assert_eq!(
            receipt.get("summary_sha256").and_then(Value::as_str),
            Some(sha256_hex(&std::fs::read(out.join(SUMMARY_FILE)).unwrap()).as_str())
        );
        // A failing evaluator reports its exit code.
        let e = run_with(
            &argv(&[
                "sh",
                "-c",
                "exit 7",
                "{checkpoint}",
                "{request}",
                "{output}",
            ]),
            &tmp.path().join("e2"),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "the external evaluator exited with status 7");
        assert_eq!(
            bat_ledger::Diagnostic::code(&e).as_deref(),
            Some("external_evaluator_failed:7")
        );
    }
}
