//! `bat conformance DIR`: run a directory of the public BaT conformance
//! vectors and print a pass/fail table.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{print_json, CliError, CliResult, Session};
use bat_contract::conformance::{self, Options};
use bat_contract::eval_conformance::pack_matches_reference_versions;
use bat_contract::pack::Pack;

/// `bat conformance` arguments.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The vector directory.
    pub dir: PathBuf,
    /// Benchmark pack (default: the embedded pack).
    #[arg(long, value_name = "FILE")]
    pub pack: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct Report<'a> {
    results: &'a [conformance::CaseResult],
    passed: usize,
    failed: usize,
    exact: bool,
}

/// Refuse a vector directory that is missing or not a directory: running
/// nothing must not look like passing.
fn check_vector_dir(dir: &std::path::Path) -> Result<(), CliError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(CliError::new(format!(
            "{} is not a directory of conformance vectors",
            dir.display()
        ))),
        Err(e) => Err(CliError::new(format!(
            "cannot read the conformance directory {}: {e}",
            dir.display()
        ))
        .with_hint(
            "pass the conformance directory itself, e.g. `bat conformance ../shared/conformance`",
        )),
    }
}

/// Run `bat conformance`.
pub fn run(a: ConformanceArgs, g: &Session) -> CliResult {
    check_vector_dir(&a.dir)?;
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let exact = pack_matches_reference_versions(&a.dir, &pack);
    let results = conformance::run(&a.dir, &Options { pack: &pack, exact });
    if results.is_empty() {
        return Err(CliError::new(format!(
            "{} holds no conformance vectors (no case files were found in it)",
            a.dir.display()
        ))
        .with_hint(
            "pass the conformance directory itself, e.g. `bat conformance ../shared/conformance`",
        ));
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    let passed = results.len() - failed;
    if g.json {
        print_json(&Report {
            results: &results,
            passed,
            failed,
            exact,
        })?;
    } else {
        let fw = results
            .iter()
            .map(|r| r.family.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let cw = results
            .iter()
            .map(|r| r.case.len())
            .max()
            .unwrap_or(4)
            .max(4);
        outln!(
            "{:<6}  {:<fw$}  {:<cw$}  detail",
            "result",
            "family",
            "case"
        );
        for r in &results {
            let verdict = if r.passed { "pass" } else { "FAIL" };
            outln!(
                "{verdict:<6}  {:<fw$}  {:<cw$}  {}",
                r.family,
                r.case,
                r.detail
            );
        }
        let mode = if exact {
            "exact (reference version identifiers)"
        } else {
            "pack mode (prose-dependent fields excluded)"
        };
        outln!("comparison: {mode}");
        outln!("{passed} passed, {failed} failed");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
