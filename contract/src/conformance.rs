//! Running a conformance vector directory (the layout the public BaT
//! reference publishes its vectors in, one folder per family) against this
//! implementation.
//!
//! Each family of vectors (source and rounds, eval, leakage, binding,
//! protocol) has its own function in its own module; this file only collects
//! their results.

use std::path::Path;

pub use super::conformance_case::{CaseResult, Options};

/// Run every family found under `dir`. A family whose folder is absent is
/// skipped (no result rows).
pub fn run(dir: &Path, opts: &Options<'_>) -> Vec<CaseResult> {
    let mut out = Vec::new();
    out.extend(super::round_conformance::run_source_and_rounds(dir, opts));
    out.extend(super::eval_conformance::run_eval_families(dir, opts));
    out
}
