//! A replayed round's inputs, all read from the ledger: files of the
//! original's tree, the recorded compute, the starting checkpoint (checked
//! out, fetched first in a partial clone), the source grid (recorded or
//! rebuilt) and the round view re-materialized and checked against the
//! manifest.

use std::path::{Path, PathBuf};

use bat_ledger::{CommitId, Ledger, TreeId};

use super::plan::{round_meta, Original};
use super::{io_err, ComputeSide, ReplayError};
use crate::engine::rounds::LoopError;
use crate::round::campaign::Campaign;
use crate::round::provenance::{measured_compute, round_budget};
use crate::Ctx;
use bat_contract::binding::model_identity;
use bat_contract::json::{self, Value};
use bat_contract::pack::Pack;
use bat_contract::prompt::Prompter;
use bat_contract::round::BuildInputs;

/// Check out `commit` into `dest`. In a partial clone the ledger's
/// promisor layer fetches (and verifies) the files its remote keeps.
pub(super) fn checkout_hydrated(
    ledger: &mut Ledger,
    commit: &CommitId,
    dest: &Path,
    ctx: &Ctx<'_>,
) -> Result<(), ReplayError> {
    ledger.checkout(commit, dest, ctx.progress, ctx.cancel)?;
    Ok(())
}

pub(super) fn tree_file(
    ledger: &Ledger,
    tree: &TreeId,
    path: &str,
) -> Result<Option<Vec<u8>>, ReplayError> {
    match ledger.lookup_path(tree, path)? {
        Some(e) => Ok(Some(ledger.read_bytes(&e.id)?)),
        None => Ok(None),
    }
}

pub(super) fn tree_json(ledger: &Ledger, o: &Original, path: &str) -> Result<Value, ReplayError> {
    let bytes = tree_file(ledger, &o.tree, path)?.ok_or_else(|| ReplayError::BadRecord {
        commit: o.commit.to_string(),
        reason: format!("{path} is missing from its tree"),
    })?;
    json::parse_bytes(&bytes).map_err(|e| ReplayError::BadRecord {
        commit: o.commit.to_string(),
        reason: format!("{path} is not valid JSON: {e}"),
    })
}

/// The original's compute side, from its tree.
pub(super) fn original_compute(ledger: &Ledger, o: &Original) -> Result<ComputeSide, ReplayError> {
    let manifest = tree_json(ledger, o, "data/manifest.json")?;
    let health = tree_json(ledger, o, "training-health.json")?;
    let prov = tree_file(ledger, &o.tree, "provenance.json")?
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .unwrap_or_default();
    Ok(ComputeSide {
        budget: round_budget(&manifest, &health),
        measured: measured_compute(&health)
            .ok()
            .flatten()
            .unwrap_or(serde_json::Value::Null),
        trainer_wall_seconds: prov
            .get("measured_by_bat")
            .and_then(|m| m.get("trainer_wall_seconds"))
            .and_then(serde_json::Value::as_f64),
    })
}

