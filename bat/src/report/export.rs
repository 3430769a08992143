//! Round rows as files: CSV (RFC 4180, a header of
//! [`COLUMNS`](crate::inspect::rounds::COLUMNS) followed by the custom
//! metric columns of [`super::metrics`]) and JSON Lines (one object per
//! row, members named as the columns). Values are written exactly as
//! serde_json formats them (shortest round-trip form for floats), so
//! reading a CSV cell or a JSONL member back gives the same `f64` as
//! `bat log --json`.
//!
//! Text cells are neutralized for spreadsheets (OWASP's CSV injection
//! rule): a string cell that starts with `=`, `+`, `-`, `@`, a tab or a
//! carriage return, and is not a plain decimal number, is written quoted
//! with a single quote in front (`"'=HYPERLINK(..)"`), so a spreadsheet
//! shows it as text instead of evaluating it. Numbers are never touched:
//! numeric columns are written as JSON numbers, and a string holding a
//! plain number such as `-0.5` or `+1e-3` stays as it is.

use std::io::Write;

use bat_ledger::Ledger;

use super::metrics::{round_metrics, union_keys, MetricKey, Metrics};
use super::Source;
use crate::inspect::rounds::{RoundRow, RoundRows, RoundsError, COLUMNS};

/// One exported round: its row and its custom metrics.
#[derive(Debug, Clone)]
pub struct ExportRow {
    /// The round's fixed columns.
    pub row: RoundRow,
    /// Its health and per-track/per-stage metrics.
    pub metrics: Metrics,
}

/// The rows of every source (oldest first within a source, sources in the
/// order given) and the metric columns they have between them, sorted.
/// The metric column set is only known after every round is read, so the
/// rows are held (their files are not).
pub fn export_rows(
    ledger: &Ledger,
    sources: &[Source],
) -> Result<(Vec<MetricKey>, Vec<ExportRow>), RoundsError> {
    let mut rows = Vec::new();
    for s in sources {
        for row in RoundRows::new(ledger, &s.name, s.tip)? {
            let row = row?;
            let metrics = round_metrics(ledger, row.commit)?;
            rows.push(ExportRow { row, metrics });
        }
    }
    let keys = union_keys(rows.iter().map(|r| &r.metrics));
    Ok((keys, rows))
}

/// A row as one JSON object: the fixed columns, then one member per
/// metric column (`null` where the round has no such value).
pub fn row_object(
    r: &ExportRow,
    metric_columns: &[MetricKey],
) -> serde_json::Map<String, serde_json::Value> {
    let mut m: serde_json::Map<String, serde_json::Value> = COLUMNS
        .iter()
        .map(|c| c.to_string())
        .zip(r.row.values())
        .collect();
    for k in metric_columns {
        m.insert(
            k.to_string(),
            r.metrics
                .get(k)
                .map_or(serde_json::Value::Null, |v| serde_json::json!(v)),
        );
    }
    m
}

/// Output formats of `bat export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object per line.
    Jsonl,
}

/// Writes rows one at a time in a [`Format`].
pub struct RowWriter<W: Write> {
    out: W,
    format: Format,
    started: bool,
    metric_columns: Vec<MetricKey>,
}

impl<W: Write> RowWriter<W> {
    /// A writer over `out` with the fixed columns and `metric_columns`
    /// after them.
    pub fn new(out: W, format: Format, metric_columns: Vec<MetricKey>) -> Self {
        RowWriter {
            out,
            format,
            started: false,
            metric_columns,
        }
    }

    /// Write the header (CSV) if not yet written; call once even when no
    /// row follows, so an empty export still names its columns.
    pub fn start(&mut self) -> std::io::Result<()> {
        if !self.started && self.format == Format::Csv {
            let header: Vec<String> = COLUMNS
                .iter()
                .map(|c| c.to_string())
                .chain(self.metric_columns.iter().map(ToString::to_string))
                .map(|c| csv_field(&c))
                .collect();
            writeln!(self.out, "{}", header.join(","))?;
        }
        self.started = true;
        Ok(())
    }

    /// Write one row.
    pub fn row(&mut self, r: &ExportRow) -> std::io::Result<()> {
        self.start()?;
        match self.format {
            Format::Jsonl => {
                serde_json::to_writer(&mut self.out, &row_object(r, &self.metric_columns))?;
                writeln!(self.out)
            }
            Format::Csv => {
                let cells: Vec<String> = r
                    .row
                    .values()
                    .iter()
                    .map(csv_cell)
                    .chain(self.metric_columns.iter().map(|k| {
                        r.metrics
                            .get(k)
                            .map_or_else(String::new, |v| serde_json::json!(v).to_string())
                    }))
                    .collect();
                writeln!(self.out, "{}", cells.join(","))
            }
        }
    }

    /// Flush and return the sink.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.start()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Objects with the members `columns` as CSV (with a header) or JSON
/// Lines, in memory (small tables such as arm scores).
pub fn table_bytes(
    columns: &[&str],
    rows: &[serde_json::Map<String, serde_json::Value>],
    format: Format,
) -> Vec<u8> {
    let mut out = String::new();
    match format {
        Format::Csv => {
            let header: Vec<String> = columns.iter().map(|c| csv_field(c)).collect();
            out.push_str(&header.join(","));
            out.push('\n');
            for r in rows {
                let cells: Vec<String> = columns
                    .iter()
                    .map(|c| csv_cell(r.get(*c).unwrap_or(&serde_json::Value::Null)))
                    .collect();
                out.push_str(&cells.join(","));
                out.push('\n');
            }
        }
        Format::Jsonl => {
            for r in rows {
                out.push_str(&serde_json::Value::Object(r.clone()).to_string());
                out.push('\n');
            }
        }
    }
    out.into_bytes()
}

/// A JSON value as a CSV cell: null is empty, strings are quoted when they
/// need it, numbers and booleans as JSON writes them.
fn csv_cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => csv_field(s),
        other => other.to_string(),
    }
}

