//! `bat compare A B [--json]`

use std::process::ExitCode;

use clap::Args;

use super::compare_text::render;
use super::ledger_common::open;
use super::{print_json, CliError, CliResult, Session};
use bat::replay::compare::compare;

/// Compare two arms (branches or revisions, e.g. a campaign and its
/// replay ablation) round by round and final, in the shape of the BaT
/// paper's headline table: base → final Overall per arm, task, agentic and
/// the per-stage view S1–S5, with each arm's measured compute.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Arm A (branch, tag or commit).
    pub a: String,
    /// Arm B.
    pub b: String,
}

/// Run `bat compare`.
pub fn run(args: CompareArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let c = compare(&l, &args.a, &args.b)
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    if g.json {
        print_json(&c)?;
    } else {
        out!("{}", render(&c, g.paint));
    }
    Ok(ExitCode::SUCCESS)
}
