//! Promotion state: `refs/promoted/<branch>`, the next starting checkpoint,
//! round ids as revisions, and `bat revert`.
//!
//! The promoted round of a branch is `refs/promoted/<branch>` when that ref
//! exists; otherwise it is derived from the branch's first-parent history:
//! the newest commit that is either a promoting round (it is the promoted
//! round) or a revert (its `restored_commit`, possibly none). A held round
//! never becomes the promoted round, so it is never the next round's
//! starting checkpoint. A branch that does not exist yet inherits the
//! promoted state of HEAD's commit (where it will fork from).

use bat_ledger::{
    Commit, CommitId, CommitRequest, FieldValue, Ledger, Mode, OnMoved, Tree, TreeEntry,
};
use serde_json::json;

use super::meta::{self, RoundMeta};
use super::RoundError;
use bat_contract::vocabulary::GateStatus;

/// Namespace of the promotion refs: `refs/promoted/<branch>`.
pub const PROMOTED_PREFIX: &str = "refs/promoted/";

/// A round commit as seen in history.
#[derive(Debug, Clone)]
pub struct RoundInfo {
    /// The commit.
    pub commit: CommitId,
    /// Its round id.
    pub round_id: String,
    /// The gate's decision.
    pub gate_status: GateStatus,
    /// The commit metadata, as read by [`super::meta::read`].
    pub metadata: RoundMeta,
}

/// The promoted round of a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotedRound {
    /// The round commit.
    pub commit: CommitId,
    /// Its round id.
    pub round_id: String,
    /// The promoted candidate's model identity.
    pub candidate_checkpoint_sha256: String,
}

/// Where the next round of a branch starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartingCheckpoint {
    /// The candidate of the promoted round: check out `candidate/` of
    /// `round.commit`.
    Promoted(PromotedRound),
    /// No promoted round: the campaign's initial checkpoint, whose identity
    /// is known when a round of the branch recorded it (the gate baseline of
    /// its oldest round).
    Initial {
        /// The initial checkpoint's identity, if recorded.
        checkpoint_sha256: Option<String>,
    },
}

impl StartingCheckpoint {
    /// The checkpoint identity, when known.
    pub fn checkpoint_sha256(&self) -> Option<&str> {
        match self {
            StartingCheckpoint::Promoted(p) => Some(&p.candidate_checkpoint_sha256),
            StartingCheckpoint::Initial { checkpoint_sha256 } => checkpoint_sha256.as_deref(),
        }
    }
}

fn meta_str<'a>(c: &'a Commit, key: &str) -> Option<&'a str> {
    c.metadata.get(key).and_then(serde_json::Value::as_str)
}

fn kind(c: &Commit) -> Option<&str> {
    meta_str(c, "kind")
}

/// The round metadata of commit `id`, through the one reader.
fn round(id: &CommitId, c: &Commit) -> Result<Option<RoundMeta>, RoundError> {
    meta::read(&c.metadata).map_err(|e| RoundError::Metadata {
        what: format!("commit {id}"),
        reason: e.to_string(),
    })
}

fn as_promoted(id: CommitId, c: &Commit) -> Result<Option<PromotedRound>, RoundError> {
    Ok(round(&id, c)?
        .filter(|m| m.gate_status.is_promote())
        .map(|m| PromotedRound {
            commit: id,
            round_id: m.round_id,
            candidate_checkpoint_sha256: m.candidate_checkpoint_sha256,
        }))
}

/// The tip of a branch (`HEAD` = HEAD's commit). A branch that does not
/// exist yet is where a commit to it would fork from: HEAD's commit.
fn branch_tip(ledger: &Ledger, branch: &str) -> Result<Option<CommitId>, RoundError> {
    if branch != "HEAD" {
        if let Some((_, c)) = ledger
            .list_refs("refs/heads/")?
            .into_iter()
            .find(|(n, _)| n == branch)
        {
            return Ok(Some(c));
        }
    }
    Ok(ledger.head()?.commit())
}

/// The current value of `refs/promoted/<branch>`.
pub fn promoted_ref(ledger: &Ledger, branch: &str) -> Result<Option<CommitId>, RoundError> {
    Ok(ledger
        .list_refs(PROMOTED_PREFIX)?
        .into_iter()
        .find(|(n, _)| n == branch)
        .map(|(_, c)| c))
}

/// The promoted state found walking first parents from `start`.
pub(crate) fn promoted_in_history(
    ledger: &Ledger,
    start: Option<CommitId>,
) -> Result<Option<PromotedRound>, RoundError> {
    let mut cur = start;
    while let Some(id) = cur {
        let c = ledger.read_commit(&id)?;
        if let Some(p) = as_promoted(id, &c)? {
            return Ok(Some(p));
        }
        if kind(&c) == Some("bat_revert") {
            return match meta_str(&c, "restored_commit")
                .and_then(bat_ledger::ObjectId::from_hex)
                .map(CommitId)
            {
                Some(r) => {
                    let rc = ledger.read_commit(&r)?;
                    as_promoted(r, &rc)
                }
                None => Ok(None),
            };
        }
        cur = c.parents.first().copied();
    }
    Ok(None)
}

