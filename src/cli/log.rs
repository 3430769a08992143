//! `bat log [REV] [-n N]`

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use clap::Args;

use bat_ledger::{CommitId, Ledger, RawCommit};

use super::graph::Graph;
use super::ledger_common::{fmt_time, lerr, open, resolve, short};
use super::table::{Align, Cell, Table};
use super::term::{Paint, Role};
use super::{CliResult, Session};
use bat::inspect::audit::{audit_column, audited_rounds, AuditCell, AUDIT_COLUMN_HEADER};
use bat::round::meta::Headline;

/// Show history, newest first. When the history holds round commits, text
/// mode prints a table: id, date, round, target, gate, overall, S1–S5, the
/// gating-vs-audit gap of rounds with audit evaluations (`bat eval attach`)
/// and the branch/tag/promoted markers (plain commits show their message).
/// Otherwise it prints commits git style. Dates are UTC (`2026-03-01
/// 14:05`), the same on every machine. `--graph` draws the branch and
/// merge lanes on the left. `--json` adds an `audit` member to audited
/// rounds. When the audit gap (gating − audit Overall) rises over the
/// rounds, with its bootstrap interval above zero, a line after the table
/// says so with the slope and interval.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Where to start (default HEAD).
    pub rev: Option<String>,
    /// Show at most N commits.
    #[arg(short = 'n', value_name = "N")]
    pub n: Option<usize>,
    /// Draw the history's lanes (merges, forks) as ASCII art on the left.
    #[arg(long)]
    pub graph: bool,
    /// Show the history of every branch (all arms of a campaign) in one
    /// walk, instead of REV's; with --graph, each branch is a lane.
    #[arg(long, conflicts_with = "rev")]
    pub all: bool,
}

/// Run `bat log`. Output is produced as history is read (one commit at a
/// time, through a buffered writer); a closed pipe (`bat log | head`) ends it
/// quietly.
pub fn run(args: LogArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let start = if args.all {
        all_branch_tips(&l)?
    } else {
        vec![resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?]
    };
    let start = start.as_slice();
    let mut w = super::output::Neutral(BufWriter::with_capacity(1 << 16, super::output::Stdout));
    let view = View {
        n: args.n,
        graph: args.graph.then(Graph::default),
        paint: g.paint,
    };
    let written = if g.json {
        write_json(&l, start, args.n, &mut w)
    } else if any_round_like(&l, start, args.n)? {
        write_table(&l, start, view, &mut w)
            .and_then(|()| write_audit_trend(&l, args.rev.as_deref().unwrap_or("HEAD"), &mut w))
    } else {
        write_plain(&l, start, view, &mut w)
    };
    match written.and_then(|()| w.flush().map_err(Stop::from)) {
        Ok(()) | Err(Stop::Pipe) => Ok(ExitCode::SUCCESS),
        Err(Stop::Cli(e)) => Err(e),
    }
}

/// `--all`: the tip of every branch (HEAD's first), each once.
fn all_branch_tips(l: &Ledger) -> Result<Vec<CommitId>, super::CliError> {
    let mut tips = Vec::new();
    if let Ok(head) = resolve(l, "HEAD") {
        tips.push(head);
    }
    for (_, id) in l.list_refs("refs/heads/").map_err(lerr)? {
        if !tips.contains(&id) {
            tips.push(id);
        }
    }
    if tips.is_empty() {
        return Err(super::CliError::new("the ledger has no commits yet")
            .with_hint("record one with `bat commit` or `bat run`"));
    }
    Ok(tips)
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

/// One element of `bat log --json`: the commit's fields, its metadata
/// passed through as stored (not decoded and encoded again), and the audit
/// column of audited rounds.
#[derive(serde::Serialize)]
struct JsonEntry<'a> {
    id: CommitId,
    parents: &'a [CommitId],
    tree: bat_ledger::TreeId,
    author: &'a str,
    time: i64,
    message: &'a str,
    metadata: &'a serde_json::value::RawValue,
    fields: &'a std::collections::BTreeMap<String, bat_ledger::FieldValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit: Option<AuditCell>,
}

