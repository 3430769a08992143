//! Progress of multi-round work (`bat replay`, `bat demo`) on stderr: an
//! indicatif bar over the rounds on a terminal, one line per step
//! otherwise. Child output is not echoed (it is kept in the log files).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

use bat::engine::child::{OutputSink, Stream};
use bat::engine::rounds::{LoopEvent, Observer};
use bat::replay::{ReplayObserver, RoundReplay};

/// Rounds progress on stderr.
pub struct RoundProgress {
    bar: Option<ProgressBar>,
    quiet: bool,
    prefix: String,
}

impl RoundProgress {
    /// A bar on a terminal (never with `--json`); plain lines otherwise
    /// unless `quiet`.
    pub fn new(prefix: &str, json: bool, quiet: bool) -> RoundProgress {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| {
            let pb = ProgressBar::new(0);
            if let Ok(s) = ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} rounds  {elapsed_precise}  {msg}",
            ) {
                pb.set_style(s.progress_chars("=> "));
            }
            pb.set_prefix(prefix.to_string());
            pb
        });
        RoundProgress {
            bar,
            quiet: quiet || json,
            prefix: prefix.to_string(),
        }
    }

    /// Start a phase of `total` rounds.
    pub fn phase(&mut self, name: &str, total: u64) {
        let name = super::term::neutralize(name, &[]);
        match &self.bar {
            Some(pb) => {
                pb.set_prefix(format!("{} {name}", self.prefix));
                pb.set_length(total);
                pb.set_position(0);
            }
            None if !self.quiet => eprintln!("{}: {name} ({total} rounds)", self.prefix),
            None => {}
        }
    }

    /// One round done.
    pub fn tick(&mut self, line: &str) {
        // Lines quote stored round ids and notes (a replay reads them
        // from the ledger): no raw control characters on the terminal.
        let line = super::term::neutralize(line, &[]);
        match &self.bar {
            Some(pb) => {
                pb.inc(1);
                pb.println(format!("  {line}"));
            }
            None if !self.quiet => eprintln!("  {line}"),
            None => {}
        }
    }

    fn msg(&mut self, m: String) {
        if let Some(pb) = &self.bar {
            pb.set_message(m);
        }
    }

    /// Remove the bar.
    pub fn finish(&mut self) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
    }
}

impl Observer for RoundProgress {
    fn event(&mut self, e: &LoopEvent<'_>) {
        let m = match e {
            LoopEvent::Evaluating { context } => format!("evaluating {context}"),
            LoopEvent::Baseline { target_stage, .. } => {
                format!("baseline evaluated, first target {target_stage}")
            }
            LoopEvent::RoundStart {
                round_id,
                target_stage,
            } => format!("{round_id}: materializing (target {target_stage})"),
            LoopEvent::Training { round_id, .. } => format!("{round_id}: training"),
            LoopEvent::Gated {
                round_id,
                gate_status,
                ..
            } => format!("{round_id}: gate {gate_status}"),
            LoopEvent::Recorded { round_id, note } => {
                let line = format!("{round_id}: {note}");
                self.tick(&line);
                return;
            }
        };
        self.msg(m);
    }
}

impl OutputSink for RoundProgress {
    fn output(&mut self, _label: &str, _stream: Stream, _bytes: &[u8]) {}
}

/// `r03  S3→S3  promote  overall 0.4123` for a replayed round.
pub fn replay_line(r: &RoundReplay) -> String {
    let overall = r
        .scores
        .get("overall")
        .map(|x| format!("{x:.4}"))
        .unwrap_or_else(|| "-".into());
    let verdict = match &r.verify {
        Some(v) if v.passed => match &v.note {
            Some(note) => format!(" reproduced ({note})"),
            None => " reproduced bit for bit".to_string(),
        },
        Some(v) => format!(
            " DIFFERS ({})",
            v.differing.first().map(String::as_str).unwrap_or("scores")
        ),
        None => String::new(),
    };
    format!(
        "{}  target {}  {}  overall {overall}{verdict}",
        r.round_id, r.target_stage, r.gate_status
    )
}

impl ReplayObserver for RoundProgress {
    fn planned(&mut self, round_ids: &[String]) {
        self.phase("replay", round_ids.len() as u64);
    }
    fn round_replayed(&mut self, r: &RoundReplay) {
        let line = replay_line(r);
        self.tick(&line);
    }
    fn loop_observer(&mut self) -> &mut dyn Observer {
        self
    }
}

impl bat::demo::DemoObserver for RoundProgress {
    fn phase(&mut self, name: &str, rounds: u64) {
        RoundProgress::phase(self, name, rounds);
    }
    fn replay_observer(&mut self) -> &mut dyn ReplayObserver {
        self
    }
}