/// The promoted round of `branch` (see the module docs), `None` when no
/// round of the branch was promoted (or the promotion was reverted).
pub fn promoted_round(ledger: &Ledger, branch: &str) -> Result<Option<PromotedRound>, RoundError> {
    if let Some(id) = promoted_ref(ledger, branch)? {
        let c = ledger.read_commit(&id)?;
        if let Some(p) = as_promoted(id, &c)? {
            return Ok(Some(p));
        }
    }
    promoted_in_history(ledger, branch_tip(ledger, branch)?)
}

/// Where the next round on `branch` starts: the promoted round's candidate,
/// else the initial checkpoint. A held candidate is never returned.
pub fn next_starting_checkpoint(
    ledger: &Ledger,
    branch: &str,
) -> Result<StartingCheckpoint, RoundError> {
    if let Some(p) = promoted_round(ledger, branch)? {
        return Ok(StartingCheckpoint::Promoted(p));
    }
    // The initial checkpoint: the gate baseline of the oldest round.
    let mut initial = None;
    let mut cur = branch_tip(ledger, branch)?;
    while let Some(id) = cur {
        let c = ledger.read_commit(&id)?;
        if let Some(m) = round(&id, &c)? {
            if !m.trained_from_checkpoint_sha256.is_empty() {
                initial = Some(m.trained_from_checkpoint_sha256);
            }
        }
        cur = c.parents.first().copied();
    }
    Ok(StartingCheckpoint::Initial {
        checkpoint_sha256: initial,
    })
}

/// Every round commit reachable from `start` (newest first, as `log`).
pub fn round_commits(ledger: &Ledger, start: CommitId) -> Result<Vec<RoundInfo>, RoundError> {
    let mut out = Vec::new();
    for item in ledger.history(start, None)? {
        let (id, c) = item?;
        if let Some(m) = round(&id, &c)? {
            out.push(RoundInfo {
                commit: id,
                round_id: m.round_id.clone(),
                gate_status: m.gate_status,
                metadata: m,
            });
        }
    }
    Ok(out)
}

/// The round commits in the history of `start` whose promotion a
/// `bat revert` there undid: their candidates stopped being the branch's
/// checkpoint.
pub fn reverted_rounds(
    ledger: &Ledger,
    start: CommitId,
) -> Result<std::collections::HashSet<CommitId>, RoundError> {
    let mut out = std::collections::HashSet::new();
    for item in ledger.history(start, None)? {
        let (_, c) = item?;
        out.extend(reverted_by(&c));
    }
    Ok(out)
}

/// The round commit whose promotion `c` undid, when `c` is a `bat revert`
/// commit.
pub fn reverted_by(c: &Commit) -> Option<CommitId> {
    if kind(c) != Some("bat_revert") {
        return None;
    }
    meta_str(c, "reverts")
        .and_then(bat_ledger::ObjectId::from_hex)
        .map(CommitId)
}

