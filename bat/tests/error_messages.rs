//! The domain's errors speak in sentences: a sample of every variant of
//! the loop, evaluation, template and child errors (the ones that used to
//! print reference codes) and of each other error enum is walked; a
//! message that reads as a bare code or equals its own `code()` fails.

use std::path::PathBuf;

use bat::engine::child::ChildError;
use bat::engine::evaluation::EvaluationError;
use bat::engine::rounds::LoopError;
use bat::engine::template::TemplateError;
use bat_ledger::{shows_a_code, Diagnostic, ErrorKind};

fn io() -> std::io::Error {
    std::io::Error::other("disk on fire")
}

fn codes_as_messages(errors: &[Box<dyn Diagnostic>]) -> Vec<String> {
    errors
        .iter()
        .filter(|e| shows_a_code(e.as_ref()))
        .map(|e| format!("{:?} (code {:?})", e.to_string(), e.code()))
        .collect()
}

fn engine_samples() -> Vec<Box<dyn Diagnostic>> {
    let p = || PathBuf::from("/w");
    let s = || "x".to_string();
    vec![
        Box::new(LoopError::SizeInvalid),
        Box::new(LoopError::TrainerPlaceholdersMissing),
        Box::new(LoopError::TrainerFailed {
            round_id: "r01".into(),
            rc: 2,
        }),
        Box::new(LoopError::TrainerArtifactsMissing {
            round_id: "r01".into(),
        }),
        Box::new(LoopError::Missing {
            path: p(),
            source: io(),
        }),
        Box::new(LoopError::Exists { path: p() }),
        Box::new(LoopError::Io {
            path: p(),
            source: io(),
        }),
        Box::new(LoopError::HealthInvalid {
            round_id: s(),
            reason: s(),
        }),
        Box::new(LoopError::Evaluation {
            context: s(),
            source: EvaluationError::OutputMissing,
        }),
        Box::new(LoopError::Command(ChildError::TemplateInvalid)),
        Box::new(LoopError::Interrupted {
            round_id: s(),
            signal: nix::sys::signal::Signal::SIGINT,
        }),
        Box::new(LoopError::Encode { reason: s() }),
        Box::new(EvaluationError::CheckpointMissing {
            path: p(),
            source: io(),
        }),
        Box::new(EvaluationError::OutputExists { path: p() }),
        Box::new(EvaluationError::Io {
            path: p(),
            source: io(),
        }),
        Box::new(EvaluationError::CommandEmpty),
        Box::new(EvaluationError::PlaceholdersMissing),
        Box::new(EvaluationError::Failed { rc: 3 }),
        Box::new(EvaluationError::OutputMissing),
        Box::new(ChildError::TemplateInvalid),
        Box::new(ChildError::Spawn {
            program: s(),
            source: io(),
        }),
        Box::new(ChildError::Io {
            program: s(),
            source: io(),
        }),
        Box::new(ChildError::Empty),
        Box::new(ChildError::Interrupted {
            program: s(),
            signal: nix::sys::signal::Signal::SIGTERM,
            killed: true,
        }),
        Box::new(TemplateError::TemplateJson {
            file: s(),
            line: 1,
            column: 2,
            reason: s(),
        }),
        Box::new(TemplateError::TemplateShape {
            file: s(),
            reason: s(),
        }),
        Box::new(TemplateError::UnknownPlaceholder {
            kind: "trainer",
            file: s(),
            position: 1,
            element: s(),
            suggestion: None,
            known: vec![s()],
        }),
        Box::new(TemplateError::EmbeddedPlaceholder {
            kind: "trainer",
            file: s(),
            position: 1,
            element: s(),
            placeholder: s(),
        }),
        Box::new(TemplateError::MissingPlaceholder {
            kind: "trainer",
            file: s(),
            placeholder: s(),
            required: vec![s()],
        }),
        Box::new(TemplateError::AblationPlaceholder {
            kind: "trainer",
            file: s(),
            placeholder: "{seed}",
            consequence: "its runs cannot be repeated under other seeds",
        }),
        Box::new(TemplateError::DeclaredEnvUnset {
            kind: "evaluator".into(),
            context: "round r02".into(),
            names: vec!["BAT_PYTHON".into()],
        }),
    ]
}

