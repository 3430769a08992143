//! Planning a replay: parsing the overrides, resolving `REV` / `A..B` to
//! the recorded round commits, and every check that can be made before
//! anything runs (overrides against each round's record and recorded pack,
//! the replay branch, the work folder).

use std::path::{Path, PathBuf};

use bat_ledger::{CommitId, Ledger, TreeId};

use super::{io_err, ReplayError, ReplayRequest};
use crate::round::campaign::{Campaign, SEED_PLACEHOLDER};
use crate::round::meta::{self, LoopMeta, RoundMeta};
use crate::round::resolve_rev;
use crate::round::view::ViewKind;
use bat_contract::pack::Pack;

/// One override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ablation {
    /// `reward=terminal`: E2E terminal reward only (`{reward_mode}` =
    /// `terminal` for the trainer); `reward=stage` is the recorded default.
    Reward(String),
    /// `target=S3`: the same S-target every round.
    Target(String),
    /// `mixture=VIEW`: round views of another registered kind than the
    /// recorded three-pool one, e.g. `mixture=uniform` (no S-target pool;
    /// [`crate::round::view`]).
    Mixture(ViewKind),
    /// `gate=off`: every candidate becomes the next starting checkpoint.
    GateOff,
    /// `batches=N`: a different data budget (changes compute).
    Batches(i64),
    /// `seed=N`: another campaign seed (`{seed}` of the templates; the
    /// compute stays the same).
    Seed(u64),
}

impl Ablation {
    /// `KEY=VALUE` for records and branch names.
    pub fn pair(&self) -> (String, String) {
        match self {
            Ablation::Reward(v) => ("reward".into(), v.clone()),
            Ablation::Target(v) => ("target".into(), v.clone()),
            Ablation::Mixture(kind) => ("mixture".into(), kind.name().into()),
            Ablation::GateOff => ("gate".into(), "off".into()),
            Ablation::Batches(n) => ("batches".into(), n.to_string()),
            Ablation::Seed(n) => ("seed".into(), n.to_string()),
        }
    }
}

/// Parse `--ablate` arguments. Stage names of `target=` are checked later
/// against the pack each replayed round was recorded with
/// ([`check_targets`]), not against the embedded default.
pub fn parse_ablations(args: &[String]) -> Result<Vec<Ablation>, ReplayError> {
    let mut out: Vec<Ablation> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for a in args {
        let (key, value) = a
            .split_once('=')
            .ok_or_else(|| ReplayError::AblationSyntax { given: a.clone() })?;
        let bad = |expected: &str| ReplayError::BadAblationValue {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        };
        let ab = match key {
            "reward" => match value {
                "terminal" | "stage" => Ablation::Reward(value.to_string()),
                _ => return Err(bad("reward=terminal or reward=stage")),
            },
            "target" if !value.is_empty() => Ablation::Target(value.to_string()),
            "target" => return Err(bad("a stage name, e.g. target=S3")),
            "mixture" => match crate::round::view::by_name(value) {
                Some(kind) if kind != ViewKind::THREE_POOL => Ablation::Mixture(kind),
                _ => return Err(bad(&mixture_choices())),
            },
            "gate" => match value {
                "off" => Ablation::GateOff,
                _ => return Err(bad("gate=off")),
            },
            "batches" => match value.parse::<i64>() {
                Ok(n) if n >= 1 => Ablation::Batches(n),
                _ => return Err(bad("a whole number ≥ 1")),
            },
            "seed" => match value.parse::<u64>() {
                Ok(n) => Ablation::Seed(n),
                _ => return Err(bad("a whole number ≥ 0")),
            },
            _ => {
                return Err(ReplayError::UnknownAblation {
                    key: key.to_string(),
                })
            }
        };
        if !seen.insert(key.to_string()) {
            return Err(ReplayError::DuplicateAblation {
                key: key.to_string(),
            });
        }
        out.push(ab);
    }
    Ok(out)
}

