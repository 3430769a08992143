//! The VeRL/Slime wrapper checks that run without a GPU
//! (tests/python/test_verl_compose.py): VeRL's own configuration composed
//! with the wrapper's overrides, the reward loaded through VeRL's loader,
//! the tool schema, the Hugging Face export check (single and sharded) and
//! Slime's documented arguments.

use std::path::Path;
use std::process::Command;

use crate::common::python as python_common;

#[test]
fn verl_and_slime_wrapper_checks_pass() {
    let Some(py) = python_common::python() else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/test_verl_compose.py");
    let out = Command::new(&py)
        .arg(&script)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("spawn python");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // unittest reports on stderr; a skipped module would still exit 0.
    assert!(stderr.contains("\nOK"), "{stderr}");
    assert!(!stderr.contains("skipped"), "a check was skipped: {stderr}");
}
