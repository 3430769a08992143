//! The CLI's error type. Every failure has a [`ErrorKind`], and the kind
//! alone decides the exit code (documented in `bat --help` and
//! docs/cli.md). Library errors become `CliError`s through one table of
//! explicit conversions (see [`from_library!`]) that take the kind, hint
//! and reference code from the library error itself ([`Diagnostic`]) and
//! keep its cause chain (printed as `caused by:` lines).

use std::process::ExitCode;

use bat_ledger::{Diagnostic, ErrorKind as LibraryKind};

/// What kind of failure ended the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command ran but could not do what was asked: a check failed,
    /// stored data is damaged, a remote refused, a file could not be written.
    User,
    /// The command line, or an input it names (a revision, a file, a
    /// remote name), is wrong. Re-running with other arguments can help.
    Usage,
    /// Ctrl-C or SIGTERM: the operation stopped at a safe point.
    Interrupted,
    /// The reader of stdout went away (`bat show HEAD | head -1`); not
    /// reported.
    BrokenPipe,
    /// A bug in bat (an invariant broke, output could not be encoded).
    Internal,
}

impl ErrorKind {
    /// The process exit code of this kind.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::User => EXIT_FAILURE,
            ErrorKind::Usage => EXIT_USAGE,
            ErrorKind::Interrupted => EXIT_INTERRUPTED,
            ErrorKind::BrokenPipe => EXIT_BROKEN_PIPE,
            ErrorKind::Internal => EXIT_INTERNAL,
        }
    }
}

/// A check failed, data is damaged, or the operation could not be done.
pub const EXIT_FAILURE: u8 = 1;
/// Bad command line or bad input named on it (clap uses 2 as well).
pub const EXIT_USAGE: u8 = 2;
/// A bug in bat; the same code Rust gives a panic.
pub const EXIT_INTERNAL: u8 = 101;
/// Interrupted by Ctrl-C / SIGTERM (128 + SIGINT, the shell convention).
pub const EXIT_INTERRUPTED: u8 = 130;
/// stdout closed by its reader (128 + SIGPIPE, as a shell reports a
/// process killed by SIGPIPE).
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// The exit-code table shown at the end of `bat --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0    success
  1    failure: a check failed, data is damaged, a remote refused
  2    usage: bad arguments, or a bad input named on the command line
  101  internal error (a bug in bat)
  130  interrupted (Ctrl-C / SIGTERM); nothing half-done is left behind
  141  stdout was closed by its reader (`bat log` ends with 0 instead)
  143  `bat run` stopped by SIGTERM (its children stopped too)";

/// A failure the CLI reports: its kind, the message and hints for the user.
#[derive(Debug)]
pub struct CliError {
    /// What kind of failure (decides the exit code).
    pub kind: ErrorKind,
    /// What went wrong.
    pub message: String,
    /// What the user can do about it (printed as `hint:` lines).
    pub hints: Vec<String>,
    /// The BaT reference's error code, when the library error has one
    /// (`trainer_failed:r01:2`); part of `--json` errors.
    pub code: Option<String>,
    /// What caused it, outermost first (printed as `caused by:` lines).
    pub causes: Vec<String>,
}

