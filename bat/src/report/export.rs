//! Round rows as files: CSV (RFC 4180, a header of
//! [`COLUMNS`](crate::inspect::rounds::COLUMNS)) and JSON Lines (one object
//! per row, members named as the columns). Values are written exactly as
//! serde_json formats them (shortest round-trip form for floats), so
//! reading a CSV cell or a JSONL member back gives the same `f64` as
//! `bat log --json`.

use std::io::Write;

use crate::inspect::rounds::{RoundRow, COLUMNS};

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
}

impl<W: Write> RowWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W, format: Format) -> Self {
        RowWriter {
            out,
            format,
            started: false,
        }
    }

    /// Write the header (CSV) if not yet written; call once even when no
    /// row follows, so an empty export still names its columns.
    pub fn start(&mut self) -> std::io::Result<()> {
        if !self.started && self.format == Format::Csv {
            let header: Vec<String> = COLUMNS.iter().map(|c| csv_field(c)).collect();
            writeln!(self.out, "{}", header.join(","))?;
        }
        self.started = true;
        Ok(())
    }

    /// Write one row.
    pub fn row(&mut self, r: &RoundRow) -> std::io::Result<()> {
        self.start()?;
        match self.format {
            Format::Jsonl => {
                serde_json::to_writer(&mut self.out, r)?;
                writeln!(self.out)
            }
            Format::Csv => {
                let cells: Vec<String> = r.values().iter().map(csv_cell).collect();
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
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
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
    fn an_empty_csv_export_still_has_its_header() {
        let w = RowWriter::new(Vec::new(), Format::Csv);
        let out = w.finish().expect("in memory");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(text.trim_end().split(',').count(), COLUMNS.len());
        let w = RowWriter::new(Vec::new(), Format::Jsonl);
        assert!(w.finish().expect("in memory").is_empty());
    }
}