/// The JSON array, one element serialized per commit as it is read. The
/// metadata member is each commit's stored (compact, canonical) JSON text.
fn write_json(
    l: &Ledger,
    start: &[CommitId],
    n: Option<usize>,
    w: &mut impl Write,
) -> Result<(), Stop> {
    use serde::ser::{SerializeSeq, Serializer};
    let audits = Audits::load(l)?;
    let mut ser = serde_json::Serializer::pretty(&mut *w);
    let mut seq = ser.serialize_seq(None)?;
    for item in l.history_raw_from(start, n).map_err(lerr)? {
        let (id, c) = item.map_err(lerr)?;
        let audit = audits.cell(l, &id, &c.metadata)?;
        seq.serialize_element(&JsonEntry {
            id,
            parents: &c.parents,
            tree: c.tree,
            author: &c.author,
            time: c.time,
            message: &c.message,
            metadata: &c.metadata,
            fields: &c.fields,
            audit,
        })?;
    }
    seq.end()?;
    writeln!(w)?;
    Ok(())
}

/// How the text log is drawn.
struct View {
    /// `-n`.
    n: Option<usize>,
    /// `--graph`: the lanes so far.
    graph: Option<Graph>,
    /// Colors.
    paint: Paint,
}

/// Plain commits, git style (with `--graph`, the lanes before each line).
fn write_plain(
    l: &Ledger,
    start: &[CommitId],
    mut v: View,
    w: &mut impl Write,
) -> Result<(), Stop> {
    let marks = refs_of(l)?;
    let p = v.paint;
    for item in l.history_raw_from(start, v.n).map_err(lerr)? {
        let (id, c) = item.map_err(lerr)?;
        let (node, after, cont) = match v.graph.as_mut() {
            Some(gr) => {
                let d = gr.next(id, &c.parents);
                let pad = |s: &str| {
                    if s.is_empty() {
                        String::new()
                    } else {
                        format!("{s} ")
                    }
                };
                (pad(&d.node), d.after, pad(&d.cont))
            }
            None => Default::default(),
        };
        let refs = marks.label(&id, p);
        writeln!(
            w,
            "{node}{} {}{refs}",
            p.paint(Role::Id, "commit"),
            p.paint(Role::Id, &id.to_string())
        )?;
        for a in &after {
            writeln!(w, "{a}")?;
        }
        if c.parents.len() > 1 {
            let ps: Vec<String> = c.parents.iter().map(short).collect();
            writeln!(w, "{cont}Merge:  {}", ps.join(" "))?;
        }
        writeln!(w, "{cont}Author: {}", c.author)?;
        writeln!(w, "{cont}Date:   {}", fmt_time(c.time))?;
        writeln!(w, "{}", cont.trim_end())?;
        for line in c.message.lines() {
            writeln!(w, "{cont}    {line}")?;
        }
        writeln!(w, "{}", cont.trim_end())?;
    }
    Ok(())
}

