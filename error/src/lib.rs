#![forbid(unsafe_code)]
//! The error classification shared by bat's library crates (`bat-ledger`,
//! `bat-contract`, `bat`). Each library error says what kind of failure it
//! is, what the user can do about it, and the BaT reference's code where
//! the reference defines one; front ends (the CLI, the Python module) turn
//! that into exit codes, exception classes and `hint:` lines without
//! knowing the variants. A crate of its own so that `bat-contract` can use
//! it without depending on the ledger.

/// What kind of failure an error is, as the library sees it. Front ends
/// map it to what they need (the CLI to exit codes, Python to exception
/// classes); the library owns the classification so every front end agrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The operation ran but could not do what was asked: a check failed,
    /// stored data is damaged, a remote refused, a file could not be written.
    User,
    /// The caller's input is wrong (an argument, a revision, a name, a file
    /// given by the caller): asking again with other input can help.
    Usage,
    /// The caller's cancellation (Ctrl-C, SIGTERM) stopped the operation at
    /// a safe point.
    Interrupted,
    /// A bug: an invariant broke or output could not be encoded.
    Internal,
}

/// What every library error tells its caller beyond its message: its
/// [`ErrorKind`], what the user can do about it, and the reference's error
/// code where the BaT reference defines one. `Display` stays a sentence
/// for people; `code()` is the stable string for programs and conformance.
pub trait Diagnostic: std::error::Error {
    /// The kind of failure.
    fn kind(&self) -> ErrorKind;

    /// What the user can do about it; `None` where nothing helps.
    fn hint(&self) -> Option<String> {
        None
    }

    /// The reference's error code (e.g. `trainer_failed:r01:2`), for the
    /// variants the reference defines one for.
    fn code(&self) -> Option<String> {
        None
    }
}

/// True when `message` reads as a bare reference code (`loop_size_invalid`,
/// `trainer_failed:r01:2`) rather than a sentence: the tests of every
/// crate's error enums use it to keep codes out of `Display`.
pub fn reads_as_code(message: &str) -> bool {
    !message.is_empty()
        && message
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_:.-".contains(c))
}
