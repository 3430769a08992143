//! The live feed of a running `bat run`: one small JSON file per run,
//! `<ledger>/live/<run-id>.json`, that `bat serve --ui` reads to show a
//! campaign in progress without taking any lock.
//!
//! The file is replaced atomically (temporary file + rename), so a reader
//! sees either the previous state or the next one, never half a file. It is
//! rewritten at every phase change (view, train, evaluate, gate, commit)
//! and, during a phase, at most every [`THROTTLE`] while the child writes
//! output or steps. It holds the phase, the round, when the run and the
//! phase started, the last lines of the children's output (at most
//! [`LOG_TAIL_LINES`] lines of at most [`LOG_LINE_BYTES`] bytes each) and
//! the step metrics the trainer wrote so far to its `{metrics}` file (the
//! last [`MAX_STEPS`] steps). When the run ends the file is kept, marked
//! with how it ended; a run killed with SIGKILL leaves it saying
//! `running`, and readers tell that apart with [`LiveState::holder_alive`]
//! (the pid and its start time, as the run lock does).
//!
//! [`LiveObserver`] wraps the caller's [`Observer`] and feeds the file from
//! the loop's events and the children's output; everything else is passed
//! through unchanged.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::child::{OutputSink, Stream, Supervision};
use super::rounds::{LoopEvent, Observer};
use super::runlock;

/// The directory of live files inside the ledger directory.
pub const LIVE_DIR: &str = "live";

/// Most lines of child output kept in the file.
pub const LOG_TAIL_LINES: usize = 40;

/// Most bytes of one kept output line (longer lines are cut, marked `…`).
pub const LOG_LINE_BYTES: usize = 400;

/// Most step rows kept in the file (the last ones).
pub const MAX_STEPS: usize = 2000;

/// Least time between two rewrites within one phase.
pub const THROTTLE: Duration = Duration::from_millis(400);

/// Largest step metrics file read for the feed.
const MAX_METRICS_BYTES: u64 = 16 << 20;

/// Version of the file's layout.
pub const LIVE_VERSION: u32 = 1;

/// What the run is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Started; nothing evaluated yet.
    Starting,
    /// Materializing the round's view of the source grid.
    View,
    /// The trainer runs.
    Train,
    /// An evaluator runs (the baseline's or a candidate's).
    Evaluate,
    /// The gate decided; the round is being recorded.
    Gate,
    /// The run ended (see [`LiveState::status`]).
    Ended,
}

/// How the run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still running, as far as the run itself wrote.
    Running,
    /// Every round committed.
    Complete,
    /// Ended with an error.
    Failed,
    /// Stopped by a signal (or, as seen by a reader, killed: its process
    /// is gone while the file still says `running`).
    Stopped,
}

/// One kept line of child output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// The child (`r02/trainer`).
    pub label: String,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// The line, lossily decoded, without its newline.
    pub text: String,
}

/// One step of the trainer's step metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveStep {
    /// The trainer's step number.
    pub step: u64,
    /// The other numeric members.
    pub values: BTreeMap<String, f64>,
}

/// The content of a live file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    /// [`LIVE_VERSION`].
    pub version: u32,
    /// The campaign's run id.
    pub run_id: String,
    /// The branch the rounds go to (`None`: the current branch).
    pub branch: Option<String>,
    /// The `bat run` process.
    pub pid: u32,
    /// Its start time in clock ticks after boot, when known.
    pub pid_start_ticks: Option<u64>,
    /// Unix milliseconds when the run started.
    pub started_unix_ms: u64,
    /// What the run is doing.
    pub phase: Phase,
    /// Unix milliseconds when the phase started.
    pub phase_started_unix_ms: u64,
    /// The round in progress (`r03`), or `baseline`.
    pub round_id: Option<String>,
    /// The round's target stage.
    pub target_stage: Option<String>,
    /// Rounds the campaign has in all.
    pub rounds_total: u32,
    /// Rounds recorded by this run.
    pub rounds_recorded: u32,
    /// How the run stands.
    pub status: RunStatus,
    /// Unix milliseconds of this write.
    pub updated_unix_ms: u64,
    /// The last lines of the children's output, oldest first.
    pub log_tail: Vec<LogLine>,
    /// The current round's step metrics so far (last [`MAX_STEPS`]).
    pub steps: Vec<LiveStep>,
}

impl LiveState {
    /// Whether the process that writes this file still runs (same pid and
    /// start time).
    pub fn holder_alive(&self) -> bool {
        runlock::holder_alive(self.pid, self.pid_start_ticks)
    }

