//! `bat log [REV] [-n N]`

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use clap::Args;

use bat_ledger::{Commit, CommitId, Ledger};

use super::ledger_common::{fmt_time, lerr, open, resolve, short};
use super::{CliResult, Session};
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

/// Run `bat log`. Output is produced as history is read (one commit at a
/// time, through a buffered writer); a closed pipe (`bat log | head`) ends it
/// quietly.
pub fn run(args: LogArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let start = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
    let mut w = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = if g.json {
        write_json(&l, start, args.n, &mut w)
    } else if any_round_like(&l, start, args.n)? {
        write_table(&l, start, args.n, &mut w)
    } else {
        write_plain(&l, start, args.n, &mut w)
    };
    match written.and_then(|()| w.flush().map_err(Stop::from)) {
        Ok(()) | Err(Stop::Pipe) => Ok(ExitCode::SUCCESS),
        Err(Stop::Cli(e)) => Err(e),
    }
}

/// Why writing the log stopped early.
enum Stop {
    /// The reader went away (EPIPE): not an error for a pager or `head`.
    Pipe,
    /// Anything else.
    Cli(super::CliError),
}

impl From<super::CliError> for Stop {
    fn from(e: super::CliError) -> Self {
        Stop::Cli(e)
    }
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Stop::Pipe
        } else {
            Stop::Cli(super::CliError::new(format!("cannot write the log: {e}")))
        }
    }
}

impl From<serde_json::Error> for Stop {
    fn from(e: serde_json::Error) -> Self {
        if e.is_io() {
            Stop::from(std::io::Error::from(e))
        } else {
            Stop::Cli(super::CliError::new(format!(
                "cannot encode JSON output: {e}"
            )))
        }
    }
}

/// The JSON array, one element serialized per commit as it is read (the
/// same bytes as serializing the whole array at once).
fn write_json(
    l: &Ledger,
    start: CommitId,
    n: Option<usize>,
    w: &mut impl Write,
) -> Result<(), Stop> {
    use serde::ser::{SerializeSeq, Serializer};
    let mut ser = serde_json::Serializer::pretty(&mut *w);
    let mut seq = ser.serialize_seq(None)?;
    for item in l.history(start, n).map_err(lerr)? {
        let (id, c) = item.map_err(lerr)?;
        let mut entry = serde_json::json!({
            "id": id, "parents": c.parents, "tree": c.tree, "author": c.author,
            "time": c.time, "message": c.message, "metadata": c.metadata, "fields": c.fields,
        });
        if let Some(cell) = audit_cell(l, &id, &c)? {
            entry["audit"] = serde_json::to_value(cell)?;
        }
        seq.serialize_element(&entry)?;
    }
    seq.end()?;
    writeln!(w)?;
    Ok(())
}

/// Plain commits, git style.
fn write_plain(
    l: &Ledger,
    start: CommitId,
    n: Option<usize>,
    w: &mut impl Write,
) -> Result<(), Stop> {
    for item in l.history(start, n).map_err(lerr)? {
        let (id, c) = item.map_err(lerr)?;
        writeln!(w, "commit {id}")?;
        writeln!(w, "Author: {}", c.author)?;
        writeln!(w, "Date:   {}", fmt_time(c.time))?;
        writeln!(w)?;
        for line in c.message.lines() {
            writeln!(w, "    {line}")?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// Does the history to be shown hold a round (or revert) commit? A first
/// pass through the index that stops at the first one, so the table/plain
/// choice is made before anything is printed without holding the history.
fn any_round_like(l: &Ledger, start: CommitId, n: Option<usize>) -> Result<bool, super::CliError> {
    // The `kind` field index cannot answer this: `bat commit --meta` may
    // carry a round's metadata without indexing it, and older ledgers never
    // indexed it. The walk stops at the first round-like commit.
    for item in l.history(start, n).map_err(lerr)? {
        if is_round_like(&item.map_err(lerr)?.1) {
            return Ok(true);
        }
    }
    Ok(false)
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
fn markers(l: &Ledger) -> Result<HashMap<CommitId, Vec<String>>, super::CliError> {
    let mut out: HashMap<CommitId, Vec<String>> = HashMap::new();
    for (prefix, label) in [
        ("refs/heads/", ""),
        ("refs/tags/", "tag:"),
        (crate::round::PROMOTED_PREFIX, "promoted/"),
    ] {
        for (name, id) in l.list_refs(prefix).map_err(lerr)? {
            out.entry(id).or_default().push(format!("{label}{name}"));
        }
    }
    Ok(out)
}

fn write_table(
    l: &Ledger,
    start: CommitId,
    n: Option<usize>,
    w: &mut impl Write,
) -> Result<(), Stop> {
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
    writeln!(w, "{header}")?;
    for item in l.history(start, n).map_err(lerr)? {
        let (id, c) = item.map_err(lerr)?;
        let (id, c) = (&id, &c);
        let m = &c.metadata;
        let get = |k: &str| m.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
        let mut refs: Vec<String> = marks.get(id).cloned().unwrap_or_default();
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
            writeln!(w, "{line}")?;
        } else {
            writeln!(w, "{line}  ({refs})")?;
        }
    }
    Ok(())
}
