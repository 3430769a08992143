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

/// Whether `e` shows a code where a person expects a sentence: its message
/// reads as a bare code ([`reads_as_code`]) or is its own [`Diagnostic::code`].
/// The error-message tests of every crate check their samples with it.
pub fn shows_a_code(e: &dyn Diagnostic) -> bool {
    let message = e.to_string();
    reads_as_code(&message) || e.code().as_deref() == Some(message.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Sample(&'static str, Option<&'static str>);

    impl std::fmt::Display for Sample {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Sample {}

    impl Diagnostic for Sample {
        fn kind(&self) -> ErrorKind {
            ErrorKind::User
        }
        fn code(&self) -> Option<String> {
            self.1.map(str::to_string)
        }
    }

    #[test]
    fn a_code_in_place_of_a_sentence_is_caught() {
        assert!(shows_a_code(&Sample("trainer_failed:r01:2", None)));
        assert!(shows_a_code(&Sample(
            "Loop Size Invalid",
            Some("Loop Size Invalid")
        )));
        assert!(!shows_a_code(&Sample(
            "the trainer exited with status 2 in round r01",
            Some("trainer_failed:r01:2")
        )));
    }
}
