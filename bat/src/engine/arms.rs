//! Arms of one experiment in one ledger: where a fresh campaign's rounds
//! may go, decided before any child runs, and the seed sets of
//! `bat run --seeds`.
//!
//! A campaign commits its rounds to one branch. A branch that already
//! holds rounds is continued only by `--resume`; a branch that does not
//! exist forks from HEAD, which must not hold another arm's rounds (its r01
//! would sit on top of them and its r02 would collide with theirs); an
//! independent arm (`--new`) starts its branch with a root commit instead.
//! Every conflict is an [`ArmError`] raised before the baseline evaluation.

use bat_ledger::{CommitId, Head, Ledger};

use crate::round::meta;

/// Why a campaign's branch was refused before anything ran.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    /// The branch already holds rounds and `--resume` was not given.
    #[error("branch {branch} already holds rounds (its last is {round_id}, commit {commit}); a new campaign on it would repeat their round ids")]
    BranchHasRounds {
        /// The branch.
        branch: String,
        /// Its newest round.
        round_id: String,
        /// That round's commit.
        commit: String,
        /// Whether that round was committed by `bat run` (so `--resume`
        /// continues it).
        resumable: bool,
        /// A branch name that is free, for the hint.
        free: String,
    },
    /// The branch does not exist and would fork from a HEAD holding rounds.
    #[error("branch {branch} does not exist, so it would start from HEAD ({from}), which holds the rounds of another arm (last {round_id}, commit {commit}); its rounds would mix with them")]
    ForksFromArm {
        /// The branch.
        branch: String,
        /// What HEAD names (a branch or `HEAD`).
        from: String,
        /// HEAD's newest round.
        round_id: String,
        /// That round's commit.
        commit: String,
    },
    /// `--new` names a branch that exists.
    #[error("--new starts a new branch, but branch {branch} already exists")]
    NewOnExisting {
        /// The branch.
        branch: String,
        /// Whether it has a round committed by `bat run` to resume.
        resumable: bool,
        /// A branch name that is free, for the hint.
        free: String,
    },
    /// `--new` together with `--resume`.
    #[error(
        "--new starts an independent arm and --resume continues one; they cannot be used together"
    )]
    NewWithResume,
    /// `--seeds` without `--branch`.
    #[error("--seeds needs --branch NAME: the arms are committed to NAME/s0, NAME/s1, …")]
    SeedsNeedBranch,
    /// `--seeds` is not a range or a list of seeds.
    #[error("--seeds {given} is not valid: {reason}")]
    SeedsSyntax {
        /// The argument.
        given: String,
        /// What is wrong.
        reason: String,
    },
    /// `--resume --seeds`: a seed's branch holds no round of `bat run`.
    #[error("seed {seed} has no round on branch {branch} to resume")]
    SeedNotStarted {
        /// The seed.
        seed: u64,
        /// Its branch.
        branch: String,
        /// The experiment name (`--branch`).
        name: String,
    },
    /// A ledger read failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
}

impl bat_ledger::Diagnostic for ArmError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            ArmError::Ledger(e) => e.kind(),
            ArmError::NewWithResume | ArmError::SeedsNeedBranch | ArmError::SeedsSyntax { .. } => {
                bat_ledger::ErrorKind::Usage
            }
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        Some(match self {
            ArmError::BranchHasRounds {
                branch,
                resumable,
                free,
                ..
            } => {
                let new = format!("start an independent arm on a new branch with `bat run --branch {free} --new` and the same campaign arguments");
                if *resumable {
                    format!("continue that campaign with `bat run --resume --branch {branch}`, or {new}")
                } else {
                    new
                }
            }
            ArmError::ForksFromArm { branch, .. } => format!(
                "start it as an independent arm from the initial checkpoint: add --new (`bat run --branch {branch} --new` and the same campaign arguments)"
            ),
            ArmError::NewOnExisting {
                branch,
                resumable,
                free,
            } => {
                let new = format!("name a branch that does not exist, e.g. `--branch {free} --new`");
                if *resumable {
                    format!("{new}; or continue {branch} with `bat run --resume --branch {branch}`")
                } else {
                    new
                }
            }
            ArmError::NewWithResume => {
                "drop --new to continue the branch's campaign, or drop --resume to start an arm"
                    .to_string()
            }
            ArmError::SeedsNeedBranch => {
                "name the experiment, e.g. `bat run --branch bat --seeds 0..3 …`".to_string()
            }
            ArmError::SeedsSyntax { .. } => {
                "give a half-open range `A..B` (`0..3` is seeds 0, 1 and 2) or a comma list `0,4,7`"
                    .to_string()
            }
            ArmError::SeedNotStarted { seed, name, .. } => format!(
                "start it first with `bat run --branch {name} --seeds {seed}` and the campaign arguments, then resume the others"
            ),
            ArmError::Ledger(e) => return e.hint(),
        })
    }

    fn code(&self) -> Option<String> {
        match self {
            ArmError::Ledger(e) => e.code(),
            ArmError::BranchHasRounds { .. } => Some("arm_branch_has_rounds".into()),
            ArmError::ForksFromArm { .. } => Some("arm_forks_from_arm".into()),
            ArmError::NewOnExisting { .. } => Some("arm_branch_exists".into()),
            _ => None,
        }
    }
}

