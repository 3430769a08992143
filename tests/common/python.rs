//! The Python interpreter of the backend tests: `BAT_TEST_PYTHON`, the venv
//! `.ci/run` prepares from examples/backends (see examples/backends/setup-venv.sh).
//! Absent, the tests skip with a message; under `CI=true` they fail.

use std::path::{Path, PathBuf};

/// The interpreter, or `None` (after printing why) when the test must skip.
/// Panics under `CI=true` when it is missing: CI must run these tests.
pub fn python() -> Option<PathBuf> {
    match std::env::var_os("BAT_TEST_PYTHON") {
        Some(p) if Path::new(&p).is_file() => Some(PathBuf::from(p)),
        other => {
            let why = match other {
                Some(p) => format!("BAT_TEST_PYTHON={} is not a file", Path::new(&p).display()),
                None => "BAT_TEST_PYTHON is not set".to_string(),
            };
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{why}; .ci/run prepares the venv (examples/backends/setup-venv.sh)");
            }
            eprintln!(
                "SKIPPED: {why} (run `examples/backends/setup-venv.sh` and export its output as BAT_TEST_PYTHON)"
            );
            None
        }
    }
}

/// `examples/backends` of this repository.
pub fn backends_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/backends")
}
