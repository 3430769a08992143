//! `bat demo`: a first session on a fresh machine, using only what is
//! embedded in the binary (the default benchmark pack).
//!
//! Today it materializes the safe source grid and a full 378-batch round view
//! with the default pack, checks the view (round verify and the leakage
//! firewall), and records it in a new ledger so the ledger verbs have
//! something real to show. The simulated training campaign joins it once the
//! simulator backend exists.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, CommitRequest, Ledger, Progress};

use crate::contract::firewall::{self, LeakageRules};
use crate::contract::json;
use crate::contract::pack::Pack;
use crate::contract::prompt::Prompter;
use crate::contract::{round, source};

/// The round the demo materializes.
pub const DEMO_ROUND_ID: &str = "r01";
/// Its S-target (the stage with the largest agentic weight in the default pack).
pub const DEMO_TARGET_STAGE: &str = "S3";

/// What the demo did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    /// The directory holding the ledger (`DIR/.bat`) and the work files.
    pub dir: PathBuf,
    /// sha256 of `source/source.jsonl`.
    pub source_sha256: String,
    /// Round id of the view.
    pub round_id: String,
    /// Its S-target.
    pub target_stage: String,
    /// Rows in `train.jsonl`.
    pub rows: usize,
    /// sha256 of `train.jsonl`.
    pub train_sha256: String,
    /// Leakage violations found by the firewall scan (0 when clean).
    pub firewall_violations: usize,
    /// The commit that records it.
    pub commit: CommitId,
}

/// Errors of the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The target directory already holds files.
    #[error("{path} is not empty; the demo needs a new or empty directory")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// Reading or writing a work file failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was attempted.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The pack is unusable.
    #[error(transparent)]
    Pack(#[from] crate::contract::pack::PackError),
    /// A contract step failed.
    #[error("{step}: {message}")]
    Contract {
        /// Which step.
        step: &'static str,
        /// The contract's error text.
        message: String,
    },
    /// The ledger refused.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
}

fn contract_err(step: &'static str) -> impl FnOnce(String) -> DemoError {
    move |message| DemoError::Contract { step, message }
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), DemoError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| DemoError::Io {
            action: "create",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    round::write_immutable(path, bytes).map_err(|e| DemoError::Contract {
        step: "write",
        message: e.to_string(),
    })
}

/// Run the demo in `dir` (created if missing; must be empty).
pub fn run_demo(dir: &Path, pack: &Pack, progress: &dyn Progress) -> Result<DemoReport, DemoError> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|source| DemoError::Io {
            action: "list",
            path: dir.to_path_buf(),
            source,
        })?;
        if entries.next().is_some() {
            return Err(DemoError::NotEmpty {
                path: dir.to_path_buf(),
            });
        }
    }
    let mut ledger = Ledger::init(dir)?;
    let k = pack.contract()?;
    let prompter = Prompter::new(&k);

    let built = source::build_source(&k).map_err(|e| contract_err("source grid")(e.to_string()))?;
    let source_path = dir.join("source").join(source::SOURCE_FILE);
    write(&source_path, &built.jsonl)?;
    write(
        &dir.join("source").join("manifest.json"),
        json::to_pj_file(&built.manifest).as_bytes(),
    )?;
    let source_sha256 = json::sha256_hex(&built.jsonl);

    let inputs = round::BuildInputs {
        source_bytes: &built.jsonl,
        source_file_name: source::SOURCE_FILE,
        source_sha256: &source_sha256,
        round_id: DEMO_ROUND_ID,
        target_stage: Some(DEMO_TARGET_STAGE),
        prescription: None,
        batches: round::DEFAULT_BATCHES,
        seed: None,
    };
    let view = round::materialize(&k, &prompter, &inputs)
        .map_err(|e| contract_err("round view")(e.to_string()))?;
    let data = dir.join(DEMO_ROUND_ID).join("data");
    write(&data.join(round::TRAIN_FILE), &view.train)?;
    let manifest_text = json::to_pj_file(&view.manifest);
    write(&data.join(round::MANIFEST_FILE), manifest_text.as_bytes())?;

    // Check what was written the way a reviewer would: verify the view and
    // run the leakage firewall over it.
    round::verify_dataset(&k, &prompter, &view.train, manifest_text.as_bytes())
        .map_err(|e| contract_err("round verify")(e.to_string()))?;
    let rules =
        LeakageRules::from_pack(pack).map_err(|e| contract_err("firewall")(e.to_string()))?;
    let violations = firewall::scan_bytes(&view.train, &[], &rules)
        .map_err(|e| contract_err("firewall")(e.to_string()))?;
    let rows = view.train.iter().filter(|b| **b == b'\n').count();
    let train_sha256 = json::sha256_hex(&view.train);

    let mut req = CommitRequest::new(format!(
        "{DEMO_ROUND_ID}: round view for target {DEMO_TARGET_STAGE} ({rows} rows, default pack)"
    ));
    req.author = "bat demo".into();
    req.metadata = serde_json::json!({
        "kind": "bat_round_view",
        "round_id": DEMO_ROUND_ID,
        "target_stage": DEMO_TARGET_STAGE,
        "source_sha256": source_sha256,
        "train_sha256": train_sha256,
        "rows": rows,
        "firewall_violations": violations.len(),
    });
    let outcome = ledger.commit_dir(dir, &req, progress, &AtomicBool::new(false))?;
    Ok(DemoReport {
        dir: dir.to_path_buf(),
        source_sha256,
        round_id: DEMO_ROUND_ID.into(),
        target_stage: DEMO_TARGET_STAGE.into(),
        rows,
        train_sha256,
        firewall_violations: violations.len(),
        commit: outcome.commit,
    })
}
