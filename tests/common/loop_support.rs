//! Shared helpers of the loop tests.

use std::path::{Path, PathBuf};

use bat::engine::child::{OutputSink, Stream};
use bat::engine::rounds::{CompletedRound, LoopEvent, Observer, RoundSink, SinkError};
use bat_contract::json::Value;
use bat_contract::pack::Pack;
use bat_ledger::{CommitRequest, Ledger, NoProgress};

/// The repository's copy of the loop conformance fixtures.
pub fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/loop")
}

/// The shared conformance loop directory, if present on this machine (and
/// `BAT_TEST_NO_SHARED` is unset: it simulates a fresh clone).
pub fn shared_loop() -> Option<PathBuf> {
    if std::env::var_os("BAT_TEST_NO_SHARED").is_some() {
        return None;
    }
    let p = PathBuf::from("/work/shared/conformance/loop");
    p.join("expected-work-dir").is_dir().then_some(p)
}

/// The source grid: the shared conformance one when present, else one built
/// from the given pack into `dir`.
pub fn source(dir: &Path, pack: &Pack) -> PathBuf {
    let shared = PathBuf::from("/work/shared/conformance/source/source.jsonl");
    if shared.is_file() && std::env::var_os("BAT_TEST_NO_SHARED").is_none() {
        return shared;
    }
    let k = pack.contract().unwrap();
    let built = bat_contract::source::build_source(&k).unwrap();
    let p = dir.join("source.jsonl");
    std::fs::write(&p, &built.jsonl).unwrap();
    p
}

/// Copy the fixtures into `dir` (writable) and return the copy.
pub fn fixtures(dir: &Path) -> PathBuf {
    let to = dir.join("fixtures");
    copy_dir(&data().join("fixtures"), &to);
    to
}

/// Recursive copy.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::write(&t, std::fs::read(e.path()).unwrap()).unwrap();
        }
    }
}

/// Every file under `dir`, relative, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(base, &e.path(), out);
            } else {
                out.push(
                    e.path()
                        .strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The trainer template with the fixture-relative `candidates/` made
/// absolute, so the test does not depend on the working directory.
pub fn trainer_template(fixtures: &Path) -> Vec<String> {
    let t: Vec<String> =
        serde_json::from_slice(&std::fs::read(fixtures.join("trainer-command.json")).unwrap())
            .unwrap();
    let abs = format!("{}/candidates/", fixtures.display());
    t.into_iter()
        .map(|s| s.replace("\"candidates/", &format!("\"{abs}")))
        .collect()
}

/// The evaluator template.
pub fn evaluator_template(fixtures: &Path) -> Vec<String> {
    serde_json::from_slice(&std::fs::read(fixtures.join("evaluator-command.json")).unwrap())
        .unwrap()
}

/// An observer that keeps event lines and child output.
#[derive(Default)]
pub struct Collect {
    /// Event lines.
    pub events: Vec<String>,
    /// Child output (label, bytes).
    pub output: Vec<(String, Vec<u8>)>,
}

impl Observer for Collect {
    fn event(&mut self, e: &LoopEvent<'_>) {
        self.events.push(format!("{e:?}"));
    }
}

impl OutputSink for Collect {
    fn output(&mut self, label: &str, _stream: Stream, bytes: &[u8]) {
        self.output.push((label.to_string(), bytes.to_vec()));
    }
}

/// A sink that records rounds and, given a ledger, commits each round
/// directory with the metadata shape `commit_round` produces (kind,
/// round_id, gate_status, loop) — a stand-in for library-level tests.
pub struct Recorder {
    /// (round id, gate status, loop metadata).
    pub rounds: Vec<(String, String, serde_json::Value)>,
    /// Optional ledger to commit into.
    pub ledger: Option<Ledger>,
    /// Refuse the round with this id.
    pub refuse: Option<String>,
}

impl Recorder {
    /// A recorder without a ledger.
    pub fn new() -> Recorder {
        Recorder {
            rounds: Vec::new(),
            ledger: None,
            refuse: None,
        }
    }
}

impl RoundSink for Recorder {
    fn round_completed(&mut self, r: &CompletedRound<'_>) -> Result<String, SinkError> {
        if self.refuse.as_deref() == Some(r.round_id) {
            return Err("refused by test".into());
        }
        // Every round folder is complete when handed over.
        for f in [
            "gate.json",
            "prescription.json",
            "training-health.json",
            "candidate-eval/summary.json",
        ] {
            assert!(r.round_dir.join(f).is_file(), "{f} missing");
        }
        if let Some(l) = self.ledger.as_mut() {
            // Like a round commit's tree, the commit holds the summary the
            // round was gated against (`baseline-summary.json`): the loop
            // record names summaries by the id of such committed files.
            let stage = tempfile::tempdir().map_err(|e| e.to_string())?;
            copy_tree(r.round_dir, stage.path());
            if let Some(b) = r.baseline_summary {
                std::fs::copy(b, stage.path().join("baseline-summary.json"))
                    .map_err(|e| e.to_string())?;
            }
            let mut req = CommitRequest::new(format!("round {}", r.round_id));
            req.metadata = serde_json::json!({
                "kind": "bat_round",
                "round_id": r.round_id,
                "gate_status": r.gate_status,
                "loop": r.loop_meta,
            });
            l.commit_dir(
                stage.path(),
                &req,
                &NoProgress,
                &std::sync::atomic::AtomicBool::new(false),
            )
            .map_err(|e| e.to_string())?;
        }
        self.rounds.push((
            r.round_id.to_string(),
            r.gate_status.to_string(),
            r.loop_meta.to_value(),
        ));
        Ok(format!("recorded {}", r.round_id))
    }
}

pub use super::copy_tree;

/// Parse a file as a contract JSON value.
pub fn read_json(p: &Path) -> Value {
    bat_contract::json::parse_bytes(&std::fs::read(p).unwrap()).unwrap()
}

/// The path of a built example (`toy_trainer`, `toy_evaluator`), building
/// the toy pair when missing. One copy for every test that runs them.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let p = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples")
        .join(name);
    if !p.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = std::process::Command::new(cargo)
            .args([
                "build",
                "--example",
                "toy_trainer",
                "--example",
                "toy_evaluator",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build of the toy examples");
        assert!(st.success());
    }
    p
}
