//! The Python API's pytest suite (python/tests), run against the `bat`
//! binary cargo built for this test run.
//!
//! The interpreter comes from `BAT_TEST_PYAPI`: a Python in which
//! `import batledger` works (`.ci/run` builds the extension with maturin
//! into the backend venv and exports it). Absent, the test skips with a
//! message; under `CI=true` it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The interpreter, or `None` (after printing why) when the test must skip.
fn interpreter() -> Option<PathBuf> {
    let why = match std::env::var_os("BAT_TEST_PYAPI") {
        Some(p) if Path::new(&p).is_file() => {
            let ok = Command::new(&p)
                .args(["-c", "import batledger, pytest"])
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Some(PathBuf::from(p));
            }
            format!(
                "`import batledger, pytest` fails under BAT_TEST_PYAPI={}",
                Path::new(&p).display()
            )
        }
        Some(p) => format!("BAT_TEST_PYAPI={} is not a file", Path::new(&p).display()),
        None => "BAT_TEST_PYAPI is not set".to_string(),
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{why}; .ci/run builds the Python API into the backend venv");
    }
    eprintln!(
        "SKIPPED: {why} (build it with `maturin develop -m python/Cargo.toml` in a venv \
         with python/requirements-test.txt and export that venv's python as BAT_TEST_PYAPI)"
    );
    None
}

#[test]
fn pytest_suite_passes() {
    let Some(py) = interpreter() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().expect("temporary directory");
    let status = Command::new(py)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "python/tests",
        ])
        .arg("--basetemp")
        .arg(tmp.path().join("pytest"))
        .current_dir(root)
        .env("BAT_BIN", env!("CARGO_BIN_EXE_bat"))
        // Commit authors and the demo's files must not depend on who runs it.
        .env("BAT_AUTHOR", "pytest")
        .env("OMP_NUM_THREADS", "1")
        .env("TOKENIZERS_PARALLELISM", "false")
        .status()
        .expect("run pytest");
    assert!(
        status.success(),
        "the Python API's pytest suite failed: {status}"
    );
}