fn other_samples() -> Vec<Box<dyn Diagnostic>> {
    use bat::replay::ReplayError;
    use bat::round::check::RoundCheck;
    use bat::round::RoundError;
    let p = || PathBuf::from("/w");
    let s = || "x".to_string();
    vec![
        Box::new(bat::clone::CloneError::Interrupted {
            url: s(),
            dest: p(),
            removed: true,
        }),
        Box::new(bat::clone::CloneError::PrivateNeedsDirectory),
        Box::new(bat::demo::DemoError::NoRounds),
        Box::new(bat::backend::CampaignError::NoBatBinary),
        Box::new(bat::backend::CampaignError::RewardModeUnused),
        Box::new(bat::engine::resume::ResumeError::NothingToResume { branch: s() }),
        Box::new(bat::engine::runlock::LockError::Unreadable {
            path: p(),
            reason: s(),
        }),
        Box::new(bat::inspect::InspectError::InvalidSummary { reason: s() }),
        Box::new(bat::inspect::tensors::TensorError::Invalid {
            side: "left",
            reason: s(),
        }),
        Box::new(bat::report::html::ReportError::NoRounds { name: s() }),
        Box::new(bat::report::query::QueryError::NotReadOnly),
        Box::new(bat::report::query::QueryError::TimeLimit {
            limit: std::time::Duration::from_secs(30),
        }),
        Box::new(bat::report::query::QueryError::MemoryLimit {
            limit: 512 << 20,
            what: "the rows of the result",
        }),
        Box::new(bat::report::query::QueryError::Cancelled),
        Box::new(bat::retention::PolicyError::Empty),
        Box::new(bat::round::meta::MetaError::Malformed { reason: s() }),
        Box::new(bat::serve::auth::TokenFileError::BadLine {
            line: 1,
            reason: "empty",
        }),
        Box::new(bat::serve::ServeError::Io {
            context: s(),
            source: io(),
        }),
        Box::new(bat::sim::SimError::Diverged { round_id: s() }),
        Box::new(ReplayError::VerifyWithAblation),
        Box::new(ReplayError::Loop(LoopError::SizeInvalid)),
        Box::new(RoundError::NoBaseline {
            round_id: s(),
            dir: p(),
        }),
        Box::new(RoundError::Check(RoundCheck::Layout {
            path: p(),
            reason: s(),
        })),
        Box::new(RoundError::Ledger(bat_ledger::Error::Cancelled)),
        Box::new(RoundError::AmbiguousRoundId {
            round_id: "r02".into(),
            commits: vec![],
        }),
        Box::new(RoundError::DuplicateRoundId {
            reference: "refs/heads/main".into(),
            round_id: "r02".into(),
            commits: vec![],
        }),
    ]
}

#[test]
fn engine_errors_are_sentences_with_their_codes_apart() {
    let bad = codes_as_messages(&engine_samples());
    assert!(
        bad.is_empty(),
        "messages that are codes:\n{}",
        bad.join("\n")
    );
}

#[test]
fn other_domain_errors_are_sentences() {
    let bad = codes_as_messages(&other_samples());
    assert!(
        bad.is_empty(),
        "messages that are codes:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_trainer_failure_says_what_and_where_and_keeps_the_reference_code() {
    let e = LoopError::TrainerFailed {
        round_id: "r01".into(),
        rc: 2,
    };
    assert_eq!(
        e.to_string(),
        "the trainer exited with status 2 in round r01"
    );
    assert_eq!(e.code().as_deref(), Some("trainer_failed:r01:2"));
    assert!(e.hint().is_some());
    let e = LoopError::TrainerArtifactsMissing {
        round_id: "r03".into(),
    };
    assert_eq!(e.code().as_deref(), Some("trainer_artifacts_missing:r03"));
    assert!(e.to_string().contains("r03"), "{e}");
    // Wrapped errors answer with the inner code: the evaluator's status.
    let e = LoopError::Evaluation {
        context: "candidate evaluation of r01".into(),
        source: EvaluationError::Failed { rc: 4 },
    };
    assert_eq!(e.code().as_deref(), Some("external_evaluator_failed:4"));
    assert!(e.to_string().contains("status 4"), "{e}");
    let e = TemplateError::TemplateShape {
        file: "t.json".into(),
        reason: "empty".into(),
    };
    assert_eq!(e.code().as_deref(), Some("command_template_invalid"));
    assert_eq!(e.kind(), ErrorKind::Usage);
}