    /// The status a reader should show: a `running` file whose process is
    /// gone is `stopped`.
    pub fn effective_status(&self) -> RunStatus {
        if self.status == RunStatus::Running && !self.holder_alive() {
            RunStatus::Stopped
        } else {
            self.status
        }
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The live file of run `run_id` in ledger directory `ledger_dir`.
pub fn live_path(ledger_dir: &Path, run_id: &str) -> PathBuf {
    ledger_dir.join(LIVE_DIR).join(format!("{run_id}.json"))
}

/// Every readable live file of a ledger, newest run first. Unreadable or
/// foreign files are skipped: the feed is informative only.
pub fn read_all(ledger_dir: &Path) -> Vec<LiveState> {
    let Ok(rd) = std::fs::read_dir(ledger_dir.join(LIVE_DIR)) else {
        return Vec::new();
    };
    let mut out: Vec<LiveState> = rd
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| bat_contract::fsutil::read_capped(&e.path(), 4 << 20).ok())
        .filter_map(|b| serde_json::from_slice::<LiveState>(&b).ok())
        .collect();
    out.sort_by(|a, b| {
        b.started_unix_ms
            .cmp(&a.started_unix_ms)
            .then_with(|| a.run_id.cmp(&b.run_id))
    });
    out
}

/// What a feed is started with.
#[derive(Debug, Clone)]
pub struct FeedInfo {
    /// The ledger's `.bat` directory.
    pub ledger_dir: PathBuf,
    /// The campaign's work directory (round folders, step metrics files).
    pub work_dir: PathBuf,
    /// The run id.
    pub run_id: String,
    /// The branch, if named.
    pub branch: Option<String>,
    /// Rounds in all.
    pub rounds_total: u32,
}

/// Writes one run's live file.
#[derive(Debug)]
pub struct LiveFeed {
    path: PathBuf,
    work_dir: PathBuf,
    state: LiveState,
    tail: VecDeque<LogLine>,
    /// Unfinished last line per child stream.
    partial: BTreeMap<(String, &'static str), Vec<u8>>,
    last_write: Option<Instant>,
    dirty: bool,
    /// The first write error, for the caller to report once.
    error: Option<std::io::Error>,
}

impl LiveFeed {
    /// A feed for a run starting now; writes the first state.
    pub fn start(info: FeedInfo) -> LiveFeed {
        let now = now_unix_ms();
        let pid = std::process::id();
        let mut feed = LiveFeed {
            path: live_path(&info.ledger_dir, &info.run_id),
            work_dir: info.work_dir,
            state: LiveState {
                version: LIVE_VERSION,
                run_id: info.run_id,
                branch: info.branch,
                pid,
                pid_start_ticks: runlock::start_ticks(pid),
                started_unix_ms: now,
                phase: Phase::Starting,
                phase_started_unix_ms: now,
                round_id: None,
                target_stage: None,
                rounds_total: info.rounds_total,
                rounds_recorded: 0,
                status: RunStatus::Running,
                updated_unix_ms: now,
                log_tail: Vec::new(),
                steps: Vec::new(),
            },
            tail: VecDeque::new(),
            partial: BTreeMap::new(),
            last_write: None,
            dirty: true,
            error: None,
        };
        feed.write();
        feed
    }

    /// The state as last built.
    pub fn state(&self) -> &LiveState {
        &self.state
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn set_phase(&mut self, phase: Phase, round_id: Option<&str>) {
        self.state.phase = phase;
        self.state.phase_started_unix_ms = now_unix_ms();
        if let Some(r) = round_id {
            if self.state.round_id.as_deref() != Some(r) {
                self.state.steps.clear();
            }
            self.state.round_id = Some(r.to_string());
        }
        self.dirty = true;
        self.write();
    }

    /// A loop event: phase changes are written at once.
    pub fn event(&mut self, e: &LoopEvent<'_>) {
        match e {
            LoopEvent::Evaluating { context } => {
                // `baseline` or `r02 candidate`.
                let round = context.split_whitespace().next().unwrap_or(context);
                self.set_phase(Phase::Evaluate, Some(round));
            }
            LoopEvent::Baseline { target_stage, .. } => {
                self.state.target_stage = Some(target_stage.to_string());
                self.dirty = true;
                self.write();
            }
            LoopEvent::RoundStart {
                round_id,
                target_stage,
            } => {
                self.state.target_stage = Some(target_stage.to_string());
                self.set_phase(Phase::View, Some(round_id));
            }
            LoopEvent::Training { round_id, .. } => self.set_phase(Phase::Train, Some(round_id)),
            LoopEvent::Gated { round_id, .. } => {
                self.refresh_steps(round_id);
                self.set_phase(Phase::Gate, Some(round_id));
            }
            LoopEvent::Recorded { .. } => {
                self.state.rounds_recorded += 1;
                self.dirty = true;
                self.write();
            }
        }
    }

    /// A chunk of a child's output: complete lines go to the tail.
    pub fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]) {
        let buf = self
            .partial
            .entry((label.to_string(), stream.as_str()))
            .or_default();
        buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            lines.push(line);
        }
        // A line without end is cut so the buffer stays bounded.
        if buf.len() > LOG_LINE_BYTES * 4 {
            lines.push(std::mem::take(buf));
        }
        for line in lines {
            self.push_line(label, stream, &line);
        }
        self.tick();
    }