/// The `mixture=` values: every registered view but the recorded default.
fn mixture_choices() -> String {
    crate::round::view::views()
        .iter()
        .map(|v| v.kind())
        .filter(|k| *k != ViewKind::THREE_POOL)
        .map(|k| format!("mixture={}", k.name()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The default replay branch: `replay/<short-id>[-<key>-<value>…]`.
pub fn default_branch(first: &CommitId, ablations: &[Ablation]) -> String {
    let mut name = format!("replay/{}", first.0.short());
    for a in ablations {
        let (k, v) = a.pair();
        name.push_str(&format!("-{k}-{v}"));
    }
    name
}

/// The replay branch a replay of `rev` records to: `branch` when given,
/// else [`default_branch`] of its first round (the base name of the
/// per-seed branches of `bat replay --seeds`).
pub fn replay_branch(
    ledger: &Ledger,
    rev: &str,
    branch: Option<&str>,
    ablations: &[Ablation],
) -> Result<String, ReplayError> {
    if let Some(b) = branch {
        return Ok(b.to_string());
    }
    let originals = plan(ledger, rev)?;
    let first = originals.first().ok_or_else(|| ReplayError::NotARound {
        rev: rev.to_string(),
    })?;
    Ok(default_branch(&first.commit, ablations))
}

/// A round commit to replay, with what was read from it.
pub(super) struct Original {
    pub(super) commit: CommitId,
    pub(super) parent: Option<CommitId>,
    pub(super) tree: TreeId,
    pub(super) meta: RoundMeta,
    pub(super) round_id: String,
}

/// The round metadata of a commit, through the one reader.
pub(super) fn round_meta(
    id: &CommitId,
    metadata: &serde_json::Value,
) -> Result<Option<RoundMeta>, ReplayError> {
    meta::read(metadata).map_err(|e| ReplayError::BadRecord {
        commit: id.to_string(),
        reason: e.to_string(),
    })
}

pub(super) fn read_original(
    ledger: &Ledger,
    id: CommitId,
    rev: &str,
) -> Result<Original, ReplayError> {
    let c = ledger.read_commit(&id)?;
    let Some(m) = round_meta(&id, &c.metadata)? else {
        return Err(ReplayError::NotARound {
            rev: rev.to_string(),
        });
    };
    Ok(Original {
        commit: id,
        parent: c.parents.first().copied(),
        tree: c.tree,
        round_id: m.round_id.clone(),
        meta: m,
    })
}

/// Resolve `REV` or `A..B` to the round commits to replay, oldest first.
pub(super) fn plan(ledger: &Ledger, rev: &str) -> Result<Vec<Original>, ReplayError> {
    let resolve =
        |r: &str| resolve_rev(ledger, r).map_err(|_| ReplayError::NotARound { rev: r.to_string() });
    let Some((from, to)) = rev.split_once("..") else {
        let id = resolve(rev)?;
        return Ok(vec![read_original(ledger, id, rev)?]);
    };
    let a = resolve(from)?;
    let b = resolve(to)?;
    read_original(ledger, a, from)?;
    read_original(ledger, b, to)?;
    let mut out = Vec::new();
    let mut cur = Some(b);
    while let Some(id) = cur {
        let c = ledger.read_commit(&id)?;
        if meta::round_id_of(&c.metadata).is_some() {
            out.push(read_original(ledger, id, &id.to_string())?);
        }
        if id == a {
            out.reverse();
            return Ok(out);
        }
        cur = c.parents.first().copied();
    }
    Err(ReplayError::NotAncestor {
        from: from.to_string(),
        to: to.to_string(),
    })
}

pub(super) fn campaign_of(o: &Original) -> Result<(Campaign, &LoopMeta), ReplayError> {
    let lm = o
        .meta
        .loop_meta
        .as_ref()
        .ok_or_else(|| ReplayError::NotReplayable {
            round_id: o.round_id.clone(),
            commit: o.commit.to_string(),
        })?;
    Ok((lm.campaign.clone(), lm))
}

/// Everything decided before the first round runs.
pub(super) struct ReplayPlan {
    /// The round commits, oldest first (never empty).
    pub(super) originals: Vec<Original>,
    /// The replay branch (`None` for a verify).
    pub(super) branch: Option<String>,
    /// `<work>/inputs`: restored checkpoints, baselines, rebuilt sources.
    pub(super) inputs: PathBuf,
    /// `<work>/rounds`: one folder per replayed round.
    pub(super) rounds_dir: PathBuf,
    /// `<work>/logs`: child output.
    pub(super) logs: PathBuf,
    /// `target=`: the same S-target every round.
    pub(super) fixed_target: Option<String>,
    /// `gate=off`.
    pub(super) gate_off: bool,
    /// The view of rounds recorded with the three-pool view.
    pub(super) mixture: ViewKind,
    /// The overrides as `(KEY, VALUE)`.
    pub(super) ablation_pairs: Vec<(String, String)>,
    /// The run id recorded in the replay's loop metadata.
    pub(super) run_id: String,
}

/// The default work folder of a replay: `<ledger>/replays/<secs>-<pid>`.
pub fn default_work_dir(ledger_dir: &Path, unix_secs: u64, pid: u32) -> PathBuf {
    ledger_dir
        .join("replays")
        .join(format!("{unix_secs}-{pid}"))
}

/// Check the request against the record and lay out the work folder.
pub(super) fn prepare(ledger: &Ledger, req: &ReplayRequest) -> Result<ReplayPlan, ReplayError> {
    if req.verify && !req.ablations.is_empty() {
        return Err(ReplayError::VerifyWithAblation);
    }
    if !req.allow_compute_change {
        if let Some(Ablation::Batches(n)) = req
            .ablations
            .iter()
            .find(|a| matches!(a, Ablation::Batches(_)))
        {
            return Err(ReplayError::ComputeChange {
                key: "batches".into(),
                value: n.to_string(),
                what: "batches × rows per batch is the data budget".into(),
            });
        }
    }
    let originals = plan(ledger, &req.rev)?;
    let first = originals.first().ok_or_else(|| ReplayError::NotARound {
        rev: req.rev.clone(),
    })?;
    let branch = (!req.verify).then(|| {
        req.branch
            .clone()
            .unwrap_or_else(|| default_branch(&first.commit, &req.ablations))
    });
    if let Some(b) = &branch {
        bat_ledger::refs::validate_ref_name(b)?;
        if ledger.list_refs("refs/heads/")?.iter().any(|(n, _)| n == b) {
            return Err(ReplayError::BranchExists { branch: b.clone() });
        }
    }
    // Every round's record, recorded pack and templates are checked before
    // anything runs; each round's source and view are checked just before
    // it runs.
    for o in &originals {
        let (campaign, _) = campaign_of(o)?;
        check_targets(&req.ablations, &campaign)?;
        check_templates(&req.ablations, &campaign, o)?;
    }
    let w = std::path::absolute(&req.work_dir).map_err(io_err(&req.work_dir))?;
    if w.exists() {
        return Err(ReplayError::WorkExists { path: w });
    }
    let (inputs, rounds_dir, logs) = (w.join("inputs"), w.join("rounds"), w.join("logs"));
    for d in [&inputs, &rounds_dir, &logs] {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    let run_id = format!(
        "replay-{}{}",
        first.commit.0.short(),
        if req.verify { "-verify" } else { "" }
    );
    Ok(ReplayPlan {
        fixed_target: req.ablations.iter().find_map(|a| match a {
            Ablation::Target(t) => Some(t.clone()),
            _ => None,
        }),
        gate_off: req.ablations.contains(&Ablation::GateOff),
        mixture: req
            .ablations
            .iter()
            .find_map(|a| match a {
                Ablation::Mixture(kind) => Some(*kind),
                _ => None,
            })
            .unwrap_or(ViewKind::THREE_POOL),
        ablation_pairs: req.ablations.iter().map(Ablation::pair).collect(),
        run_id,
        originals,
        branch,
        inputs,
        rounds_dir,
        logs,
    })
}

/// `target=S` must name a stage of the pack the round was recorded with
/// (a campaign run with its own pack may have other stages than the
/// embedded one).
fn check_targets(ablations: &[Ablation], campaign: &Campaign) -> Result<(), ReplayError> {
    let Some(t) = ablations.iter().find_map(|a| match a {
        Ablation::Target(t) => Some(t),
        _ => None,
    }) else {
        return Ok(());
    };
    let pack = Pack::load_or_default(campaign.pack.as_deref())?;
    let k = pack.contract()?;
    if k.stages.iter().any(|s| s == t) {
        return Ok(());
    }
    Err(ReplayError::BadAblationValue {
        key: "target".into(),
        value: t.clone(),
        expected: format!("one of {}", k.stages.join(", ")),
    })
}

/// `reward=` needs a `{reward_mode}` in the recorded trainer template;
/// `seed=` a `{seed}` in the trainer or evaluator template.
fn check_templates(
    ablations: &[Ablation],
    campaign: &Campaign,
    o: &Original,
) -> Result<(), ReplayError> {
    for a in ablations {
        if let Ablation::Reward(v) = a {
            if !campaign.trainer.iter().any(|t| t == "{reward_mode}") {
                return Err(ReplayError::TemplateLacks {
                    round_id: o.round_id.clone(),
                    placeholder: "{reward_mode}".into(),
                    key: "reward".into(),
                    value: v.clone(),
                });
            }
        }
        if let Ablation::Seed(n) = a {
            let uses = |t: &[String]| t.iter().any(|e| e == SEED_PLACEHOLDER);
            if !uses(&campaign.trainer) && !uses(&campaign.evaluator) {
                return Err(ReplayError::TemplateLacks {
                    round_id: o.round_id.clone(),
                    placeholder: SEED_PLACEHOLDER.into(),
                    key: "seed".into(),
                    value: n.to_string(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Vec<Ablation>, ReplayError> {
        parse_ablations(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn mixture_takes_every_registered_view_but_the_default() {
        assert_eq!(
            parse(&["mixture=uniform"]).expect("uniform is registered"),
            vec![Ablation::Mixture(ViewKind::UNIFORM)]
        );
        assert_eq!(
            Ablation::Mixture(ViewKind::UNIFORM).pair(),
            ("mixture".to_string(), "uniform".to_string())
        );
        for bad in ["mixture=three_pool", "mixture=zipf"] {
            match parse(&[bad]) {
                Err(ReplayError::BadAblationValue { expected, .. }) => {
                    assert!(expected.contains("mixture=uniform"), "{expected}");
                    assert!(!expected.contains("three_pool"), "{expected}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
