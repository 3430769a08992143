//! `bat log [REV] [-n N]`

use std::process::ExitCode;

use clap::Args;

use bat_ledger::{Commit, CommitId, Ledger};

use super::ledger_common::{fmt_time, lerr, open, resolve, short};
use super::{print_json, CliResult, Globals};
use crate::inspect::audit::{audit_column, AuditCell, AUDIT_COLUMN_HEADER};

/// Show history, newest first. When the history holds round commits, text
/// mode prints a table: id, round, target, gate, overall, S1–S5, the
/// gating-vs-audit gap of rounds with audit evaluations (`bat eval attach`)
/// and the branch/tag/promoted markers (plain commits show their message).
/// `--json` adds an `audit` member to audited rounds.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Where to start (default HEAD).
    pub rev: Option<String>,
    /// Show at most N commits.
    #[arg(short = 'n', value_name = "N")]
    pub n: Option<usize>,
}

/// Run `bat log`.
pub fn run(args: LogArgs, g: &Globals) -> CliResult {
    let l = open(g)?;
    let start = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
    let log = l.log(start, args.n).map_err(lerr)?;
    if g.json {
        let arr: Vec<_> = log
            .iter()
            .map(|(id, c)| {
                let mut entry = serde_json::json!({
                    "id": id, "parents": c.parents, "tree": c.tree, "author": c.author,
                    "time": c.time, "message": c.message, "metadata": c.metadata, "fields": c.fields,
                });
                if let Some(cell) = audit_cell(&l, id, c)? {
                    entry["audit"] = serde_json::to_value(cell)
                        .map_err(|e| super::CliError::new(format!("cannot encode JSON output: {e}")))?;
                }
                Ok(entry)
            })
            .collect::<Result<_, super::CliError>>()?;
        print_json(&arr)?;
    } else if log.iter().any(|(_, c)| is_round_like(c)) {
        print_table(&l, &log)?;
    } else {
        for (id, c) in log {
            println!("commit {id}");
            println!("Author: {}", c.author);
            println!("Date:   {}", fmt_time(c.time));
            println!();
            for line in c.message.lines() {
                println!("    {line}");
            }
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The audit column of a round commit (audits only ever attach to rounds).
fn audit_cell(l: &Ledger, id: &CommitId, c: &Commit) -> Result<Option<AuditCell>, super::CliError> {
    if c.metadata.get("kind").and_then(serde_json::Value::as_str) != Some("bat_round") {
        return Ok(None);
    }
    audit_column(l, id).map_err(|e| super::CliError::new(e.to_string()))
}

fn is_round_like(c: &Commit) -> bool {
    matches!(
        c.metadata.get("kind").and_then(serde_json::Value::as_str),
        Some("bat_round") | Some("bat_revert")
    )
}

/// Branch, tag and promoted markers per commit.
fn markers(l: &Ledger) -> Result<Vec<(CommitId, String)>, super::CliError> {
    let mut out = Vec::new();
    for (prefix, label) in [
        ("refs/heads/", ""),
        ("refs/tags/", "tag:"),
        (crate::round::PROMOTED_PREFIX, "promoted/"),
    ] {
        for (name, id) in l.list_refs(prefix).map_err(lerr)? {
            out.push((id, format!("{label}{name}")));
        }
    }
    Ok(out)
}

fn print_table(l: &Ledger, log: &[(CommitId, Commit)]) -> Result<(), super::CliError> {
    let marks = markers(l)?;
    let head = l.head().map_err(lerr)?.commit();
    let stages = ["S1", "S2", "S3", "S4", "S5"];
    let mut header = format!(
        "{:<12}  {:<5}  {:<6}  {:<7}  {:>7}",
        "commit", "round", "target", "gate", "overall"
    );
    for s in stages {
        header.push_str(&format!("  {s:>6}"));
    }
    header.push_str(&format!("  {AUDIT_COLUMN_HEADER:>9}  refs"));
    println!("{header}");
    for (id, c) in log {
        let m = &c.metadata;
        let get = |k: &str| m.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
        let mut refs: Vec<String> = marks
            .iter()
            .filter(|(i, _)| i == id)
            .map(|(_, n)| n.clone())
            .collect();
        if head == Some(*id) {
            refs.insert(0, "HEAD".into());
        }
        let refs = refs.join(", ");
        let line = match get("kind") {
            "bat_round" => {
                let score = |k: &str| {
                    m.get("scores")
                        .and_then(|s| s.get(k))
                        .and_then(serde_json::Value::as_f64)
                        .map(|x| format!("{x:.4}"))
                        .unwrap_or_else(|| "-".into())
                };
                let mut s = format!(
                    "{:<12}  {:<5}  {:<6}  {:<7}  {:>7}",
                    short(id),
                    get("round_id"),
                    get("target_stage"),
                    get("gate_status"),
                    score("overall")
                );
                for st in stages {
                    s.push_str(&format!("  {:>6}", score(st)));
                }
                let audit = audit_cell(l, id, c)?
                    .map(|a| a.text)
                    .unwrap_or_else(|| "-".into());
                s.push_str(&format!("  {audit:>9}"));
                s
            }
            "bat_revert" => format!(
                "{:<12}  revert of {} (promoted back to {})",
                short(id),
                get("reverts_round_id"),
                m.get("restored_round_id")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("the initial checkpoint")
            ),
            _ => format!(
                "{:<12}  {}",
                short(id),
                c.message.lines().next().unwrap_or("")
            ),
        };
        if refs.is_empty() {
            println!("{line}");
        } else {
            println!("{line}  ({refs})");
        }
    }
    Ok(())
}
