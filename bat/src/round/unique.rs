//! One round id, one round commit per branch. `bat commit` refuses a
//! round id its branch already records; a fetch or clone could still bring
//! a history that records one twice (a crafted bundle, an old peer), and
//! resolving `r02` there would have to guess. So a transfer that brings
//! such a history is refused and its ref moves undone
//! ([`refuse_duplicate_rounds`]), and resolution refuses to guess on a
//! ledger that already holds one ([`super::resolve_rev`]).

use std::collections::HashMap;

use bat_ledger::remote::RefUpdate;
use bat_ledger::{CommitId, Ledger};

use super::meta::round_id_of;
use super::RoundError;

/// A round id recorded by more than one round commit of one history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateRound {
    /// The round id.
    pub round_id: String,
    /// The round commits recording it, newest first.
    pub commits: Vec<CommitId>,
}

/// The round commits in `tip`'s history recording `round_id`, newest
/// first.
pub fn commits_recording(
    ledger: &Ledger,
    tip: CommitId,
    round_id: &str,
) -> Result<Vec<CommitId>, bat_ledger::Error> {
    let mut out = Vec::new();
    for item in ledger.history(tip, None)? {
        let (id, c) = item?;
        if round_id_of(&c.metadata) == Some(round_id) {
            out.push(id);
        }
    }
    Ok(out)
}

/// The first round id (newest first) that `tip`'s history records in more
/// than one round commit, if any.
pub fn duplicate_round(
    ledger: &Ledger,
    tip: CommitId,
) -> Result<Option<DuplicateRound>, bat_ledger::Error> {
    let mut seen: HashMap<String, Vec<CommitId>> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for item in ledger.history(tip, None)? {
        let (id, c) = item?;
        if let Some(r) = round_id_of(&c.metadata) {
            let ids = seen.entry(r.to_string()).or_default();
            if ids.is_empty() {
                order.push(r.to_string());
            }
            ids.push(id);
        }
    }
    Ok(order.into_iter().find_map(|r| {
        let commits = seen.remove(&r).unwrap_or_default();
        (commits.len() > 1).then_some(DuplicateRound {
            round_id: r,
            commits,
        })
    }))
}

/// Check every ref a fetch moved: when one's history records a round id
/// twice, every ref the fetch moved goes back where it was (the objects
/// stay unreferenced until `gc`) and the fetch is refused, naming the ref,
/// the round id and the commits.
pub fn refuse_duplicate_rounds(ledger: &mut Ledger, moved: &[RefUpdate]) -> Result<(), RoundError> {
    let changed: Vec<&RefUpdate> = moved
        .iter()
        .filter(|u| u.old != Some(u.new) && (u.status == "new" || u.status == "updated"))
        .collect();
    let mut found = None;
    for u in &changed {
        if let Some(d) = duplicate_round(ledger, u.new)? {
            found = Some((u.remote_ref.clone(), d));
            break;
        }
    }
    let Some((reference, d)) = found else {
        return Ok(());
    };
    for u in changed {
        ledger.update_ref(
            &u.local_ref,
            Some(u.new),
            u.old,
            &format!(
                "fetch refused: {reference} records round {} twice",
                d.round_id
            ),
        )?;
    }
    Err(RoundError::DuplicateRoundId {
        reference,
        round_id: d.round_id,
        commits: d.commits,
    })
}
