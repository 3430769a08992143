//! Checkpoint drift between two round commits: how much of the candidate
//! model changed, summed over every `*.safetensors` file of `candidate/`
//! that both commits hold (the per-tensor comparison of [`super::tensors`],
//! totalled). `bat report` plots it per round against the checkpoint the
//! round trained from ([`trained_from`]): the promoted chain, so neither a
//! held candidate nor a reverted one is taken as the previous model.

use std::collections::BTreeMap;

use bat_ledger::{CommitId, Ledger, Mode, ObjectId, TreeId};
use serde::Serialize;

use super::diff::DiffOptions;
use super::side::materialise;
use super::tensors::diff_safetensors;
use super::{InspectError, RoundTree};

/// The totalled tensor comparison of two candidates.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Drift {
    /// Elements compared (tensors present on both sides with the same
    /// dtype and shape).
    pub elements: u64,
    /// Elements whose bit pattern differs.
    pub changed_elements: u64,
    /// `changed_elements / elements` (`None` when nothing was compared).
    pub changed_fraction: Option<f64>,
    /// sqrt(Σ over tensors of their squared L2 delta): the L2 norm of the
    /// whole update (finite elements only).
    pub l2: f64,
    /// safetensors files compared.
    pub files: u32,
}

fn safetensors_of(
    l: &Ledger,
    r: &RoundTree<'_>,
) -> Result<BTreeMap<String, (ObjectId, u64)>, InspectError> {
    match l.lookup_path(&r.commit.tree, "candidate")? {
        Some(e) if e.mode == Mode::Tree => Ok(l
            .walk_files(&TreeId(e.id))?
            .into_iter()
            .filter(|f| f.mode != Mode::Symlink && f.path.ends_with(".safetensors"))
            .map(|f| (f.path, (f.id, f.size)))
            .collect()),
        _ => Ok(BTreeMap::new()),
    }
}

/// The drift from `a`'s candidate to `b`'s; `None` when they share no
/// safetensors file path.
pub fn candidate_drift(
    ledger: &Ledger,
    a: CommitId,
    b: CommitId,
    opts: &DiffOptions,
    ctx: &crate::Ctx<'_>,
) -> Result<Option<Drift>, InspectError> {
    let fa = safetensors_of(ledger, &RoundTree::open(ledger, a)?)?;
    let fb = safetensors_of(ledger, &RoundTree::open(ledger, b)?)?;
    let mut d = Drift::default();
    let mut sq = 0.0;
    for (path, (ia, sa)) in &fa {
        let Some((ib, sb)) = fb.get(path) else {
            continue;
        };
        d.files += 1;
        if ia == ib {
            // The same bytes: count the elements as compared and unchanged
            // without decoding twice.
            let mut x = materialise(ledger, ia, *sa, path, opts.sides(ctx.cancel))?;
            let mut y = materialise(ledger, ib, *sb, path, opts.sides(ctx.cancel))?;
            for t in diff_safetensors(&mut x, *sa, &mut y, *sb).map_err(|source| {
                InspectError::Tensors {
                    path: path.clone(),
                    source,
                }
            })? {
                d.elements += t.elements;
            }
            continue;
        }
        let full = format!("candidate/{path}");
        let mut x = materialise(ledger, ia, *sa, &full, opts.sides(ctx.cancel))?;
        let mut y = materialise(ledger, ib, *sb, &full, opts.sides(ctx.cancel))?;
        let deltas = diff_safetensors(&mut x, *sa, &mut y, *sb)
            .map_err(|source| InspectError::Tensors { path: full, source })?;
        for t in deltas {
            d.elements += t.elements;
            d.changed_elements += t.changed_elements;
            if let Some(l2) = t.l2_delta {
                sq += l2 * l2;
            }
        }
    }
    if d.files == 0 {
        return Ok(None);
    }
    d.l2 = sq.sqrt();
    d.changed_fraction = (d.elements > 0).then(|| d.changed_elements as f64 / d.elements as f64);
    Ok(Some(d))
}

/// For each round commit of `rounds` (oldest first), the earlier one in
/// the list whose candidate it trained from (`trained_from_checkpoint_sha256`
/// equal to that round's `candidate_checkpoint_sha256`; the newest such);
/// `None` when it trained from a checkpoint no listed round produced (the
/// initial checkpoint) or its metadata does not say.
pub fn trained_from(
    ledger: &Ledger,
    rounds: &[CommitId],
) -> Result<Vec<Option<CommitId>>, InspectError> {
    let mut candidates: Vec<(CommitId, String)> = Vec::with_capacity(rounds.len());
    let mut out = Vec::with_capacity(rounds.len());
    for id in rounds {
        let meta = RoundTree::open(ledger, *id)?.round;
        let from = meta
            .as_ref()
            .map(|m| m.trained_from_checkpoint_sha256.as_str())
            .filter(|s| !s.is_empty());
        out.push(from.and_then(|sha| {
            candidates
                .iter()
                .rev()
                .find(|(_, c)| c == sha)
                .map(|(id, _)| *id)
        }));
        if let Some(m) = meta {
            candidates.push((*id, m.candidate_checkpoint_sha256));
        }
    }
    Ok(out)
}