/// The newest round commit on the first-parent chain from `tip`, with its
/// round id.
pub fn last_round_from(
    ledger: &Ledger,
    tip: CommitId,
) -> Result<Option<(CommitId, String)>, ArmError> {
    let mut id = tip;
    loop {
        let c = ledger.read_commit(&id)?;
        if let Some(rid) = meta::round_id_of(&c.metadata) {
            return Ok(Some((id, rid.to_string())));
        }
        match c.parents.first() {
            Some(p) => id = *p,
            None => return Ok(None),
        }
    }
}

/// The tip of branch `name`, if it exists.
fn branch_tip(ledger: &Ledger, name: &str) -> Result<Option<CommitId>, ArmError> {
    Ok(ledger
        .list_refs("refs/heads/")?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| c))
}

/// `NAME-2`, `NAME-3`, …: the first that names no branch.
fn free_name(ledger: &Ledger, name: &str) -> Result<String, ArmError> {
    let taken: Vec<String> = ledger
        .list_refs("refs/heads/")?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut n = 2u64;
    loop {
        let candidate = format!("{name}-{n}");
        if !taken.contains(&candidate) {
            return Ok(candidate);
        }
        n += 1;
    }
}

/// Whether the round commit `c` carries `bat run`'s loop record.
fn resumable(ledger: &Ledger, c: CommitId) -> Result<bool, ArmError> {
    let commit = ledger.read_commit(&c)?;
    Ok(commit.metadata.get("loop").is_some())
}

/// Where a fresh campaign's rounds go, checked before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmStart {
    /// The branch (the current one when none was named; `HEAD` detached).
    pub branch: String,
    /// Start the branch with a root commit (`--new`).
    pub root: bool,
}

/// Check that a fresh campaign (not `--resume`) may commit to `branch`
/// (`None`: the current branch); `new`: start it as an independent arm.
pub fn check_fresh_arm(
    ledger: &Ledger,
    branch: Option<&str>,
    new: bool,
) -> Result<ArmStart, ArmError> {
    let head = ledger.head()?;
    let head_name = match &head {
        Head::Branch { name, .. } => name.strip_prefix("refs/heads/").unwrap_or(name).to_string(),
        Head::Detached { .. } => "HEAD".to_string(),
    };
    let name = branch.map_or_else(|| head_name.clone(), str::to_string);
    if name != "HEAD" {
        bat_ledger::refs::validate_ref_name(&name)?;
    }
    let tip = if name == "HEAD" {
        head.commit()
    } else {
        branch_tip(ledger, &name)?
    };
    if let Some(tip) = tip {
        if new {
            let has = last_round_from(ledger, tip)?;
            return Err(ArmError::NewOnExisting {
                resumable: match has {
                    Some((c, _)) => resumable(ledger, c)?,
                    None => false,
                },
                free: free_name(ledger, &name)?,
                branch: name,
            });
        }
        if let Some((c, round_id)) = last_round_from(ledger, tip)? {
            return Err(ArmError::BranchHasRounds {
                resumable: resumable(ledger, c)?,
                free: free_name(ledger, &name)?,
                commit: c.to_string(),
                round_id,
                branch: name,
            });
        }
        return Ok(ArmStart {
            branch: name,
            root: false,
        });
    }
    if new {
        return Ok(ArmStart {
            branch: name,
            root: true,
        });
    }
    if let Some(h) = head.commit() {
        if let Some((c, round_id)) = last_round_from(ledger, h)? {
            return Err(ArmError::ForksFromArm {
                branch: name,
                from: head_name,
                round_id,
                commit: c.to_string(),
            });
        }
    }
    Ok(ArmStart {
        branch: name,
        root: false,
    })
}

/// Parse `--seeds`: a half-open range `A..B` (`0..3` = 0, 1, 2) or a comma
/// list `0,4,7` (no repeats). Never empty.
pub fn parse_seeds(given: &str) -> Result<Vec<u64>, ArmError> {
    let bad = |reason: &str| ArmError::SeedsSyntax {
        given: given.to_string(),
        reason: reason.to_string(),
    };
    let num = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| bad(&format!("{:?} is not a whole number ≥ 0", s.trim())))
    };
    let seeds: Vec<u64> = if let Some((a, b)) = given.split_once("..") {
        let (a, b) = (num(a)?, num(b)?);
        if b <= a {
            return Err(bad(&format!(
                "the range {a}..{b} is empty (the end is excluded)"
            )));
        }
        (a..b).collect()
    } else {
        given.split(',').map(num).collect::<Result<_, _>>()?
    };
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = seeds.iter().find(|s| !seen.insert(**s)) {
        return Err(bad(&format!("seed {dup} is given twice")));
    }
    Ok(seeds)
}

/// The branch of seed `seed` of experiment `name`: `name/s<seed>`.
pub fn seed_branch(name: &str, seed: u64) -> String {
    format!("{name}/s{seed}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_as_half_open_ranges_or_lists() {
        assert_eq!(parse_seeds("0..3").expect("a range"), vec![0, 1, 2]);
        assert_eq!(parse_seeds("5..6").expect("a range"), vec![5]);
        assert_eq!(parse_seeds("0,4,7").expect("a list"), vec![0, 4, 7]);
        assert_eq!(parse_seeds("9").expect("one seed"), vec![9]);
        for bad in ["3..3", "3..1", "a..2", "1,,2", "1,1", "-1..2", ""] {
            assert!(
                matches!(parse_seeds(bad), Err(ArmError::SeedsSyntax { .. })),
                "{bad}"
            );
        }
        assert_eq!(seed_branch("bat", 2), "bat/s2");
    }
}