fn csv_field(s: &str) -> String {
    if is_formula_like(s) {
        format!("\"'{}\"", s.replace('"', "\"\""))
    } else if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Whether a spreadsheet could read `s` as a formula: it starts with one
/// of OWASP's trigger characters and is not a plain number.
pub fn is_formula_like(s: &str) -> bool {
    s.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_plain_number(s)
}

/// `[+-]digits[.digits][(e|E)[+-]digits]` (or `.digits` after the sign):
/// a number a spreadsheet reads as one, with nothing else in it (no
/// `inf`, `nan`, spaces or hex, which `f64::from_str` would accept).
fn is_plain_number(s: &str) -> bool {
    fn digits(b: &[u8]) -> usize {
        b.iter().take_while(|c| c.is_ascii_digit()).count()
    }
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let int = digits(&b[i..]);
    i += int;
    let mut frac = 0;
    if b.get(i) == Some(&b'.') {
        frac = digits(&b[i + 1..]);
        i += 1 + frac;
    }
    if int + frac == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        i += usize::from(matches!(b.get(i), Some(b'+' | b'-')));
        let exp = digits(&b[i..]);
        if exp == 0 {
            return false;
        }
        i += exp;
    }
    i == b.len()
}

/// The fixed columns of a step metrics export (`bat export --steps`);
/// the metric names of the steps follow, sorted.
pub const STEP_COLUMNS: [&str; 5] = ["branch", "round_id", "round_number", "commit", "step"];

/// One row of a steps table: column name → value.
pub type StepRowObject = serde_json::Map<String, serde_json::Value>;

/// Every step of every round of `sources` as row objects (the
/// [`STEP_COLUMNS`] and one member per metric name, `null` where a step has
/// no such value), and the full column list.
pub fn step_rows(
    ledger: &Ledger,
    sources: &[Source],
) -> Result<(Vec<String>, Vec<StepRowObject>), RoundsError> {
    let mut keys = std::collections::BTreeSet::new();
    let mut rows = Vec::new();
    for s in sources {
        for row in RoundRows::new(ledger, &s.name, s.tip)? {
            let row = row?;
            let Some(steps) = crate::round::steps::round_steps(ledger, row.commit)? else {
                continue;
            };
            for st in steps.rows {
                let mut m = serde_json::Map::new();
                for (k, v) in st.values {
                    m.insert(k.clone(), serde_json::json!(v));
                    keys.insert(k);
                }
                // The fixed columns win over a metric of the same name.
                m.insert("branch".into(), row.branch.clone().into());
                m.insert("round_id".into(), row.round_id.clone().into());
                m.insert("round_number".into(), serde_json::json!(row.round_number));
                m.insert("commit".into(), row.commit.to_string().into());
                m.insert("step".into(), st.step.into());
                rows.push(m);
            }
        }
    }
    let columns: Vec<String> = STEP_COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain(
            keys.into_iter()
                .filter(|k| !STEP_COLUMNS.contains(&k.as_str())),
        )
        .collect();
    for r in &mut rows {
        for c in &columns {
            r.entry(c.clone()).or_insert(serde_json::Value::Null);
        }
    }
    Ok((columns, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_only_what_needs_it() {
        assert_eq!(csv_field("reward=terminal"), "reward=terminal");
        assert_eq!(csv_field("a=1,b=2"), "\"a=1,b=2\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_cell(&serde_json::Value::Null), "");
        assert_eq!(csv_cell(&serde_json::json!(0.1)), "0.1");
        assert_eq!(csv_cell(&serde_json::json!(true)), "true");
    }

    #[test]
    fn formulas_are_neutralized_and_numbers_are_not() {
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        assert_eq!(csv_field("@SUM(A1)"), "\"'@SUM(A1)\"");
        assert_eq!(csv_field("+cmd"), "\"'+cmd\"");
        assert_eq!(csv_field("-2+3"), "\"'-2+3\"");
        assert_eq!(csv_field("\tx"), "\"'\tx\"");
        assert_eq!(csv_field("\r=1"), "\"'\r=1\"");
        for n in ["-0.5", "+1", "-1e-3", "-.5", "+2.E+7", "-12"] {
            assert_eq!(csv_field(n), n, "{n} is a number");
        }
        for s in ["-", "-inf", "-nan", "- 1", "-1e", "-0x10", "-1.2.3", "+.e1"] {
            assert!(is_formula_like(s), "{s} is not a plain number");
        }
        assert!(!is_formula_like("a=b"));
        assert_eq!(csv_cell(&serde_json::json!(-0.5)), "-0.5");
    }

    #[test]
    fn an_empty_csv_export_still_has_its_header() {
        let w = RowWriter::new(Vec::new(), Format::Csv, Vec::new());
        let out = w.finish().expect("in memory");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(text.trim_end().split(',').count(), COLUMNS.len());
        let keys: Vec<MetricKey> = ["health.kl", "eval.stage.S1"]
            .iter()
            .filter_map(|k| MetricKey::parse(k))
            .collect();
        let w = RowWriter::new(Vec::new(), Format::Csv, keys);
        let text = String::from_utf8(w.finish().expect("in memory")).expect("utf-8");
        assert!(
            text.trim_end().ends_with(",health.kl,eval.stage.S1"),
            "{text}"
        );
        let w = RowWriter::new(Vec::new(), Format::Jsonl, Vec::new());
        assert!(w.finish().expect("in memory").is_empty());
    }
}
