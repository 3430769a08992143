//! The CLI's error type. Every failure has a [`ErrorKind`], and the kind
//! alone decides the exit code (documented in `bat --help` and
//! docs/cli.md). Library errors become `CliError`s through explicit
//! conversions that pick the kind and add a hint from the error's variant;
//! there is deliberately no blanket `From<E: Error>`, so a new library error
//! type cannot silently exit 1 without a hint.

use std::process::ExitCode;

use bat_ledger::remote::RemoteError;
use bat_ledger::Error as LedgerError;

use bat::backend::CampaignError;
use bat::clone::CloneError;
use bat::replay::ReplayError;
use bat::round::RoundError;

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
    /// exit code.
    pub fn report(self) -> ExitCode {
        if self.kind != ErrorKind::BrokenPipe {
            let label = match self.kind {
                ErrorKind::Internal => "internal error",
                ErrorKind::Interrupted => "interrupted",
                _ => "error",
            };
            eprintln!("{label}: {}", self.message);
            for h in &self.hints {
                eprintln!("hint: {h}");
            }
        }
        ExitCode::from(self.exit_code())
    }
}

/// The hint for a ledger error, chosen by its variant.
fn ledger_hint(e: &LedgerError) -> Option<&'static str> {
    Some(match e {
        LedgerError::NotALedger { .. } => "run `bat init` first, or pass -C DIR / set BAT_DIR",
        LedgerError::UnsupportedVersion { .. } => {
            "use a bat build that supports this format version"
        }
        LedgerError::AmbiguousPrefix { .. } => "use more hex digits",
        LedgerError::UnknownRevision { .. } => {
            "use a branch, tag, HEAD, a round id (r02), or a commit id prefix of at least 4 hex digits"
        }
        LedgerError::Corrupt { .. } | LedgerError::ObjectMissing { .. } => {
            "run `bat fsck` to list all damage"
        }
        LedgerError::BranchMoved { .. } => "another process moved the branch; re-run the command",
        LedgerError::SymlinkEscapes { .. } => {
            "only relative symlinks that stay inside the committed directory can be recorded"
        }
        LedgerError::UnsupportedFileType { .. } => {
            "remove or move special files out of the directory"
        }
        LedgerError::DestinationNotEmpty { .. } => "check out into a new or empty directory",
        LedgerError::Busy { .. } => "wait for the other bat process to finish",
        LedgerError::RefNotFound { .. } => "list branches with `bat branch`",
        LedgerError::TooManyOpenFiles { .. } => "raise the open-file limit (`ulimit -n`)",
        LedgerError::Io { .. } if e.is_storage_full() => {
            "the disk is full: free some space and run the command again (a write that fails leaves the ledger as it was)"
        }
        LedgerError::Pruned { .. } => {
            "a retention gc dropped its bytes on purpose; `bat fetch REMOTE` from a remote that still has it restores it"
        }
        LedgerError::PromisorFetch { .. } => {
            "this partial clone needs its remote: pass --token / --endpoint (or BAT_TOKEN, AWS_*) as for `bat fetch`"
        }
        _ => return None,
    })
}

impl From<LedgerError> for CliError {
    fn from(e: LedgerError) -> Self {
        let kind = match &e {
            LedgerError::Cancelled => ErrorKind::Interrupted,
            LedgerError::Corrupt { .. }
            | LedgerError::ObjectMissing { .. }
            | LedgerError::Io { .. }
            | LedgerError::TooManyOpenFiles { .. }
            | LedgerError::PromisorFetch { .. }
            | LedgerError::Pruned { .. }
            | LedgerError::Catalog { .. } => ErrorKind::User,
            _ => ErrorKind::Usage,
        };
        let mut c = CliError::with_kind(kind, e.to_string());
        if let Some(h) = ledger_hint(&e) {
            c = c.with_hint(h);
        }
        c
    }
}

impl From<RemoteError> for CliError {
    fn from(e: RemoteError) -> Self {
        let hint = match &e {
            RemoteError::NonFastForward { .. } => {
                Some("fetch or pull first; push --force overwrites the remote branch")
            }
            RemoteError::RefMoved { .. } => Some("someone pushed meanwhile: pull, then push again"),
            RemoteError::Corrupt { .. }
            | RemoteError::Protocol { .. }
            | RemoteError::LimitExceeded { .. } => {
                Some("the peer sent data that does not verify; nothing was referenced locally")
            }
            RemoteError::MissingObject { .. } => Some(
                "the peer does not have everything its refs need; nothing was referenced locally",
            ),
            RemoteError::Unsupported { .. } => Some("use a directory or bundle remote"),
            _ => None,
        };
        let mut c = match e {
            RemoteError::Ledger(le) => return le.into(),
            RemoteError::Cancelled => CliError::interrupted(e.to_string()),
            other => CliError::new(other.to_string()),
        };
        if let Some(h) = hint {
            c = c.with_hint(h);
        }
        c
    }
}

