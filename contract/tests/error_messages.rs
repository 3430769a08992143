//! Every error of the contract speaks in sentences: a sample of each
//! variant is walked, and a message that reads as a bare reference code
//! (`source_grid_incomplete`, `line_3_not_object`) or equals the error's
//! own `code()` fails the test. The codes themselves stay reachable through
//! `code()`, which conformance compares.

use std::path::PathBuf;

use bat_contract::binding::{BindingError, CommandError, RequestError};
use bat_contract::firewall::FirewallError;
use bat_contract::gate::GateError;
use bat_contract::json::{EncodeError, ParseError};
use bat_contract::numeric::{FsumError, ToFloatError};
use bat_contract::pack::PackError;
use bat_contract::protocol::{ProtocolError, StartError};
use bat_contract::reward::RewardError;
use bat_contract::round::{ViewError, WriteError};
use bat_contract::source::SourceError;
use bat_contract::summary::SummaryError;
use bat_contract::task::TaskError;
use bat_error::{shows_a_code, Diagnostic};

/// The messages among `errors` that are codes rather than sentences.
fn codes_as_messages(errors: &[&dyn Diagnostic]) -> Vec<String> {
    errors
        .iter()
        .filter(|e| shows_a_code(**e))
        .map(|e| format!("{:?} (code {:?})", e.to_string(), e.code()))
        .collect()
}

fn io() -> std::io::Error {
    std::io::Error::other("disk on fire")
}