/// Does the history to be shown hold a round (or revert) commit? A first
/// pass through the index that stops at the first one, so the table/plain
/// choice is made before anything is printed without holding the history.
fn any_round_like(
    l: &Ledger,
    start: &[CommitId],
    n: Option<usize>,
) -> Result<bool, super::CliError> {
    // The `kind` field index cannot answer this: `bat commit --meta` may
    // carry a round's metadata without indexing it, and older ledgers never
    // indexed it. The walk stops at the first round-like commit.
    for item in l.history_raw_from(start, n).map_err(lerr)? {
        if Headline::parse(&item.map_err(lerr)?.1.metadata).is_round_like() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The rounds that have audits, read once per listing: most rounds have
/// none, and asking the refs table per row cost a query per commit.
struct Audits(std::collections::HashSet<CommitId>);

impl Audits {
    fn load(l: &Ledger) -> Result<Audits, super::CliError> {
        audited_rounds(l).map(Audits).map_err(super::CliError::from)
    }

    /// The audit column of a round commit (audits only ever attach to
    /// rounds; the metadata is read only for commits that have audits).
    fn cell(
        &self,
        l: &Ledger,
        id: &CommitId,
        metadata: &serde_json::value::RawValue,
    ) -> Result<Option<AuditCell>, super::CliError> {
        if !self.0.contains(id) || !Headline::parse(metadata).is_round() {
            return Ok(None);
        }
        audit_column(l, id).map_err(super::CliError::from)
    }
}

/// The refs pointing at each commit, and HEAD.
struct Marks {
    by_commit: HashMap<CommitId, Vec<String>>,
    head: Option<CommitId>,
}

impl Marks {
    /// `HEAD, main, tag:v1`, or empty.
    fn list(&self, id: &CommitId) -> String {
        let mut refs: Vec<String> = self.by_commit.get(id).cloned().unwrap_or_default();
        if self.head == Some(*id) {
            refs.insert(0, "HEAD".into());
        }
        refs.join(", ")
    }

    /// ` (HEAD, main)` colored, or empty.
    fn label(&self, id: &CommitId, p: Paint) -> String {
        match self.list(id) {
            s if s.is_empty() => String::new(),
            s => format!(" ({})", p.paint(Role::Ref, &s)),
        }
    }
}

/// Branch, tag and promoted markers per commit, and HEAD.
fn refs_of(l: &Ledger) -> Result<Marks, super::CliError> {
    let mut out: HashMap<CommitId, Vec<String>> = HashMap::new();
    for (prefix, label) in [
        ("refs/heads/", ""),
        ("refs/tags/", "tag:"),
        (bat::round::PROMOTED_PREFIX, "promoted/"),
    ] {
        for (name, id) in l.list_refs(prefix).map_err(lerr)? {
            out.entry(id).or_default().push(format!("{label}{name}"));
        }
    }
    Ok(Marks {
        by_commit: out,
        head: l.head().map_err(lerr)?.commit(),
    })
}

/// Rows are sized and written this many at a time: the columns fit the
/// content while the log still streams (a later, wider batch widens the
/// columns from there on).
const TABLE_BATCH: usize = 256;

const STAGES: [&str; 5] = ["S1", "S2", "S3", "S4", "S5"];

/// The log table, written in batches of [`TABLE_BATCH`] rows.
fn write_table(
    l: &Ledger,
    start: &[CommitId],
    mut v: View,
    w: &mut impl Write,
) -> Result<(), Stop> {
    let marks = refs_of(l)?;
    let audits = Audits::load(l)?;
    let mut cols: Vec<(&str, Align)> = Vec::new();
    if v.graph.is_some() {
        cols.push(("", Align::Left));
    }
    cols.extend([
        ("commit", Align::Left),
        ("date (UTC)", Align::Left),
        ("round", Align::Left),
        ("target", Align::Left),
        ("gate", Align::Left),
        ("overall", Align::Right),
    ]);
    cols.extend(STAGES.iter().map(|s| (*s, Align::Right)));
    cols.push((AUDIT_COLUMN_HEADER, Align::Right));
    cols.push(("refs", Align::Left));
    let mut t = Table::with_header(&cols);
    let mut widths: Option<Vec<usize>> = None;
    let mut flush = |t: &mut Table, w: &mut dyn Write| -> Result<(), Stop> {
        let wd = t.widths(widths.as_deref().unwrap_or(&[]));
        if widths.is_none() {
            w.write_all(t.render_header(&wd, v.paint).as_bytes())?;
        }
        w.write_all(t.render_rows(&wd, v.paint).as_bytes())?;
        widths = Some(wd);
        t.clear_rows();
        Ok(())
    };
    let mut rows = 0usize;
    for item in l.history_raw_from(start, v.n).map_err(lerr)? {
        let (id, c) = item.map_err(lerr)?;
        let drawn = v.graph.as_mut().map(|gr| gr.next(id, &c.parents));
        let mut cells = Vec::new();
        if let Some(d) = &drawn {
            cells.push(Cell::plain(d.node.clone()));
        }
        cells.extend(table_cells(l, &id, &c, &marks, &audits)?);
        t.row(cells);
        for a in drawn.iter().flat_map(|d| d.after.iter()) {
            t.row(vec![Cell::plain(a.clone())]);
        }
        rows += 1;
        if rows % TABLE_BATCH == 0 {
            flush(&mut t, w)?;
        }
    }
    if !t.is_empty() || rows == 0 {
        flush(&mut t, w)?;
    }
    Ok(())
}

/// After the table of an audited history: the audit gap's slope over
/// rounds (gating − audit Overall, a bootstrap interval as `bat compare`
/// computes it) when its interval lies above zero — the gating scorer's
/// lead over the audit grows, a sign of scorer overfitting. Nothing is
/// written otherwise, and a history the statistics cannot read is left
/// without the line rather than failing the log.
fn write_audit_trend(l: &Ledger, rev: &str, w: &mut impl Write) -> Result<(), Stop> {
    if Audits::load(l)?.0.is_empty() {
        return Ok(());
    }
    let cfg = bat::experiment::stats::Bootstrap::default();
    let Ok(rows) =
        bat::report::arm_scores::audit_slopes(l, &[rev.to_string()], &cfg, &bat::Ctx::quiet())
    else {
        return Ok(());
    };
    for r in rows
        .iter()
        .filter(|r| r.score == "audit_gap_slope" && r.above_zero())
    {
        writeln!(
            w,
            "\naudit gap rising: slope {:+.4} per round, {:.0}% CI [{:+.4}, {:+.4}] (gating − audit Overall; {} resamples, seed {}): the gating scorer may be overfit",
            r.mean.unwrap_or(f64::NAN),
            r.level * 100.0,
            r.ci_low.unwrap_or(f64::NAN),
            r.ci_high.unwrap_or(f64::NAN),
            r.resamples,
            r.seed,
        )?;
    }
    Ok(())
}

/// The cells of one commit in the log table (after the graph column).
fn table_cells(
    l: &Ledger,
    id: &CommitId,
    c: &RawCommit,
    marks: &Marks,
    audits: &Audits,
) -> Result<Vec<Cell>, Stop> {
    let h = Headline::parse(&c.metadata);
    let get = |v: &Option<std::borrow::Cow<'_, str>>| v.as_deref().unwrap_or("").to_string();
    let refs = marks.list(id);
    let id_cell = Cell::styled(short(id), Some(Role::Id));
    let date = fmt_time(c.time);
    // `2026-03-01 14:05`: the minute is enough in a table.
    let date = Cell::styled(date.get(..16).unwrap_or(&date).to_string(), Some(Role::Dim));
    let mut cells = vec![id_cell, date];
    if h.is_round() {
        let score = |k: &str| {
            h.score(k)
                .map(|x| format!("{x:.4}"))
                .unwrap_or_else(|| "-".into())
        };
        let gate = get(&h.gate_status);
        cells.push(get(&h.round_id).into());
        cells.push(get(&h.target_stage).into());
        let role = Role::of_gate(&gate);
        cells.push(Cell::styled(gate, role));
        cells.push(score("overall").into());
        cells.extend(STAGES.iter().map(|s| Cell::from(score(s))));
        let audit = audits
            .cell(l, id, &c.metadata)?
            .map(|a| a.text)
            .unwrap_or_else(|| "-".into());
        cells.push(audit.into());
        cells.push(Cell::styled(refs, Some(Role::Ref)));
    } else {
        let revert = h.kind() == bat::round::meta::REVERT_KIND;
        let text = if revert {
            format!(
                "revert of {} (promoted back to {})",
                get(&h.reverts_round_id),
                h.restored_round_id
                    .as_deref()
                    .unwrap_or("the initial checkpoint")
            )
        } else {
            c.message.lines().next().unwrap_or("").to_string()
        };
        let text = if refs.is_empty() {
            text
        } else {
            format!("{text}  ({refs})")
        };
        cells.push(Cell::styled(text, revert.then_some(Role::Bad)));
    }
    Ok(cells)
}
