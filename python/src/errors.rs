//! Library errors as Python exceptions. The message, hint and reference
//! code come from the library error itself ([`Diagnostic`]), the same ones
//! `bat` prints, so a script sees what the command line would say; the
//! exception class is chosen from the error's variant: a missing thing,
//! damaged data, a refused round or audit, or anything else (the base
//! class).

use bat::inspect::InspectError;
use bat::round::RoundError;
use bat_ledger::Diagnostic;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyList;

pyo3::create_exception!(
    batledger,
    LedgerError,
    PyException,
    "Base class of every error bat reports. `hints` lists what to do about it."
);
pyo3::create_exception!(
    batledger,
    NotFound,
    LedgerError,
    "No ledger, revision, ref or path of that name."
);
pyo3::create_exception!(
    batledger,
    Corrupt,
    LedgerError,
    "Stored data failed verification or is missing; `bat fsck` lists all damage."
);
pyo3::create_exception!(
    batledger,
    RoundRejected,
    LedgerError,
    "A round directory or an audit summary was refused by validation; nothing was written."
);

/// Which Python class an error maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `LedgerError` itself.
    Base,
    /// `NotFound`.
    NotFound,
    /// `Corrupt`.
    Corrupt,
    /// `RoundRejected`.
    Rejected,
}

/// A failure on its way to Python: plain Rust data, so it can cross the
/// GIL-released section.
#[derive(Debug)]
pub struct Failure {
    class: Class,
    message: String,
    hints: Vec<String>,
    code: Option<String>,
}

/// What a binding returns before the GIL is taken back.
pub type Outcome<T> = Result<T, Failure>;

impl Failure {
    /// A library error as an exception of the given class: its message,
    /// hint (one entry per line) and reference code.
    pub fn from_library(class: Class, e: &dyn Diagnostic) -> Self {
        Failure {
            class,
            message: e.to_string(),
            hints: e
                .hint()
                .map(|h| h.lines().map(str::to_string).collect())
                .unwrap_or_default(),
            code: e.code(),
        }
    }

    /// A failure of the base class with a message.
    pub fn msg(message: impl Into<String>) -> Self {
        Failure {
            class: Class::Base,
            message: message.into(),
            hints: Vec::new(),
            code: None,
        }
    }

    /// Replace the hints by one, in the Python API's words.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints = vec![hint.into()];
        self
    }

    /// The exception to raise.
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        let mut text = self.message.clone();
        for h in &self.hints {
            text.push_str("\nhint: ");
            text.push_str(h);
        }
        let err = match self.class {
            Class::Base => LedgerError::new_err(text),
            Class::NotFound => NotFound::new_err(text),
            Class::Corrupt => Corrupt::new_err(text),
            Class::Rejected => RoundRejected::new_err(text),
        };
        // Attributes for programs; the text above is for people. A failure
        // to set them leaves the exception usable, so it is ignored.
        let value = err.value(py);
        let _ = value.setattr("message", self.message.as_str());
        if let Ok(hints) = PyList::new(py, &self.hints) {
            let _ = value.setattr("hints", hints);
        }
        let _ = value.setattr("code", self.code.as_deref());
        err
    }
}

/// The class of a ledger error.
pub fn ledger_class(e: &bat_ledger::Error) -> Class {
    use bat_ledger::Error as E;
    match e {
        E::NotALedger { .. }
        | E::UnknownRevision { .. }
        | E::PathNotFound { .. }
        | E::RefNotFound { .. } => Class::NotFound,
        E::Corrupt { .. } | E::ObjectMissing { .. } | E::BadObject { .. } => Class::Corrupt,
        _ => Class::Base,
    }
}

impl From<bat_ledger::Error> for Failure {
    fn from(e: bat_ledger::Error) -> Self {
        Failure::from_library(ledger_class(&e), &e)
    }
}

impl From<RoundError> for Failure {
    fn from(e: RoundError) -> Self {
        let class = match &e {
            RoundError::Ledger(le) => ledger_class(le),
            RoundError::Check(_)
            | RoundError::NotARound { .. }
            | RoundError::NoBaseline { .. }
            | RoundError::Metadata { .. } => Class::Rejected,
            RoundError::NotARoundCommit { .. } => Class::NotFound,
            _ => Class::Base,
        };
        Failure::from_library(class, &e)
    }
}

impl From<InspectError> for Failure {
    fn from(e: InspectError) -> Self {
        let class = match &e {
            InspectError::Ledger { source } => ledger_class(source),
            InspectError::InvalidSummary { .. }
            | InspectError::InvalidAudit { .. }
            | InspectError::CheckpointMismatch { .. } => Class::Rejected,
            _ => Class::Base,
        };
        let failure = Failure::from_library(class, &e);
        if matches!(e, InspectError::CheckpointMismatch { .. }) {
            // The library's hint names the CLI's flags; this is the Python
            // API's spelling of the same way out.
            failure.with_hint(
                "audit the round's own candidate checkpoint, or pass \
                 allow_mismatch_reason=TEXT to record it anyway (the reason is kept with the audit)",
            )
        } else {
            failure
        }
    }
}

impl From<bat::inspect::rounds::RoundsError> for Failure {
    fn from(e: bat::inspect::rounds::RoundsError) -> Self {
        use bat::inspect::rounds::RoundsError;
        match e {
            RoundsError::Ledger(le) => le.into(),
            RoundsError::Inspect(ie) => (*ie).into(),
            // Undecodable round metadata: the stored commit is not what a
            // round commit must be.
            other @ RoundsError::Meta { .. } => Failure::from_library(Class::Corrupt, &other),
        }
    }
}

impl From<bat::retention::RetentionError> for Failure {
    fn from(e: bat::retention::RetentionError) -> Self {
        match e {
            bat::retention::RetentionError::Ledger(le) => le.into(),
            other => Failure::from_library(Class::Base, &other),
        }
    }
}

impl From<bat::experiment::ExperimentError> for Failure {
    fn from(e: bat::experiment::ExperimentError) -> Self {
        use bat::experiment::ExperimentError as E;
        let class = match &e {
            E::Ledger(le) => ledger_class(le),
            E::NoMatch { .. } | E::UnknownRevision { .. } => Class::NotFound,
            _ => Class::Base,
        };
        Failure::from_library(class, &e)
    }
}

impl From<bat::report::html::ReportError> for Failure {
    fn from(e: bat::report::html::ReportError) -> Self {
        use bat::report::html::ReportError as E;
        match e {
            E::Rounds(r) => r.into(),
            E::Inspect(i) => (*i).into(),
            E::Revision(r) => (*r).into(),
            E::Arms(a) => (*a).into(),
            other => Failure::from_library(Class::Base, &other),
        }
    }
}
