//! `bat query "SQL" [BRANCH…] [--json]`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::open;
use super::{print_json, CliError, CliResult, Session};
use bat::report::query::{build, run as run_sql, BuildOptions};
use bat::report::sources;

/// Run one read-only SQL statement over a campaign. The database is built
/// in memory for this query from the branches given (default: every local
/// branch); the ledger's own catalog is never exposed. Tables
/// (docs/query.md): `rounds` (the columns of `bat export`,
/// docs/rounds.md), `commits` (id, parents, first_parent, author, time,
/// message, kind, round_id, branch), `files` (commit, path, size,
/// object_id, mode), `evals` (audits: commit, round_id, protocol_id,
/// audit_commit, overall, task, agentic, S1–S5, gating_overall, gap),
/// `metrics` (custom metrics, long form: commit, branch, round_id,
/// round_number, source, key, value) and `arm_scores` (each name given is
/// one arm, a glob or comma list its seeds: arm, members, round,
/// round_ids, score, mean, ci_low, ci_high, iqm, runs, scheme, resamples,
/// seed, level; computed only when the statement names it). A name may be
/// an arm group ('bat/*', a,b): the other tables list its branches.
///
/// Statements that would write (INSERT, UPDATE, CREATE, ATTACH, …) are
/// refused. Text output is a table sized to its content; --json prints an
/// array of objects.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The SQL statement, e.g. "SELECT round_id, overall FROM rounds".
    pub sql: String,
    /// Branches, revisions or arm groups to load (a glob such as 'bat/*'
    /// or a comma list; default: every local branch).
    pub branches: Vec<String>,
    /// Leave the `files` table empty (faster on long histories).
    #[arg(long)]
    pub no_files: bool,
    /// The bootstrap of confidence intervals.
    #[command(flatten)]
    pub bootstrap: super::export::BootstrapArgs,
}

/// Run `bat query`.
pub fn run(args: QueryArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let srcs = sources(&l, &args.branches)
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    // The bootstrap runs only for a statement that reads its table; each
    // name given is one arm (a glob or comma list is a group of seeds).
    let arm_scores = if args.sql.to_ascii_lowercase().contains("arm_scores") {
        Some((
            super::export::arms_or_branches(&l, &args.branches)?,
            args.bootstrap.bootstrap(),
        ))
    } else {
        None
    };
    let conn = build(
        &l,
        &srcs,
        &BuildOptions {
            skip_files: args.no_files,
            arm_scores,
        },
    )?;
    let res = run_sql(&conn, &args.sql)?;
    if g.json {
        print_json(&res.objects())?;
        return Ok(ExitCode::SUCCESS);
    }
    let cell = |v: &serde_json::Value| match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let cells: Vec<Vec<String>> = res
        .rows
        .iter()
        .map(|r| r.iter().map(cell).collect())
        .collect();
    let mut width: Vec<usize> = res.columns.iter().map(|c| c.chars().count()).collect();
    for r in &cells {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    // Numbers right-aligned, text left-aligned, as a spreadsheet shows them.
    let numeric: Vec<bool> = (0..res.columns.len())
        .map(|i| {
            res.rows.iter().any(|r| r[i].is_number())
                && res.rows.iter().all(|r| r[i].is_number() || r[i].is_null())
        })
        .collect();
    let line = |vals: &[String]| {
        let parts: Vec<String> = vals
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if numeric[i] {
                    format!("{v:>w$}", w = width[i])
                } else {
                    format!("{v:<w$}", w = width[i])
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    outln!("{}", line(&res.columns));
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    outln!("{}", rule.join("  "));
    for r in &cells {
        outln!("{}", line(r));
    }
    if res.rows.is_empty() {
        outln!("(no rows)");
    }
    Ok(ExitCode::SUCCESS)
}
