//! The one table renderer of the CLI: columns sized to their content
//! (in characters, so `→` and `Δ` count once), left or right aligned, two
//! spaces apart, colors applied after padding so escape codes never count
//! toward a width. A row with fewer cells than columns lets its last cell
//! run on (a revert line in the log table, a graph-only line).

use super::term::{Paint, Role};

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Numbers.
    Right,
}

/// One cell: its text and how to color it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The visible text.
    pub text: String,
    /// The color role, if any.
    pub role: Option<Role>,
}

impl Cell {
    /// An uncolored cell.
    pub fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            role: None,
        }
    }

    /// A colored cell.
    pub fn styled(text: impl Into<String>, role: Option<Role>) -> Cell {
        Cell {
            text: text.into(),
            role,
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::plain(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::plain(text)
    }
}

/// A table: a header (optional) and rows.
#[derive(Debug, Clone)]
pub struct Table {
    aligns: Vec<Align>,
    header: Option<Vec<String>>,
    rows: Vec<Vec<Cell>>,
    indent: usize,
    gap: usize,
}

fn width(s: &str) -> usize {
    s.chars().count()
}

impl Table {
    /// A table with these column alignments and no header.
    pub fn new(aligns: &[Align]) -> Table {
        Table {
            aligns: aligns.to_vec(),
            header: None,
            rows: Vec::new(),
            indent: 0,
            gap: 2,
        }
    }

    /// A table with a header row: `(title, alignment)` per column.
    pub fn with_header(cols: &[(&str, Align)]) -> Table {
        let mut t = Table::new(&cols.iter().map(|c| c.1).collect::<Vec<_>>());
        t.header = Some(cols.iter().map(|c| c.0.to_string()).collect());
        t
    }

    /// Prefix every line with `n` spaces.
    pub fn indent(mut self, n: usize) -> Table {
        self.indent = n;
        self
    }

    /// Spaces between columns (default 2).
    pub fn gap(mut self, n: usize) -> Table {
        self.gap = n;
        self
    }

    /// Add a row.
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Drop the rows (keeping the header), for batch-wise streaming.
    pub fn clear_rows(&mut self) {
        self.rows.clear();
    }

    /// Column widths of the header and rows, each at least `min[i]`. Cells
    /// that run on (the last cell of a short row) do not widen a column.
    pub fn widths(&self, min: &[usize]) -> Vec<usize> {
        let mut w: Vec<usize> = (0..self.aligns.len())
            .map(|i| min.get(i).copied().unwrap_or(0))
            .collect();
        if let Some(h) = &self.header {
            for (i, t) in h.iter().enumerate() {
                w[i] = w[i].max(width(t));
            }
        }
        for r in &self.rows {
            let full = r.len() == self.aligns.len();
            for (i, c) in r.iter().enumerate().take(self.aligns.len()) {
                if full || i + 1 < r.len() {
                    w[i] = w[i].max(width(&c.text));
                }
            }
        }
        w
    }

    /// Render with widths sized to the content.
    pub fn render(&self, paint: Paint) -> String {
        let w = self.widths(&[]);
        let mut out = String::new();
        if self.header.is_some() {
            out.push_str(&self.render_header(&w, paint));
        }
        out.push_str(&self.render_rows(&w, paint));
        out
    }

    /// The header line with the given widths.
    pub fn render_header(&self, w: &[usize], paint: Paint) -> String {
        let cells: Vec<Cell> = self
            .header
            .iter()
            .flatten()
            .map(|t| Cell::styled(t.clone(), Some(Role::Header)))
            .collect();
        self.line(&cells, w, paint)
    }

    /// The rows with the given widths (from [`Table::widths`]).
    pub fn render_rows(&self, w: &[usize], paint: Paint) -> String {
        let mut out = String::new();
        for r in &self.rows {
            out.push_str(&self.line(r, w, paint));
        }
        out
    }

    fn line(&self, cells: &[Cell], w: &[usize], paint: Paint) -> String {
        let mut s = " ".repeat(self.indent);
        let last = cells.len().saturating_sub(1);
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str(&" ".repeat(self.gap));
            }
            let pad = w
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(width(&c.text));
            let align = self.aligns.get(i).copied().unwrap_or(Align::Left);
            if align == Align::Right {
                s.push_str(&" ".repeat(pad));
            }
            s.push_str(&paint.maybe(c.role, &c.text));
            // No trailing blanks after the last cell of a line.
            if align == Align::Left && i < last {
                s.push_str(&" ".repeat(pad));
            }
        }
        // An empty last cell (no refs) leaves no trailing blanks either.
        let mut s = s.trim_end_matches(' ').to_string();
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_fit_the_longest_cell_and_colors_do_not_count() {
        let mut t = Table::with_header(&[("name", Align::Left), ("n", Align::Right)]);
        t.row(vec!["a-very-long-branch-name".into(), "1".into()]);
        t.row(vec![Cell::styled("b", Some(Role::Good)), "12345".into()]);
        let plain = t.render(Paint { on: false });
        let lines: Vec<&str> = plain.lines().collect();
        assert_eq!(lines[0], "name                         n");
        assert_eq!(lines[1], "a-very-long-branch-name      1");
        assert_eq!(lines[2], "b                        12345");
        let colored = t.render(Paint { on: true });
        assert!(colored.contains("\u{1b}["));
        // Stripping the escapes gives the plain rendering back.
        let stripped: String = strip(&colored);
        assert_eq!(stripped, plain);
    }

    #[test]
    fn a_short_row_runs_on_without_widening() {
        let mut t = Table::new(&[Align::Left, Align::Left, Align::Left]);
        t.row(vec!["abc".into(), "x".into(), "y".into()]);
        t.row(vec!["abc".into(), "a long run-on text".into()]);
        assert_eq!(
            t.render(Paint::default()),
            "abc  x  y\nabc  a long run-on text\n"
        );
    }

    fn strip(s: &str) -> String {
        let mut out = String::new();
        let mut esc = false;
        for ch in s.chars() {
            match (esc, ch) {
                (false, '\u{1b}') => esc = true,
                (true, 'm') => esc = false,
                (true, _) => {}
                (false, c) => out.push(c),
            }
        }
        out
    }
}