/// Find a checkpoint folder with identity `sha`: the candidate of a round in
/// the first-parent history from `start`, checked out into `dest_root`, or
/// the campaign's initial checkpoint.
pub(super) fn find_checkpoint(
    ledger: &mut Ledger,
    start: Option<CommitId>,
    sha: &str,
    initial: &Path,
    dest_root: &Path,
    round_id: &str,
    ctx: &Ctx<'_>,
) -> Result<(PathBuf, Option<String>), ReplayError> {
    let mut cur = start;
    while let Some(id) = cur {
        let c = ledger.read_commit(&id)?;
        let found = round_meta(&id, &c.metadata)?
            .filter(|m| m.candidate_checkpoint_sha256 == sha)
            .map(|m| m.round_id);
        if let Some(rid) = found {
            let dest = dest_root.join(format!("{rid}-{}", id.0.short()));
            if !dest.exists() {
                checkout_hydrated(ledger, &id, &dest, ctx)?;
            }
            let cand = dest.join("candidate");
            if model_identity(&cand).is_ok_and(|m| m.model_identity_sha256 == sha) {
                return Ok((cand, Some(rid)));
            }
        }
        cur = c.parents.first().copied();
    }
    if initial.is_dir() && model_identity(initial).is_ok_and(|m| m.model_identity_sha256 == sha) {
        return Ok((initial.to_path_buf(), None));
    }
    // The starting checkpoint recorded in the ledger by the campaign.
    if let Some(id) = crate::round::initial::recorded_checkpoint(ledger, sha)? {
        let dest = dest_root.join(format!("initial-{}", id.0.short()));
        if !dest.exists() {
            checkout_hydrated(ledger, &id, &dest, ctx)?;
        }
        if model_identity(&dest).is_ok_and(|m| m.model_identity_sha256 == sha) {
            return Ok((dest, None));
        }
    }
    Err(ReplayError::CheckpointUnavailable {
        round_id: round_id.to_string(),
        sha256: sha.to_string(),
    })
}

/// The source grid with the manifest's digest, as a file: the recorded one,
/// else rebuilt from the pack into `inputs`.
pub(super) fn source_for(
    campaign: &Campaign,
    manifest: &Value,
    pack: &Pack,
    inputs: &Path,
    round_id: &str,
) -> Result<PathBuf, ReplayError> {
    let sha = manifest
        .get("source")
        .and_then(|s| s.get("sha256"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let unavailable = |reason: String| ReplayError::SourceUnavailable {
        round_id: round_id.to_string(),
        sha256: sha.clone(),
        reason,
    };
    if std::fs::read(&campaign.source).is_ok_and(|b| json::sha256_hex(&b) == sha) {
        return Ok(campaign.source.clone());
    }
    let k = pack.contract()?;
    let built = bat_contract::source::build_source(&k).map_err(|e| unavailable(e.to_string()))?;
    if json::sha256_hex(&built.jsonl) != sha {
        return Err(unavailable(format!(
            "{} is missing or changed, and the pack's source grid has another digest",
            campaign.source.display()
        )));
    }
    let name = campaign
        .source
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| bat_contract::source::SOURCE_FILE.into());
    let dir = inputs.join("source");
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let p = dir.join(name);
    std::fs::write(&p, &built.jsonl).map_err(io_err(&p))?;
    Ok(p)
}

/// Re-materialize the original view and check it against the manifest.
pub(super) fn check_view(
    pack: &Pack,
    source: &Path,
    manifest: &Value,
    round_id: &str,
) -> Result<(), ReplayError> {
    let k = pack.contract()?;
    let prompter = Prompter::new(&k);
    let bytes = std::fs::read(source).map_err(io_err(source))?;
    let sha = json::sha256_hex(&bytes);
    let name = source
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = manifest.get("target_stage").and_then(Value::as_str);
    let batches = match manifest.get("batches") {
        Some(Value::Int(b)) => *b,
        _ => 0,
    };
    let recorded = manifest
        .get("train")
        .and_then(|t| t.get("sha256"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let inputs = BuildInputs {
        source_bytes: &bytes,
        source_file_name: &name,
        source_sha256: &sha,
        round_id,
        target_stage: target,
        prescription: None,
        batches,
        seed: None,
    };
    let built = crate::round::view::view(crate::round::view::kind_of(manifest))
        .build(&k, &prompter, &inputs)
        .map_err(LoopError::from)?;
    let rebuilt = json::sha256_hex(&built.train);
    if rebuilt != recorded {
        return Err(ReplayError::ViewMismatch {
            round_id: round_id.to_string(),
            recorded,
            rebuilt,
        });
    }
    Ok(())
}

pub(super) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReplayError> {
    bat_contract::fsutil::write_atomic(path, bytes).map_err(io_err(path))
}
