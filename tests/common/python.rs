//! The Python interpreter of the backend tests: `BAT_TEST_PYTHON`, the venv
//! `.ci/run` prepares from examples/backends (see examples/backends/setup-venv.sh).
//! Absent, the tests skip with a message; under `CI=true` they fail.

use std::path::{Path, PathBuf};

/// The interpreter, or `None` (after printing why) when the test must skip.
/// Panics under `CI=true` when it is missing: CI must run these tests.
pub fn python() -> Option<PathBuf> {
    super::external::file_from_env(
        "BAT_TEST_PYTHON",
        "the output of `examples/backends/setup-venv.sh`",
    )
}

/// `examples/backends` of this repository.
pub fn backends_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/backends")
}
