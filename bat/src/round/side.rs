//! Side commits: commits on no branch, kept reachable by a tag (audits,
//! recorded starting checkpoints). The ledger commits only onto branches,
//! so a side commit is made on a temporary staging branch that is deleted
//! afterwards, whatever happened, and the result is then tagged.

use bat_ledger::{CommitId, CommitOutcome, Ledger};

/// Make a commit through `commit` on the staging branch `staging` (created
/// at `fork_at`, or left for the commit request to create, e.g. as an
/// orphan, when `None`), delete the branch, then name the commit by tag
/// `tag`. A staging branch left by an interrupted run is replaced.
pub(crate) fn tagged_side_commit<E: From<bat_ledger::Error>>(
    ledger: &mut Ledger,
    staging: &str,
    fork_at: Option<CommitId>,
    tag: &str,
    commit: impl FnOnce(&mut Ledger) -> Result<CommitOutcome, E>,
) -> Result<CommitOutcome, E> {
    if ledger
        .list_refs(&format!("refs/heads/{staging}"))?
        .iter()
        .any(|(rest, _)| rest.is_empty())
    {
        ledger.delete_branch(staging)?;
    }
    if let Some(at) = fork_at {
        ledger.create_branch(staging, at)?;
    }
    let committed = commit(ledger);
    let cleanup = ledger.delete_branch(staging);
    let out = committed?;
    cleanup?;
    ledger.create_tag(tag, out.commit)?;
    Ok(out)
}