    fn push_line(&mut self, label: &str, stream: Stream, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = if text.len() > LOG_LINE_BYTES {
            let mut cut = LOG_LINE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}…", &text[..cut])
        } else {
            text.to_string()
        };
        if self.tail.len() == LOG_TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(LogLine {
            label: label.to_string(),
            stream: stream.as_str().to_string(),
            text,
        });
        self.dirty = true;
    }

    /// Rewrite the file if something changed and the throttle allows;
    /// during training the step metrics are re-read first.
    pub fn tick(&mut self) {
        if self.last_write.is_some_and(|t| t.elapsed() < THROTTLE) {
            return;
        }
        if self.state.phase == Phase::Train {
            if let Some(r) = self.state.round_id.clone() {
                self.refresh_steps(&r);
            }
        }
        self.write();
    }

    /// Re-read the round's step metrics file; lines not (yet) complete or
    /// not valid are left out.
    fn refresh_steps(&mut self, round_id: &str) {
        let file = self
            .work_dir
            .join(round_id)
            .join(crate::round::steps::STEP_METRICS_PATH);
        let Ok(bytes) = bat_contract::fsutil::read_capped(&file, MAX_METRICS_BYTES) else {
            return;
        };
        let steps = parse_steps(&bytes);
        if steps != self.state.steps {
            self.state.steps = steps;
            self.dirty = true;
        }
    }

    fn write(&mut self) {
        if !self.dirty {
            return;
        }
        self.state.updated_unix_ms = now_unix_ms();
        self.state.log_tail = self.tail.iter().cloned().collect();
        let bytes = serde_json::to_vec(&self.state).expect("a live state always serializes");
        if let Err(e) = bat_contract::fsutil::write_atomic_private(&self.path, &bytes) {
            self.error.get_or_insert(e);
        }
        self.last_write = Some(Instant::now());
        self.dirty = false;
    }

    /// Mark the run ended with `status` and write the file a last time.
    /// Returns the first write error of the feed, if any.
    pub fn finish(mut self, status: RunStatus) -> Option<std::io::Error> {
        // Unfinished lines are still worth showing.
        let rest: Vec<((String, &'static str), Vec<u8>)> =
            std::mem::take(&mut self.partial).into_iter().collect();
        for ((label, stream), bytes) in rest {
            if !bytes.is_empty() {
                let stream = if stream == "stdout" {
                    Stream::Stdout
                } else {
                    Stream::Stderr
                };
                self.push_line(&label, stream, &bytes);
            }
        }
        self.state.status = status;
        self.state.phase = Phase::Ended;
        self.state.phase_started_unix_ms = now_unix_ms();
        self.dirty = true;
        self.write();
        self.error
    }
}

/// The complete, valid step lines of a (possibly still growing) step
/// metrics file; the last [`MAX_STEPS`] of them.
pub fn parse_steps(bytes: &[u8]) -> Vec<LiveStep> {
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => return Vec::new(),
    };
    let mut out: VecDeque<LiveStep> = VecDeque::new();
    for line in complete.split(|&b| b == b'\n') {
        let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(line) else {
            continue;
        };
        let Some(step) = map.get("step").and_then(serde_json::Value::as_u64) else {
            continue;
        };
        let values = map
            .iter()
            .filter(|(k, _)| k.as_str() != "step")
            .filter_map(|(k, v)| v.as_f64().filter(|x| x.is_finite()).map(|x| (k.clone(), x)))
            .collect();
        if out.len() == MAX_STEPS {
            out.pop_front();
        }
        out.push_back(LiveStep { step, values });
    }
    out.into()
}

/// An [`Observer`] that feeds a [`LiveFeed`] and passes everything on to
/// the wrapped observer.
pub struct LiveObserver<'a> {
    inner: &'a mut dyn Observer,
    // `stop_signal` (polled every 50 ms while a supervised child runs)
    // takes `&self`; it is where a silent trainer's steps are picked up.
    feed: RefCell<LiveFeed>,
}