impl From<ReplayError> for CliError {
    fn from(e: ReplayError) -> Self {
        let kind = match e {
            ReplayError::AblationSyntax { .. }
            | ReplayError::UnknownAblation { .. }
            | ReplayError::BadAblationValue { .. }
            | ReplayError::DuplicateAblation { .. }
            | ReplayError::VerifyWithAblation
            | ReplayError::NotARound { .. }
            | ReplayError::NotAncestor { .. }
            | ReplayError::BranchExists { .. }
            | ReplayError::WorkExists { .. } => ErrorKind::Usage,
            ReplayError::Ledger(bat_ledger::Error::Cancelled) => ErrorKind::Interrupted,
            _ => ErrorKind::User,
        };
        let hint = match &e {
        ReplayError::ComputeChange { .. } | ReplayError::BudgetMismatch { .. } => {
            Some("arms must run at the same compute; pass --allow-compute-change to run it anyway")
        }
        ReplayError::BranchExists { .. } => Some("name another one with --branch"),
        ReplayError::UnknownAblation { .. } | ReplayError::BadAblationValue { .. } => {
            Some("e.g. --ablate reward=terminal, --ablate target=S3, --ablate mixture=uniform, --ablate gate=off")
        }
        _ => None,
    };
        let err = CliError::with_kind(kind, e.to_string());
        match hint {
            Some(h) => err.with_hint(h),
            None => err,
        }
    }
}

/// Round errors: the hint for a failed check is chosen by the check's name.
impl From<RoundError> for CliError {
    fn from(e: RoundError) -> Self {
        let hint = match &e {
        RoundError::Check(c) => Some(c.hint()),
        RoundError::NoBaseline { .. } => {
            Some("pass --baseline-summary F, or keep the work dir's baseline-eval/ next to the round")
        }
        RoundError::NotARound { .. } => Some("use --plain to record it as a plain directory"),
        RoundError::Ledger(bat_ledger::Error::BranchMoved { .. }) => Some(
            "another commit landed on the branch while the round was validated; commit the round again",
        ),
        RoundError::Ledger(le) => return lerr_ref(le, e.to_string()),
        _ => None,
    };
        let mut c = CliError::new(e.to_string());
        if let Some(h) = hint {
            c = c.with_hint(h);
        }
        c
    }
}

fn lerr_ref(le: &bat_ledger::Error, msg: String) -> CliError {
    match le {
        bat_ledger::Error::UnknownRevision { .. } | bat_ledger::Error::AmbiguousPrefix { .. } => {
            CliError::usage_error(msg)
        }
        bat_ledger::Error::Cancelled => CliError::interrupted(msg),
        _ => CliError::new(msg),
    }
}

impl From<CloneError> for CliError {
    fn from(e: CloneError) -> Self {
        let msg = e.to_string();
        match e {
            CloneError::UnknownFilter { .. } | CloneError::PrivateNeedsDirectory => {
                CliError::usage_error(msg)
            }
            CloneError::DestinationHasLedger { .. } | CloneError::DestinationNotEmpty { .. } => {
                CliError::usage_error(msg).with_hint("clone into a new or empty directory")
            }
            CloneError::Interrupted { dest, removed, .. } => {
                let msg = if removed {
                    format!("{msg}; removed the unfinished clone {}", dest.display())
                } else {
                    format!("{msg}; {} keeps the objects fetched so far", dest.display())
                };
                // The rerun hint is added by `main` for every interrupt.
                CliError::interrupted(msg)
            }
            CloneError::Transfer { dest, source } => CliError::from(source).with_hint(format!(
                "run the same `bat clone` again to resume into {}",
                dest.display()
            )),
            CloneError::Refused {
                dest,
                removed,
                source,
            } => {
                let e = CliError::from(source);
                if removed {
                    e.with_hint(format!(
                        "removed what the clone had made in {}; clone again with a token the server accepts (--token or $BAT_TOKEN)",
                        dest.display()
                    ))
                } else {
                    e
                }
            }
            CloneError::Remote(re) => re.into(),
            CloneError::Ledger(le) => le.into(),
            CloneError::Io { .. } | CloneError::Private { .. } => CliError::new(msg),
        }
    }
}

impl From<CampaignError> for CliError {
    fn from(e: CampaignError) -> Self {
        let msg = e.to_string();
        match e {
            CampaignError::MissingArgument { .. } => CliError::usage_error(msg)
                .with_hint("give all campaign arguments, or --resume to continue one"),
            CampaignError::NotWithSim { .. } => CliError::usage_error(msg).with_hint(
                "the simulator makes its own source grid, initial policy and templates from the embedded pack",
            ),
            CampaignError::RewardMode(_) | CampaignError::RewardModeUnused => {
                CliError::usage_error(msg)
            }
            CampaignError::NothingToResume { .. } => {
                CliError::new(msg).with_hint("start the campaign with `bat run` (without --resume)")
            }
            CampaignError::Resume(_)
            | CampaignError::NoBatBinary
            | CampaignError::Loop(_)
            | CampaignError::Sim(_)
            | CampaignError::Pack(_) => CliError::new(msg),
        }
    }
}

/// Library errors that need no hint of their own: the message says what
/// is wrong with the named input; the command failed (exit 1). Callers
/// that know the input came from the command line mark them `.usage()`.
macro_rules! failure_from {
    ($($t:ty),* $(,)?) => {
        $(
            impl From<$t> for CliError {
                fn from(e: $t) -> Self {
                    CliError::new(e.to_string())
                }
            }
        )*
    };
}

failure_from!(
    bat_contract::binding::BindingError,
    bat_contract::firewall::FirewallError,
    bat_contract::gate::GateError,
    bat_contract::round::ViewError,
    bat_contract::round::WriteError,
    bat_contract::source::SourceError,
    bat_contract::summary::SummaryError,
    bat::serve::ServeError,
    bat_contract::pack::PackError,
    bat::engine::command::ChildError,
    bat::engine::rounds::LoopError,
    bat::sim::SimError,
    bat::retention::RetentionError,
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
