//! Recognising a round directory (the reference loop's per-round folder, or
//! bat's own layout as found in a round commit's tree).

use std::path::{Path, PathBuf};

use super::check::RoundCheck;
use super::RoundError;

/// Which layout a round directory has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The reference loop's `W/rNN/` folder (has the raw evaluation).
    Reference,
    /// bat's layout: a checked-out round commit (has `round.json`, no raw
    /// evaluation).
    Bat,
}

impl Layout {
    /// `reference` or `bat`.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Reference => "reference",
            Layout::Bat => "bat",
        }
    }
}

/// The files of a recognised round directory.
#[derive(Debug, Clone)]
pub struct RoundLayout {
    /// The round directory.
    pub dir: PathBuf,
    /// The layout.
    pub layout: Layout,
    /// `data/train.jsonl`.
    pub train: PathBuf,
    /// `data/manifest.json`.
    pub manifest: PathBuf,
    /// `candidate/`.
    pub candidate: PathBuf,
    /// `candidate-eval/`.
    pub eval_dir: PathBuf,
    /// `candidate-eval/raw-evaluation.json` (reference layout).
    pub raw_eval: Option<PathBuf>,
    /// `gate.json`.
    pub gate: PathBuf,
    /// `prescription.json`.
    pub prescription: PathBuf,
    /// `training-health.json`.
    pub health: PathBuf,
    /// `round.json` (bat layout).
    pub round_json: Option<PathBuf>,
}

/// Files bat writes into a round commit next to the round's own files.
pub const BAT_FILES: [&str; 4] = [
    "round.json",
    "baseline-summary.json",
    "firewall.json",
    "provenance.json",
];

/// Whether `dir` looks like a round directory (has `data/manifest.json`,
/// `candidate-eval/` and `gate.json`). Cheap; used by the CLI to choose
/// between a round commit and a plain directory commit.
pub fn looks_like_round(dir: &Path) -> bool {
    dir.join("data").join("manifest.json").is_file()
        && dir.join("candidate-eval").is_dir()
        && dir.join("gate.json").is_file()
}

/// For a directory that is almost a round — it has some of a round's
/// files (`candidate/`, `candidate-eval/`, `gate.json`, `prescription.json`,
/// `training-health.json`, `data/`) but not all that [`looks_like_round`]
/// needs — the missing ones, so the CLI can say what is missing instead of
/// treating it as a plain folder. `None` for a round or a folder with no
/// round files at all.
pub fn near_round_missing(dir: &Path) -> Option<Vec<&'static str>> {
    if looks_like_round(dir) {
        return None;
    }
    let present = [
        dir.join("candidate").is_dir(),
        dir.join("candidate-eval").is_dir(),
        dir.join("gate.json").is_file(),
        dir.join("prescription.json").is_file(),
        dir.join("training-health.json").is_file(),
        dir.join("data").is_dir(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    // Two of them is a pattern, not a coincidence (a folder with a
    // `data/` alone is common).
    if present < 2 {
        return None;
    }
    let missing: Vec<&'static str> = [
        (
            "data/manifest.json",
            dir.join("data").join("manifest.json").is_file(),
        ),
        ("candidate-eval/", dir.join("candidate-eval").is_dir()),
        ("gate.json", dir.join("gate.json").is_file()),
    ]
    .into_iter()
    .filter(|(_, ok)| !ok)
    .map(|(n, _)| n)
    .collect();
    Some(missing)
}

/// Recognise `dir`'s layout; fails with the first missing file.
pub fn detect(dir: &Path) -> Result<RoundLayout, RoundError> {
    if !looks_like_round(dir) {
        return Err(RoundError::NotARound {
            dir: dir.to_path_buf(),
            reason: "expected data/manifest.json, candidate-eval/ and gate.json".into(),
        });
    }
    let eval_dir = dir.join("candidate-eval");
    let raw = eval_dir.join("raw-evaluation.json");
    let round_json = dir.join("round.json");
    let layout = if raw.is_file() {
        Layout::Reference
    } else if round_json.is_file() {
        Layout::Bat
    } else {
        return Err(RoundError::NotARound {
            dir: dir.to_path_buf(),
            reason: format!(
                "neither {} (reference layout) nor {} (bat layout) exists",
                raw.display(),
                round_json.display()
            ),
        });
    };
    let l = RoundLayout {
        dir: dir.to_path_buf(),
        layout,
        train: dir.join("data").join("train.jsonl"),
        manifest: dir.join("data").join("manifest.json"),
        candidate: dir.join("candidate"),
        raw_eval: (layout == Layout::Reference).then_some(raw),
        gate: dir.join("gate.json"),
        prescription: dir.join("prescription.json"),
        health: dir.join("training-health.json"),
        round_json: (layout == Layout::Bat).then_some(round_json),
        eval_dir,
    };
    for (what, p) in [
        ("the training data", &l.train),
        ("the prescription", &l.prescription),
        ("the training health file", &l.health),
        ("the evaluation summary", &l.eval_dir.join("summary.json")),
        (
            "the checkpoint binding",
            &l.eval_dir.join("checkpoint-binding.json"),
        ),
    ] {
        if !p.is_file() {
            return Err(RoundError::from(RoundCheck::Layout {
                path: Path::to_path_buf(p),
                reason: format!("{what} is missing"),
            }));
        }
    }
    if !l.candidate.is_dir() {
        return Err(RoundError::from(RoundCheck::Candidate {
            path: l.candidate.clone(),
            reason: "the candidate model folder is missing".into(),
        }));
    }
    Ok(l)
}

/// The files a round commit's tree takes from the round directory, as
/// (path in the tree, file on disk). Directories (`candidate/`) are listed
/// separately by the caller.
pub fn committed_files(l: &RoundLayout) -> Vec<(String, PathBuf)> {
    let mut v = vec![
        ("data/train.jsonl".to_string(), l.train.clone()),
        ("data/manifest.json".to_string(), l.manifest.clone()),
        ("gate.json".to_string(), l.gate.clone()),
        ("prescription.json".to_string(), l.prescription.clone()),
        ("training-health.json".to_string(), l.health.clone()),
    ];
    let steps = l.dir.join(super::steps::STEP_METRICS_PATH);
    if steps.is_file() {
        v.push((super::steps::STEP_METRICS_PATH.to_string(), steps));
    }
    for f in [
        "checkpoint-binding.json",
        "eval-request.json",
        "summary.json",
        "receipt.json",
    ] {
        let p = l.eval_dir.join(f);
        if p.is_file() {
            v.push((format!("candidate-eval/{f}"), p));
        }
    }
    v
}
