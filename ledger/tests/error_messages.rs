//! The ledger's errors speak in sentences and classify themselves: a
//! sample of every variant is walked; a message that reads as a bare code,
//! or an unexpected kind for the variants the CLI's exit codes rest on,
//! fails the test.

use std::path::PathBuf;

use bat_ledger::remote::RemoteError;
use bat_ledger::{reads_as_code, Diagnostic, Error, ErrorKind, ObjectId};

fn io() -> std::io::Error {
    std::io::Error::other("disk on fire")
}

fn samples() -> Vec<Box<dyn Diagnostic>> {
    let id = ObjectId::from_hex(&"ab".repeat(32)).expect("64 hex digits");
    let p = || PathBuf::from("/l");
    let s = || "x".to_string();
    vec![
        Box::new(Error::Io {
            op: "read",
            path: p(),
            source: io(),
        }),
        Box::new(Error::TooManyOpenFiles {
            op: "open",
            path: p(),
            source: io(),
        }),
        Box::new(Error::Catalog {
            context: s(),
            source: rusqlite::Error::InvalidQuery,
        }),
        Box::new(Error::NotALedger { start: p() }),
        Box::new(Error::AlreadyInitialized { path: p() }),
        Box::new(Error::UnsupportedVersion {
            path: p(),
            found: s(),
            supported: 1,
        }),
        Box::new(Error::ObjectMissing { id }),
        Box::new(Error::Pruned {
            id,
            policy: s(),
            time: 0,
        }),
        Box::new(Error::PromisorFetch {
            id,
            remote: s(),
            source: Box::new(io()),
        }),
        Box::new(Error::Corrupt {
            id,
            pack: s(),
            offset: 0,
            reason: s(),
        }),
        Box::new(Error::BadObject {
            id,
            kind: "tree",
            reason: s(),
        }),
        Box::new(Error::InvalidName {
            path: p(),
            reason: s(),
        }),
        Box::new(Error::SymlinkEscapes {
            path: p(),
            target: s(),
        }),
        Box::new(Error::TreeRefused {
            id,
            place: "at \"a/b\"".into(),
            rule: bat_ledger::policy::Rule::TooDeep {
                depth: 257,
                limit: 256,
            },
        }),
        Box::new(Error::UnsupportedFileType {
            path: p(),
            kind: "fifo",
        }),
        Box::new(Error::UnknownRevision { rev: s() }),
        Box::new(Error::AmbiguousPrefix {
            prefix: s(),
            candidates: vec![s()],
        }),
        Box::new(Error::BadRevision {
            rev: s(),
            reason: s(),
        }),
        Box::new(Error::PathNotFound {
            rev: s(),
            path: s(),
        }),
        Box::new(Error::WrongKind {
            path: s(),
            what: "a directory",
        }),
        Box::new(Error::InvalidRefName {
            name: s(),
            reason: "empty",
        }),
        Box::new(Error::RefExists { name: s() }),
        Box::new(Error::RefNotFound { name: s() }),
        Box::new(Error::BranchMoved {
            name: s(),
            expected: s(),
            found: s(),
        }),
        Box::new(Error::DestinationNotEmpty { path: p() }),
        Box::new(Error::Busy { reason: s() }),
        Box::new(Error::Cancelled),
        Box::new(Error::Received { id, reason: s() }),
        Box::new(Error::InvalidInput { message: s() }),
        Box::new(RemoteError::NonFastForward { name: s() }),
        Box::new(RemoteError::RefMoved { name: s() }),
        Box::new(RemoteError::Unauthorized {
            url: s(),
            reason: s(),
        }),
        Box::new(RemoteError::NotFound {
            url: s(),
            what: s(),
        }),
        Box::new(RemoteError::MissingObject { url: s(), id }),
        Box::new(RemoteError::Corrupt { id, reason: s() }),
        Box::new(RemoteError::Io {
            op: "read",
            path: p(),
            source: io(),
        }),
        Box::new(RemoteError::Protocol { reason: s() }),
        Box::new(RemoteError::LimitExceeded { what: s() }),
        Box::new(RemoteError::Unsupported {
            url: s(),
            reason: s(),
        }),
        Box::new(RemoteError::BadRefName {
            name: s(),
            reason: s(),
        }),
        Box::new(RemoteError::Cancelled),
        Box::new(RemoteError::Ledger(Error::Cancelled)),
    ]
}

#[test]
fn ledger_errors_are_sentences() {
    let bad: Vec<String> = samples()
        .iter()
        .filter(|e| bat_ledger::shows_a_code(e.as_ref()))
        .map(|e| e.to_string())
        .collect();
    assert!(bad.is_empty(), "messages that are codes: {bad:?}");
}

#[test]
fn kinds_follow_the_variant_and_wrappers_pass_them_through() {
    let kinds: Vec<ErrorKind> = samples().iter().map(|e| e.kind()).collect();
    for (e, k) in samples().iter().zip(&kinds) {
        let text = e.to_string();
        let want = if text.contains("cancelled") {
            ErrorKind::Interrupted
        } else if text.starts_with("unknown revision") || text.starts_with("ambiguous") {
            ErrorKind::Usage
        } else {
            continue;
        };
        assert_eq!(*k, want, "{text}");
    }
    assert_eq!(
        RemoteError::Ledger(Error::Cancelled).kind(),
        ErrorKind::Interrupted
    );
    let moved = RemoteError::NonFastForward {
        name: "main".into(),
    };
    assert!(moved.hint().is_some_and(|h| h.contains("--force")));
    assert!(Error::Cancelled.hint().is_none());
    // A refused tree names its rule as a code, the figures in the sentence.
    let refused = Error::TreeRefused {
        id: ObjectId([1; 32]),
        place: "at \"x\"".into(),
        rule: bat_ledger::policy::Rule::NameTooLong {
            bytes: 300,
            limit: 255,
        },
    };
    assert_eq!(
        refused.code().as_deref(),
        Some("tree_refused:name_too_long")
    );
    assert!(refused.to_string().contains("300 bytes"), "{refused}");
    assert!(refused.to_string().contains("255"), "{refused}");
    assert!(refused.hint().is_some_and(|h| h.contains("SECURITY.md")));
}

#[test]
fn reads_as_code_tells_codes_from_sentences() {
    for code in [
        "loop_size_invalid",
        "trainer_failed:r01:2",
        "line_3_not_object",
    ] {
        assert!(reads_as_code(code), "{code}");
    }
    for sentence in [
        "the trainer exited with status 2 in round r01",
        "",
        "S3_invalid (x)",
    ] {
        assert!(!reads_as_code(sentence), "{sentence}");
    }
}