#[test]
fn contract_errors_are_sentences_with_their_codes_apart() {
    let p = || "/m".to_string();
    let json_err = bat_contract::json::parse("{").expect_err("an unclosed object");
    let errors: Vec<Box<dyn Diagnostic>> = vec![
        Box::new(SourceError::GridInvariantFailed),
        Box::new(SourceError::LineInvalidJson { line: 3 }),
        Box::new(SourceError::LineNotObject { line: 4 }),
        Box::new(SourceError::RowDigestInvalid),
        Box::new(SourceError::StateIdInvalid),
        Box::new(SourceError::TrainingContractInvalid),
        Box::new(SourceError::ProvenanceInvalid),
        Box::new(SourceError::GridIncomplete),
        Box::new(RewardError::StageInvalid),
        Box::new(TaskError::ExtraInfoInvalid),
        Box::new(TaskError::StateIdInvalid),
        Box::new(TaskError::SourceStateIdInvalid),
        Box::new(TaskError::TrackUnsupported),
        Box::new(TaskError::TargetStageUnsupported),
        Box::new(TaskError::ViewIndexInvalid),
        Box::new(TaskError::TaskDefinitionVersionUnsupported),
        Box::new(TaskError::NotStableJson),
        Box::new(TaskError::PromptInvalid),
        Box::new(TaskError::PromptMessageInvalid),
        Box::new(TaskError::PromptMismatch),
        Box::new(ViewError::SourceDigestMismatch),
        Box::new(ViewError::PrescriptionInvalid),
        Box::new(ViewError::TargetDisagrees),
        Box::new(ViewError::TargetStageRequired),
        Box::new(ViewError::ArgumentsInvalid),
        Box::new(ViewError::SelectionInvalid),
        Box::new(ViewError::RowCountInvalid),
        Box::new(ViewError::PoolCompositionInvalid),
        Box::new(ViewError::TargetStageInvalid),
        Box::new(ViewError::MixStageInvalid),
        Box::new(ViewError::E2eStageInvalid),
        Box::new(ViewError::StateIdDuplicate),
        Box::new(ViewError::RowMalformed { row: 2 }),
        Box::new(ViewError::ManifestInvalid),
        Box::new(ViewError::TrainDigestMismatch),
        Box::new(ViewError::LineInvalidJson { line: 5 }),
        Box::new(ViewError::LineNotObject { line: 6 }),
        Box::new(ViewError::RowTaskContractInvalid),
        Box::new(ViewError::RowRewardContractInvalid),
        Box::new(ViewError::RowStageInvalid),
        Box::new(ViewError::NotStableJson),
        Box::new(ViewError::Source(SourceError::GridIncomplete)),
        Box::new(ViewError::Task(TaskError::PromptInvalid)),
        Box::new(ViewError::Reward(RewardError::StageInvalid)),
        Box::new(ProtocolError::Missing),
        Box::new(ProtocolError::Invalid),
        Box::new(ProtocolError::ReceiptInvalid),
        Box::new(ProtocolError::ReceiptMismatch),
        Box::new(StartError::PrescriptionInvalid),
        Box::new(StartError::InheritanceMismatch),
        Box::new(StartError::OptimizerMissing),
        Box::new(StartError::OptimizerMismatch),
        Box::new(StartError::DatasetTargetDisagrees),
        Box::new(StartError::Protocol(ProtocolError::Invalid)),
        Box::new(StartError::Binding(BindingError::NoFiles { path: p() })),
        Box::new(RequestError::BindingInvalid),
        Box::new(RequestError::RequestInvalid),
        Box::new(CommandError::Empty),
        Box::new(CommandError::PlaceholdersMissing),
        Box::new(BindingError::PathIsSymlink { path: p() }),
        Box::new(BindingError::NotADirectory { path: p() }),
        Box::new(BindingError::ConfigMissing { path: p() }),
        Box::new(BindingError::IndexMalformed { path: p() }),
        Box::new(BindingError::WeightEscapes { path: p() }),
        Box::new(BindingError::WeightNotRegular { path: p() }),
        Box::new(BindingError::WeightsMissing { path: p() }),
        Box::new(BindingError::SymlinkInExport { path: p() }),
        Box::new(BindingError::NoFiles { path: p() }),
        Box::new(BindingError::ChangedWhileHashing { path: p() }),
        Box::new(BindingError::NotFound { path: p() }),
        Box::new(BindingError::NonUtf8Name { path: p() }),
        Box::new(BindingError::Io {
            path: p(),
            source: io(),
        }),
        Box::new(BindingError::IndexJson {
            path: p(),
            reason: "x".into(),
        }),
        Box::new(FirewallError::MarkersInvalid),
        Box::new(FirewallError::MarkersJson { reason: "x".into() }),
        Box::new(FirewallError::NotUtf8 { offset: 1 }),
        Box::new(FirewallError::Pack { reason: "x".into() }),
        Box::new(SummaryError::Json { reason: "x".into() }),
        Box::new(SummaryError::Pack { reason: "x".into() }),
        Box::new(GateError::Crash {
            kind: "KeyError".into(),
            message: "'x'".into(),
        }),
        Box::new(GateError::Pack { reason: "x".into() }),
        Box::new(PackError::Read {
            path: PathBuf::from("/p"),
            source: io(),
        }),
        Box::new(PackError::Json {
            origin: "p".into(),
            source: json_err.clone(),
        }),
        Box::new(PackError::Invalid {
            origin: "p".into(),
            reason: "x".into(),
        }),
        Box::new(WriteError::Refusing {
            path: PathBuf::from("/p"),
        }),
        Box::new(WriteError::Io {
            path: PathBuf::from("/p"),
            source: io(),
        }),
        Box::new(EncodeError::NonFiniteFloat {
            value: "nan".into(),
        }),
        Box::new(FsumError::Overflow),
        Box::new(FsumError::InfMinusInf),
        Box::new(ToFloatError::Type),
        Box::new(ToFloatError::Value),
        Box::new(ToFloatError::Overflow),
        Box::new(json_err as ParseError),
    ];
    let mut all: Vec<&dyn Diagnostic> = errors.iter().map(|e| e.as_ref()).collect();
    // Every code of the summary and the gate, as the contract index names them.
    let summary_codes = [
        "evaluation_payload_invalid",
        "evaluation_cells_missing",
        "evaluation_cell_2_invalid",
        "evaluation_cell_1_identity_invalid",
        "evaluation_cell_duplicate",
        "task_score_invalid",
        "stage_scores_invalid",
        "S3_invalid",
        "agentic_score_invalid",
        "evaluation_cell_1_agentic_mismatch",
        "applicable_stages_invalid",
        "eval_summary_invalid",
        "eval_means_invalid",
        "eval_checkpoint_binding_invalid",
        "eval_pairing_evidence_invalid",
        "eval_track_scores_invalid",
        "paired_cells_mismatch",
        "paired_tracks_mismatch",
        "some_future_code",
    ];
    let summaries: Vec<SummaryError> = summary_codes
        .iter()
        .map(|c| SummaryError::Invalid {
            code: c.to_string(),
            detail: None,
        })
        .collect();
    let gates: Vec<GateError> = summary_codes
        .iter()
        .map(|c| GateError::Invalid {
            code: c.to_string(),
            detail: None,
        })
        .collect();
    all.extend(summaries.iter().map(|e| e as &dyn Diagnostic));
    all.extend(gates.iter().map(|e| e as &dyn Diagnostic));
    let bad = codes_as_messages(&all);
    assert!(
        bad.is_empty(),
        "messages that are codes:\n{}",
        bad.join("\n")
    );
}

#[test]
fn codes_keep_the_reference_strings_and_messages_carry_the_values() {
    let e = SourceError::LineInvalidJson { line: 7 };
    assert_eq!(e.code().as_deref(), Some("source_line_7_invalid_json"));
    assert!(e.to_string().contains("line 7"), "{e}");
    let e = ViewError::RowMalformed { row: 3 };
    assert_eq!(e.code().as_deref(), Some("round_row_3_malformed"));
    assert!(e.to_string().contains("row 3"), "{e}");
    // A wrapper answers with its inner error's code.
    let e = ViewError::Task(TaskError::PromptMismatch);
    assert_eq!(e.code().as_deref(), Some("prompt_task_contract_mismatch"));
    let e = SummaryError::Invalid {
        code: "evaluation_cell_12_identity_invalid".into(),
        detail: None,
    };
    assert_eq!(
        e.code().as_deref(),
        Some("evaluation_cell_12_identity_invalid")
    );
    assert!(e.to_string().contains("cell 12"), "{e}");
    let e = GateError::Invalid {
        code: "S4_invalid".into(),
        detail: None,
    };
    assert!(e.to_string().contains("stage S4"), "{e}");
    // Errors the reference has no code for have none.
    assert_eq!(FsumError::Overflow.code(), None);
}