/// Whether `s` has the shape of a round id (`r` followed by digits).
pub fn is_round_id(s: &str) -> bool {
    s.len() >= 2 && s.starts_with('r') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// Resolve a revision, accepting round ids: `r02` (optionally followed by
/// `~N`/`^N`) is the newest round commit with that round id reachable from
/// HEAD. Anything else (or a round id with no such commit) goes to the
/// ledger's resolver.
pub fn resolve_rev(ledger: &Ledger, rev: &str) -> Result<CommitId, RoundError> {
    resolve_rev_from(ledger, rev, ledger.head()?.commit())
}

/// [`resolve_rev`], with a round id looked up in the history of `tip`
/// instead of HEAD's. Why: round ids repeat across branches (every arm
/// and seed has its own `r01`), so a command naming a branch must look
/// there.
fn resolve_rev_from(
    ledger: &Ledger,
    rev: &str,
    tip: Option<CommitId>,
) -> Result<CommitId, RoundError> {
    let split = rev.find(['~', '^']).unwrap_or(rev.len());
    let (base, ops) = rev.split_at(split);
    if is_round_id(base) {
        if let Some(head) = tip {
            // The whole history: a round id recorded twice (a ledger that
            // took such a history in) is refused, never guessed.
            let found = super::unique::commits_recording(ledger, head, base)?;
            match found.as_slice() {
                [] => {}
                [id] => return Ok(ledger.resolve(&format!("{id}{ops}"))?),
                _ => {
                    return Err(RoundError::AmbiguousRoundId {
                        round_id: base.to_string(),
                        commits: found,
                    })
                }
            }
        }
    }
    Ok(ledger.resolve(rev)?)
}

/// What [`revert_round`] did.
#[derive(Debug, Clone)]
pub struct RevertOutcome {
    /// The new revert commit.
    pub commit: CommitId,
    /// The reverted round commit.
    pub reverted: CommitId,
    /// Its round id.
    pub reverted_round_id: String,
    /// The branch.
    pub branch: String,
    /// The promoted round now (REV's baseline), `None` = the initial checkpoint.
    pub restored: Option<PromotedRound>,
    /// The next starting checkpoint's identity, when known.
    pub starting_checkpoint_sha256: Option<String>,
}

/// `bat revert REV`: add a commit on `branch` (default: the current branch)
/// that undoes REV's promotion. REV must be the branch's promoted round; a
/// round id names the round of that branch's history.
/// The promoted ref and the next starting checkpoint go back to REV's
/// baseline (the promoted round before REV, or the initial checkpoint).
/// The revert commit's tree holds `revert.json`; its metadata has kind
/// `bat_revert`, `reverts` (REV's id), `reverts_round_id`,
/// `restored_commit` (or null), `restored_round_id` and
/// `starting_checkpoint_sha256`.
pub fn revert_round(
    ledger: &mut Ledger,
    rev: &str,
    branch: Option<&str>,
    author: &str,
    message: Option<&str>,
) -> Result<RevertOutcome, RoundError> {
    let tip = match branch {
        Some(b) => branch_tip(ledger, b)?,
        None => ledger.head()?.commit(),
    };
    let target = resolve_rev_from(ledger, rev, tip)?;
    let tc = ledger.read_commit(&target)?;
    let Some(tm) = round(&target, &tc)? else {
        return Err(RoundError::NotARoundCommit {
            rev: rev.to_string(),
        });
    };
    let round_id = tm.round_id.clone();
    if !tm.gate_status.is_promote() {
        return Err(RoundError::CannotRevert {
            rev: rev.to_string(),
            reason: format!("round {round_id} was held, so there is no promotion to undo"),
        });
    }
    let branch = match branch {
        Some(b) => b.to_string(),
        None => super::current_branch(ledger)?,
    };
    let current = promoted_round(ledger, &branch)?;
    if current.as_ref().map(|p| p.commit) != Some(target) {
        return Err(RoundError::CannotRevert {
            rev: rev.to_string(),
            reason: match current {
                Some(p) => format!(
                    "it is not the promoted round of branch {branch} (that is {} at {})",
                    p.round_id,
                    p.commit.0.short()
                ),
                None => format!("branch {branch} has no promoted round"),
            },
        });
    }
    let restored = promoted_in_history(ledger, tc.parents.first().copied())?;
    let starting = match &restored {
        Some(p) => Some(p.candidate_checkpoint_sha256.clone()),
        None => Some(tm.trained_from_checkpoint_sha256.clone()).filter(|s| !s.is_empty()),
    };
    let doc = json!({
        "schema_version": 1,
        "artifact_kind": "bat_round_revert",
        "reverts": target.to_string(),
        "reverts_round_id": round_id,
        "restored_commit": restored.as_ref().map(|p| p.commit.to_string()),
        "restored_round_id": restored.as_ref().map(|p| p.round_id.clone()),
        "starting_checkpoint_sha256": starting,
    });
    let mut bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    bytes.push(b'\n');
    let blob = ledger.write_objects(&[&bytes], &[])?;
    let tree = Tree {
        entries: vec![TreeEntry {
            name: "revert.json".into(),
            mode: Mode::File,
            id: blob[0],
            size: bytes.len() as u64,
        }],
    };
    let tree_id = ledger.write_objects(&[], &[tree])?;
    let mut metadata = doc.clone();
    if let Some(m) = metadata.as_object_mut() {
        m.remove("schema_version");
        m.remove("artifact_kind");
        m.insert("kind".into(), json!("bat_revert"));
    }
    let mut req = CommitRequest::new(message.map(str::to_string).unwrap_or_else(|| {
        format!(
            "Revert promotion of round {round_id} (back to {})",
            restored
                .as_ref()
                .map(|p| format!("round {}", p.round_id))
                .unwrap_or_else(|| "the initial checkpoint".into())
        )
    }));
    req.author = author.to_string();
    req.metadata = metadata;
    req.fields
        .insert("kind".into(), FieldValue::Str("bat_revert".into()));
    req.fields
        .insert("reverts_round_id".into(), FieldValue::Str(round_id.clone()));
    req.branch = (branch != "HEAD").then(|| branch.clone());
    req.on_moved = OnMoved::Fail;
    let out = ledger.commit_tree(bat_ledger::TreeId(tree_id[0]), &req)?;
    let refname = format!("{PROMOTED_PREFIX}{branch}");
    if branch != "HEAD" {
        let old = promoted_ref(ledger, &branch)?;
        ledger.update_ref(
            &refname,
            old,
            restored.as_ref().map(|p| p.commit),
            &format!("revert: promotion of {round_id} undone"),
        )?;
    }
    Ok(RevertOutcome {
        commit: out.commit,
        reverted: target,
        reverted_round_id: round_id,
        branch,
        restored,
        starting_checkpoint_sha256: starting,
    })
}
