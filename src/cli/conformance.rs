//! `bat conformance DIR`: run a directory of the public BaT conformance
//! vectors and print a pass/fail table.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{print_json, CliResult, Session};
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

/// Run `bat conformance`.
pub fn run(a: ConformanceArgs, g: &Session) -> CliResult {
    let pack = Pack::load_or_default(a.pack.as_deref())?;
    let exact = pack_matches_reference_versions(&a.dir, &pack);
    let results = conformance::run(&a.dir, &Options { pack: &pack, exact });
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
