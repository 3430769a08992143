//! A campaign's starting checkpoint kept in the ledger, so that replaying
//! its first round needs nothing outside the ledger (a reviewer's clone has
//! no copy of the folder the campaign started from).
//!
//! The folder is recorded once per model identity as a root commit (no
//! parent, on no branch) of kind `bat_checkpoint`, named by the tag
//! `checkpoints/<model identity sha256>` — which keeps it reachable for `gc`,
//! `fsck` and transfers.

use std::path::Path;

use bat_ledger::{CommitId, CommitRequest, Ledger};

use super::check::RoundCheck;
use super::side::tagged_side_commit;
use super::RoundError;
use crate::Ctx;
use bat_contract::binding::model_identity;

/// Tag prefix of recorded starting checkpoints.
pub const CHECKPOINT_TAG_PREFIX: &str = "checkpoints/";

/// The tag (short name) that names the checkpoint with this identity.
pub fn checkpoint_tag(identity_sha256: &str) -> String {
    format!("{CHECKPOINT_TAG_PREFIX}{identity_sha256}")
}

/// The commit recording the checkpoint with this identity, if any.
pub fn recorded_checkpoint(
    ledger: &Ledger,
    identity_sha256: &str,
) -> Result<Option<CommitId>, RoundError> {
    let full = format!("refs/tags/{}", checkpoint_tag(identity_sha256));
    Ok(ledger
        .list_refs(&full)?
        .into_iter()
        .find(|(rest, _)| rest.is_empty())
        .map(|(_, id)| id))
}

/// Record the model folder `dir` unless a checkpoint with its identity is
/// already recorded. Returns the recording commit and its identity. The
/// recording reports to `ctx` and stops, recording nothing, when its
/// cancel flag is set.
pub fn record_checkpoint(
    ledger: &mut Ledger,
    dir: &Path,
    author: &str,
    ctx: &Ctx<'_>,
) -> Result<(CommitId, String), RoundError> {
    let identity = model_identity(dir)
        .map_err(|e| {
            RoundError::from(RoundCheck::Checkpoint {
                path: Path::to_path_buf(dir),
                reason: e.to_string(),
            })
        })?
        .model_identity_sha256;
    if let Some(id) = recorded_checkpoint(ledger, &identity)? {
        return Ok((id, identity));
    }
    let staging = format!(
        "bat-checkpoint-staging/{}",
        &identity[..16.min(identity.len())]
    );
    let mut req = CommitRequest::new(format!(
        "starting checkpoint {}",
        &identity[..12.min(identity.len())]
    ));
    req.author = author.to_string();
    req.branch = Some(staging.clone());
    req.orphan = true;
    req.metadata = serde_json::json!({
        "kind": "bat_checkpoint",
        "model_identity_sha256": identity,
    });
    let out = tagged_side_commit(
        ledger,
        &staging,
        None,
        &checkpoint_tag(&identity),
        |l| -> Result<_, RoundError> { Ok(l.commit_dir(dir, &req, ctx.progress, ctx.cancel)?) },
    )?;
    Ok((out.commit, identity))
}
