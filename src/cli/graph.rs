//! ASCII lanes for `bat log --graph`, drawn one commit at a time as the
//! history streams (newest first): `*` is the commit, `|` a lane waiting
//! for an older commit, `|\` a merge opening a lane for its second parent,
//! `|/` two lanes meeting at a common ancestor. Good for linear histories
//! and simple merges and forks; crossings of many lanes are drawn
//! approximately (a lane moving left is a `/`).

use bat_ledger::CommitId;

/// The lanes between commits.
#[derive(Debug, Default)]
pub struct Graph {
    /// The commit each lane waits for.
    lanes: Vec<CommitId>,
    /// Commits already drawn: a lane waiting for one of them (the history
    /// showed it earlier, e.g. clock skew) is closed rather than kept open.
    drawn: std::collections::HashSet<CommitId>,
}

/// The lines drawn for one commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawn {
    /// The lanes on the commit's own line (`* |`).
    pub node: String,
    /// Extra lines after it: a merge opening lanes (`|\`) and lanes meeting
    /// (`|/`).
    pub after: Vec<String>,
    /// The lanes continuing past the commit, for its further text lines.
    pub cont: String,
}

fn bars(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push('|');
    }
    s
}

impl Graph {
    /// Draw `id` with `parents` and advance the lanes.
    pub fn next(&mut self, id: CommitId, parents: &[CommitId]) -> Drawn {
        self.drawn.insert(id);
        let col = match self.lanes.iter().position(|l| *l == id) {
            Some(c) => c,
            None => {
                self.lanes.push(id);
                self.lanes.len() - 1
            }
        };
        let node: Vec<&str> = (0..self.lanes.len())
            .map(|i| if i == col { "*" } else { "|" })
            .collect();
        let node = node.join(" ");
        let mut after = Vec::new();
        // Other lanes that waited for this commit end here (it was a fork
        // point); they are drawn meeting by the `|/` step below.
        let mut parents: Vec<CommitId> = parents
            .iter()
            .filter(|p| !self.drawn.contains(p))
            .copied()
            .collect();
        parents.dedup();
        let before = self.lanes.len();
        match parents.first() {
            Some(p0) => self.lanes[col] = *p0,
            None => {
                self.lanes.remove(col);
            }
        }
        let mut opened = 0;
        for p in parents.iter().skip(1) {
            if !self.lanes.contains(p) {
                self.lanes.insert(col + 1 + opened, *p);
                opened += 1;
            }
        }
        if opened > 0 {
            // `|\` at the commit's lane, the lanes right of it lean right.
            let mut s = bars(col + 1);
            s.push('\\');
            for _ in 0..opened.saturating_sub(1) {
                s.push_str(" \\");
            }
            for _ in col + 1..before {
                s.push_str(" \\");
            }
            after.push(s);
        }
        // Lanes waiting for the same commit merge into the leftmost one;
        // lanes waiting for something already drawn close.
        let mut keep: Vec<CommitId> = Vec::new();
        let mut line: Vec<char> = vec![' '; (2 * self.lanes.len()).saturating_sub(1)];
        for (i, l) in self.lanes.iter().enumerate() {
            let dup = keep.contains(l) || self.drawn.contains(l);
            // A lane that ends or shifts left leans `/` towards its new
            // column; one that stays is a `|`.
            if dup || keep.len() < i {
                if i > 0 {
                    line[2 * i - 1] = '/';
                }
            } else {
                line[2 * i] = '|';
            }
            if !dup {
                keep.push(*l);
            }
        }
        if keep.len() != self.lanes.len() {
            let s: String = line.into_iter().collect();
            after.push(s.trim_end().to_string());
            self.lanes = keep;
        }
        let cont = bars(self.lanes.len());
        Drawn { node, after, cont }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> CommitId {
        CommitId(bat_ledger::ObjectId([n; 32]))
    }

    #[test]
    fn linear_history_is_one_lane() {
        let mut g = Graph::default();
        let a = g.next(id(3), &[id(2)]);
        let b = g.next(id(2), &[id(1)]);
        let c = g.next(id(1), &[]);
        assert_eq!(
            (a.node.as_str(), b.node.as_str(), c.node.as_str()),
            ("*", "*", "*")
        );
        assert!(a.after.is_empty() && b.after.is_empty() && c.after.is_empty());
        assert_eq!(c.cont, "");
    }

    #[test]
    fn a_merge_opens_and_closes_a_lane() {
        // base(1) <- a(2) <- merge(4); base(1) <- b(3) <- merge(4).
        let mut g = Graph::default();
        let m = g.next(id(4), &[id(2), id(3)]);
        assert_eq!(m.node, "*");
        assert_eq!(m.after, vec!["|\\".to_string()]);
        let b = g.next(id(3), &[id(1)]);
        assert_eq!(b.node, "| *");
        let a = g.next(id(2), &[id(1)]);
        assert_eq!(a.node, "* |");
        assert_eq!(a.after, vec!["|/".to_string()]);
        let base = g.next(id(1), &[]);
        assert_eq!(base.node, "*");
    }
}