impl CliError {
    /// A failure of kind [`ErrorKind::User`].
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::User, message)
    }

    /// A failure of the given kind.
    pub fn with_kind(kind: ErrorKind, message: impl Into<String>) -> Self {
        CliError {
            kind,
            message: message.into(),
            hints: Vec::new(),
            code: None,
            causes: Vec::new(),
        }
    }

    /// A usage error (exit 2).
    pub fn usage_error(message: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::Usage, message)
    }

    /// A bug in bat (exit 101).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::Internal, message)
    }

    /// stdout went away.
    pub fn broken_pipe() -> Self {
        Self::with_kind(ErrorKind::BrokenPipe, "")
    }

    /// Interrupted, with what to run to finish the job.
    pub fn interrupted(message: impl Into<String>) -> Self {
        Self::with_kind(ErrorKind::Interrupted, message)
    }

    /// Mark this error as a usage error (exit 2).
    pub fn usage(mut self) -> Self {
        self.kind = ErrorKind::Usage;
        self
    }

    /// Attach a hint shown after the message.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        self.kind.exit_code()
    }

    /// Print the error on stderr (nothing for a broken pipe) and return the
    /// exit code. With `json`, the error is one JSON object on stderr
    /// (`error`, `kind`, `code`, `hints`, `causes`) instead of lines.
    pub fn report(self, json: bool) -> ExitCode {
        if self.kind == ErrorKind::BrokenPipe {
            return ExitCode::from(self.exit_code());
        }
        // Messages quote stored names (branches, paths, round ids): their
        // control characters are shown as escapes, as on stdout.
        let safe = |s: &str| super::term::neutralize(s, &[]).into_owned();
        if json {
            eprintln!("{}", safe(&self.to_json().to_string()));
        } else {
            let label = match self.kind {
                ErrorKind::Internal => "internal error",
                ErrorKind::Interrupted => "interrupted",
                _ => "error",
            };
            eprintln!("{label}: {}", safe(&self.message));
            for c in &self.causes {
                eprintln!("caused by: {}", safe(c));
            }
            for h in &self.hints {
                eprintln!("hint: {}", safe(h));
            }
        }
        ExitCode::from(self.exit_code())
    }

    /// The `--json` form of the error.
    pub fn to_json(&self) -> serde_json::Value {
        let kind = match self.kind {
            ErrorKind::User => "failure",
            ErrorKind::Usage => "usage",
            ErrorKind::Interrupted => "interrupted",
            ErrorKind::BrokenPipe => "broken_pipe",
            ErrorKind::Internal => "internal",
        };
        serde_json::json!({
            "error": self.message,
            "kind": kind,
            "exit_code": self.exit_code(),
            "code": self.code,
            "hints": self.hints,
            "causes": self.causes,
        })
    }
}

/// The library's classification, as the CLI's.
impl From<LibraryKind> for ErrorKind {
    fn from(kind: LibraryKind) -> Self {
        match kind {
            LibraryKind::User => ErrorKind::User,
            LibraryKind::Usage => ErrorKind::Usage,
            LibraryKind::Interrupted => ErrorKind::Interrupted,
            LibraryKind::Internal => ErrorKind::Internal,
        }
    }
}

impl CliError {
    /// A library error as the CLI reports it: the error's own kind, hint
    /// (one `hint:` line per line of it) and reference code, its message,
    /// and the causes under it that the message does not already say.
    pub fn from_library(e: &dyn Diagnostic) -> Self {
        let message = e.to_string();
        let causes = causes(e, &message);
        CliError {
            kind: e.kind().into(),
            hints: e
                .hint()
                .map(|h| h.lines().map(str::to_string).collect())
                .unwrap_or_default(),
            code: e.code(),
            causes,
            message,
        }
    }
}

/// The messages of `e`'s source chain, outermost first. A library message
/// often quotes its cause (`cannot read PATH: No such file…`); a cause
/// whose text is already printed above it is left out, so each line says
/// something new.
fn causes(e: &dyn std::error::Error, message: &str) -> Vec<String> {
    let mut printed = vec![message.to_string()];
    let mut out = Vec::new();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !printed.iter().any(|p| p.contains(&text)) {
            out.push(text.clone());
            printed.push(text);
        }
        next = cause.source();
    }
    out
}

/// The conversion table: every library error becomes a [`CliError`]
/// through its own [`Diagnostic`] (kind, hint, code). There is
/// deliberately no blanket `From<E: Error>`: a library error type that is
/// not listed here does not convert, so none can reach the user without
/// its kind and hint.
macro_rules! from_library {
    ($($t:ty),* $(,)?) => {
        $(
            impl From<$t> for CliError {
                fn from(e: $t) -> Self {
                    CliError::from_library(&e)
                }
            }
        )*
    };
}