impl<'a> LiveObserver<'a> {
    /// Wrap `inner`.
    pub fn new(inner: &'a mut dyn Observer, feed: LiveFeed) -> Self {
        LiveObserver {
            inner,
            feed: RefCell::new(feed),
        }
    }

    /// End the feed with `status`; the first write error, if any.
    pub fn finish(self, status: RunStatus) -> Option<std::io::Error> {
        self.feed.into_inner().finish(status)
    }
}

impl OutputSink for LiveObserver<'_> {
    fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]) {
        self.feed.get_mut().output(label, stream, bytes);
        self.inner.output(label, stream, bytes);
    }

    fn supervision(&self) -> Option<Supervision> {
        self.inner.supervision()
    }

    fn stop_signal(&self) -> Option<Signal> {
        if let Ok(mut f) = self.feed.try_borrow_mut() {
            f.tick();
        }
        self.inner.stop_signal()
    }

    fn child_env(&self) -> Vec<(String, String)> {
        self.inner.child_env()
    }

    fn child_started(&mut self, label: &str, pgid: u32) {
        self.inner.child_started(label, pgid);
    }

    fn child_ended(&mut self, label: &str, pgid: u32) {
        self.inner.child_ended(label, pgid);
    }
}

impl Observer for LiveObserver<'_> {
    fn event(&mut self, event: &LoopEvent<'_>) {
        self.feed.get_mut().event(event);
        self.inner.event(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(dir: &Path) -> LiveFeed {
        LiveFeed::start(FeedInfo {
            ledger_dir: dir.join(".bat"),
            work_dir: dir.join("W"),
            run_id: "run-1".into(),
            branch: Some("main".into()),
            rounds_total: 3,
        })
    }

    fn read(f: &LiveFeed) -> LiveState {
        serde_json::from_slice(&std::fs::read(f.path()).expect("live file")).expect("valid")
    }

    #[test]
    fn phases_lines_and_steps_reach_the_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut f = feed(tmp.path());
        assert_eq!(read(&f).phase, Phase::Starting);
        f.event(&LoopEvent::RoundStart {
            round_id: "r01",
            target_stage: "S1",
        });
        let s = read(&f);
        assert_eq!((s.phase, s.round_id.as_deref()), (Phase::View, Some("r01")));
        f.event(&LoopEvent::Training {
            round_id: "r01",
            argv: &[],
        });
        std::fs::create_dir_all(tmp.path().join("W/r01")).expect("mkdir");
        std::fs::write(
            tmp.path().join("W/r01/step-metrics.jsonl"),
            "{\"step\":1,\"loss\":0.5}\n{\"step\":2,\"loss\":0.25}\n{\"step\":3,",
        )
        .expect("write metrics");
        f.output("r01/trainer", Stream::Stdout, b"hello <b>\npart");
        f.last_write = None;
        f.tick();
        let s = read(&f);
        assert_eq!(s.phase, Phase::Train);
        assert_eq!(s.log_tail.len(), 1);
        assert_eq!(s.log_tail[0].text, "hello <b>");
        assert_eq!(
            s.steps.iter().map(|r| r.step).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(s.steps[1].values.get("loss"), Some(&0.25));
        let path = f.path().to_path_buf();
        assert!(f.finish(RunStatus::Complete).is_none());
        let s: LiveState = serde_json::from_slice(&std::fs::read(path).expect("file")).expect("ok");
        assert_eq!((s.phase, s.status), (Phase::Ended, RunStatus::Complete));
        assert_eq!(s.log_tail.last().map(|l| l.text.as_str()), Some("part"));
    }

    #[test]
    fn the_tail_is_bounded_and_a_dead_holder_reads_as_stopped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut f = feed(tmp.path());
        for i in 0..(LOG_TAIL_LINES + 10) {
            f.output(
                "r01/trainer",
                Stream::Stderr,
                format!("line {i}\n").as_bytes(),
            );
        }
        f.output(
            "r01/trainer",
            Stream::Stderr,
            &vec![b'x'; LOG_LINE_BYTES * 5],
        );
        f.last_write = None;
        f.tick();
        let mut s = read(&f);
        assert_eq!(s.log_tail.len(), LOG_TAIL_LINES);
        assert!(s
            .log_tail
            .iter()
            .all(|l| l.text.len() <= LOG_LINE_BYTES + 3));
        assert_eq!(s.effective_status(), RunStatus::Running);
        // A pid that cannot be ours: the process is gone.
        s.pid = u32::MAX - 1;
        assert_eq!(s.effective_status(), RunStatus::Stopped);
        let all = read_all(&tmp.path().join(".bat"));
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].run_id, "run-1");
    }
}
