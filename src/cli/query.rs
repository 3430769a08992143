//! `bat query "SQL" [BRANCH…] [--json]`

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::open;
use super::{print_json, CliError, CliResult, Session};
use bat::report::query::{build, run as run_sql, BuildOptions, QueryLimits};
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
/// refused. A statement runs within a time limit and a memory limit
/// (--timeout, --max-memory); Ctrl-C stops it. Text output is a table
/// sized to its content, values wider than 200 characters cut short (the
/// cell says so); --json prints an array of objects with every value
/// whole.
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
    /// Stop the statement after this long (30s, 5m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_timeout)]
    pub timeout: std::time::Duration,
    /// Stop the statement when SQLite's memory (the loaded tables
    /// included) or the result outgrows this (512MiB, 2GiB, bytes).
    #[arg(long, value_name = "SIZE", default_value = "512MiB", value_parser = parse_size)]
    pub max_memory: u64,
    /// The bootstrap of confidence intervals.
    #[command(flatten)]
    pub bootstrap: super::export::BootstrapArgs,
}

/// Widest value, in characters, a text table shows whole.
const MAX_CELL_CHARS: usize = 200;

fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    match bat::retention::parse_duration(s) {
        Ok(0) | Err(_) => Err(format!(
            "{s:?} is not a time limit: a whole number with s, m or h (30s, 5m, 1h)"
        )),
        Ok(secs) => Ok(std::time::Duration::from_secs(secs)),
    }
}

/// A size: a whole number of bytes, or with a unit (KiB, MiB, GiB; K, M, G
/// and KB, MB, GB are read as the same binary units). At least 1 MiB.
fn parse_size(s: &str) -> Result<u64, String> {
    let bad =
        || format!("{s:?} is not a memory limit: a size such as 512MiB or 2GiB (at least 1MiB)");
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(bad()),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift)
        .filter(|b| *b >= 1 << 20)
        .ok_or_else(bad)
}

/// A value as a text cell: whole up to [`MAX_CELL_CHARS`], otherwise its
/// start and a note of its length.
fn cell_text(v: &serde_json::Value) -> String {
    let s = match v {
        serde_json::Value::Null => return String::new(),
        serde_json::Value::String(s) => s.as_str(),
        other => return other.to_string(),
    };
    let n = s.chars().count();
    if n <= MAX_CELL_CHARS {
        return s.to_string();
    }
    let head: String = s.chars().take(MAX_CELL_CHARS).collect();
    format!("{head}… ({n} chars; use --json for the full value)")
}

/// `v` padded with spaces to `w` characters, on the right or the left
/// (by hand: `format!`'s width stops at 65,535).
fn pad(v: &str, w: usize, right: bool) -> String {
    let fill = " ".repeat(w.saturating_sub(v.chars().count()));
    if right {
        fill + v
    } else {
        format!("{v}{fill}")
    }
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
    let limits = QueryLimits {
        timeout: args.timeout,
        max_memory: args.max_memory,
    };
    let ctx = bat::Ctx::new(&bat_ledger::NoProgress, g.cancel());
    let res = run_sql(&conn, &args.sql, &limits, &ctx)?;
    if g.json {
        print_json(&res.objects())?;
        return Ok(ExitCode::SUCCESS);
    }
    let cells: Vec<Vec<String>> = res
        .rows
        .iter()
        .map(|r| r.iter().map(cell_text).collect())
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
            .map(|(i, v)| pad(v, width[i], numeric[i]))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_binary_units_and_refuse_less_than_a_mebibyte() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        for bad in [
            "12",
            "1KiB",
            "lots",
            "5TiB",
            "",
            "-1MiB",
            "18446744073709551615GiB",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn time_limits_are_positive_durations() {
        assert_eq!(parse_timeout("90s"), Ok(std::time::Duration::from_secs(90)));
        assert_eq!(parse_timeout("2m"), Ok(std::time::Duration::from_secs(120)));
        for bad in ["0s", "now", "soon", "10"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wide_cells_are_cut_and_padding_has_no_width_limit() {
        let wide = serde_json::Value::String("é".repeat(70_000));
        let c = cell_text(&wide);
        assert!(c.starts_with(&"é".repeat(MAX_CELL_CHARS)));
        assert!(
            c.ends_with("… (70000 chars; use --json for the full value)"),
            "{c}"
        );
        let narrow = serde_json::Value::String("é".repeat(MAX_CELL_CHARS));
        assert_eq!(cell_text(&narrow).chars().count(), MAX_CELL_CHARS);
        assert_eq!(cell_text(&serde_json::Value::Null), "");
        assert_eq!(cell_text(&serde_json::json!(1.5)), "1.5");
        // format!'s width panics past 65,535; the padding does not.
        assert_eq!(pad("x", 70_000, false).chars().count(), 70_000);
        assert!(pad("x", 70_000, true).ends_with(" x"));
    }
}