from_library!(
    bat_ledger::Error,
    bat_ledger::remote::RemoteError,
    bat_contract::binding::BindingError,
    bat_contract::firewall::FirewallError,
    bat_contract::gate::GateError,
    bat_contract::pack::PackError,
    bat_contract::round::ViewError,
    bat_contract::round::WriteError,
    bat_contract::source::SourceError,
    bat_contract::summary::SummaryError,
    bat::clone::CloneError,
    bat::demo::DemoError,
    bat::backend::CampaignError,
    bat::engine::arms::ArmError,
    bat::engine::child::ChildError,
    bat::engine::template::TemplateError,
    bat::engine::rounds::LoopError,
    bat::engine::runlock::LockError,
    bat::inspect::InspectError,
    bat::replay::ReplayError,
    bat::experiment::ExperimentError,
    bat::report::query::QueryError,
    bat::retention::RetentionError,
    bat::round::RoundError,
    bat::serve::ServeError,
    bat::sim::SimError,
    bat::checkpoint::CheckpointError,
    bat::inspect::rounds::RoundsError,
    bat::report::html::ReportError,
    bat::report::mlflow::MlflowError,
    bat::engine::resume::ResumeError,
    bat::engine::evaluation::EvaluationError,
    bat::retention::PolicyError,
    bat::remote::credentials::CredentialError,
);

/// A write to stdout failed: a closed pipe is [`ErrorKind::BrokenPipe`],
/// anything else a failure with the I/O error as message. Only for errors
/// of the output stream; file errors carry their path through their own
/// library error.
pub fn stdout_error(e: std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::broken_pipe()
    } else {
        CliError::new(format!("cannot write to stdout: {e}"))
    }
}

/// What a verb's `run` returns.
pub type CliResult = Result<ExitCode, CliError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_error_keeps_its_kind_hint_code_and_new_causes() {
        // The message already quotes the I/O error: no `caused by:` for it.
        let io = bat_ledger::Error::Io {
            op: "read",
            path: "/l/x".into(),
            source: std::io::Error::other("disk on fire"),
        };
        let e = CliError::from(io);
        assert_eq!(e.kind, ErrorKind::User);
        assert_eq!(e.message, "read /l/x: disk on fire");
        assert!(e.causes.is_empty(), "{:?}", e.causes);
        // A cause the message does not say is kept, under it.
        let promised = bat_ledger::Error::PromisorFetch {
            id: bat_ledger::ObjectId::from_hex(&"ab".repeat(32)).expect("64 hex digits"),
            remote: "origin".into(),
            source: Box::new(bat_ledger::remote::RemoteError::Ledger(
                bat_ledger::Error::Io {
                    op: "open",
                    path: "/r".into(),
                    source: std::io::Error::other("gone"),
                },
            )),
        };
        let e = CliError::from(promised);
        assert!(
            e.message.ends_with("could not be fetched: open /r: gone"),
            "{}",
            e.message
        );
        assert!(e.causes.is_empty(), "{:?}", e.causes);
        assert_eq!(e.hints.len(), 1);
        // The code travels with the error; the message is the sentence.
        let e = CliError::from(bat::engine::rounds::LoopError::TrainerFailed {
            round_id: "r01".into(),
            rc: 2,
        });
        assert_eq!(e.message, "the trainer exited with status 2 in round r01");
        assert_eq!(e.code.as_deref(), Some("trainer_failed:r01:2"));
        let json = e.to_json();
        assert_eq!(json["code"], "trainer_failed:r01:2");
        assert_eq!(json["kind"], "failure");
        assert_eq!(json["exit_code"], 1);
    }

    #[test]
    fn causes_skip_what_is_already_said_and_keep_the_rest() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("cannot save the round")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other("no space left"));
        assert_eq!(
            causes(&e, &e.to_string()),
            vec!["no space left".to_string()]
        );
        let quoted = "cannot save the round: no space left";
        assert!(causes(&e, quoted).is_empty());
    }

    #[test]
    fn a_multi_line_hint_is_one_hint_per_line_and_usage_exits_2() {
        let e = CliError::from(bat::clone::CloneError::Transfer {
            dest: "/d".into(),
            source: bat_ledger::remote::RemoteError::NonFastForward {
                name: "main".into(),
            },
        });
        assert_eq!(e.hints.len(), 2, "{:?}", e.hints);
        assert!(e.hints[1].contains("resume into /d"), "{:?}", e.hints);
        let e = CliError::from(bat::clone::CloneError::PrivateNeedsDirectory);
        assert_eq!(e.exit_code(), EXIT_USAGE);
        let e = CliError::from(bat_ledger::Error::Cancelled);
        assert_eq!(e.exit_code(), EXIT_INTERRUPTED);
    }
}
