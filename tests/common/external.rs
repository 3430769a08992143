//! External programs the optional test families need (a venv's Python,
//! Chromium): each is named by a `BAT_TEST_*` variable that `.ci/run`
//! sets. Absent, a test skips with a message saying how to get it; under
//! `CI=true` it fails, because CI must run every family.

use std::path::{Path, PathBuf};

/// The file `var` names, or `None` (after printing why and `how`, the way
/// to get it) when the test must skip. Panics under `CI=true`.
pub fn file_from_env(var: &str, how: &str) -> Option<PathBuf> {
    let why = match std::env::var_os(var) {
        Some(p) if Path::new(&p).is_file() => return Some(PathBuf::from(p)),
        Some(p) => format!("{var}={} is not a file", Path::new(&p).display()),
        None => format!("{var} is not set"),
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}; .ci/run provides it ({how})");
    }
    eprintln!("SKIPPED: {why} ({how}, and export it as {var})");
    None
}

/// Headless Chromium for the browser tests (`BAT_TEST_CHROMIUM`).
pub fn chromium() -> Option<PathBuf> {
    file_from_env(
        "BAT_TEST_CHROMIUM",
        "apt-get install chromium; its path is `command -v chromium`",
    )
}
