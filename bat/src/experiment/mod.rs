//! Experiments: several arms, each with several seeds, in one ledger, and
//! the statistics that compare them.
//!
//! - [`arms`]: an arm named on the command line (`'bat/*'`, `a,b`, one
//!   branch or revision) resolved to an [`arms::ArmGroup`] — one group is
//!   one arm, its branches its seeds.
//! - [`stats`]: the rliable-style estimators (mean, IQM, stratified
//!   bootstrap confidence intervals, probability of improvement) on
//!   (stratum × run) score matrices. Pure functions, seeded, deterministic.

pub mod arms;
pub mod cells;
pub mod compare;
pub mod stats;

use bat_ledger::{Diagnostic, ErrorKind};

/// What can go wrong while naming or comparing arms.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// An arm specification that names nothing (`""`, `a,,b`).
    #[error("arm `{given}` is empty or has an empty name in its list")]
    EmptySpec {
        /// The specification as given.
        given: String,
    },
    /// A glob that matches no branch.
    #[error(
        "arm pattern `{pattern}` matches no branch (branches: {})",
        list_or_none(branches)
    )]
    NoMatch {
        /// The pattern.
        pattern: String,
        /// The ledger's branches.
        branches: Vec<String>,
    },
    /// A name in an arm that does not resolve.
    #[error("arm `{arm}`: `{name}` is not a branch, tag or commit of this ledger")]
    UnknownRevision {
        /// The arm specification.
        arm: String,
        /// The name that did not resolve.
        name: String,
    },
    /// The same branch twice in one arm.
    #[error("arm `{arm}` names `{name}` twice")]
    DuplicateMember {
        /// The arm specification.
        arm: String,
        /// The repeated name.
        name: String,
    },
    /// Fewer than two arms.
    #[error("a comparison needs at least two arms; {given} given")]
    TooFewArms {
        /// How many were given.
        given: usize,
    },
    /// A member of an arm has no round commit.
    #[error("arm `{arm}`: `{name}` has no round commit (nothing was recorded by `bat run` or `bat commit-round` there)")]
    NoRounds {
        /// The arm specification.
        arm: String,
        /// The member.
        name: String,
    },
    /// A member's rounds cannot be read.
    #[error("cannot read the rounds of `{name}`: {reason}")]
    Round {
        /// The member.
        name: String,
        /// Why.
        reason: String,
    },
    /// A summary file that is not JSON.
    #[error("{commit}:{path} is not a readable evaluation summary: {reason}")]
    BadSummary {
        /// The commit.
        commit: String,
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] bat_ledger::Error),
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

impl Diagnostic for ExperimentError {
    fn kind(&self) -> ErrorKind {
        match self {
            ExperimentError::Ledger(bat_ledger::Error::Cancelled) => ErrorKind::Interrupted,
            ExperimentError::Ledger(e) => e.kind(),
            ExperimentError::Round { .. } | ExperimentError::BadSummary { .. } => ErrorKind::User,
            _ => ErrorKind::Usage,
        }
    }

    fn hint(&self) -> Option<String> {
        let hint = match self {
            ExperimentError::EmptySpec { .. } => {
                "name an arm as a branch (`bat`), a comma list (`bat/s0,bat/s1`) or a quoted glob (`'bat/*'`)"
            }
            ExperimentError::NoMatch { .. } => {
                "`*` matches any run of characters except `/`; quote the pattern so the shell leaves it alone, and list branches with `bat branch`"
            }
            ExperimentError::UnknownRevision { .. } => "list branches with `bat branch`",
            ExperimentError::DuplicateMember { .. } => "name each branch once",
            ExperimentError::TooFewArms { .. } => "e.g. bat compare 'bat/*' 'terminal/*'",
            ExperimentError::NoRounds { .. } => {
                "name branches that hold rounds; `bat log BRANCH` shows what a branch holds"
            }
            ExperimentError::Round { .. } | ExperimentError::BadSummary { .. } => {
                "check the ledger with `bat fsck`"
            }
            ExperimentError::Ledger(e) => return e.hint(),
        };
        Some(hint.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_sentences_with_hints() {
        let samples = [
            ExperimentError::EmptySpec {
                given: "a,,b".into(),
            },
            ExperimentError::NoMatch {
                pattern: "x/*".into(),
                branches: vec!["main".into()],
            },
            ExperimentError::UnknownRevision {
                arm: "a,b".into(),
                name: "b".into(),
            },
            ExperimentError::DuplicateMember {
                arm: "a,a".into(),
                name: "a".into(),
            },
        ];
        for e in &samples {
            assert!(!bat_ledger::shows_a_code(e), "{e}");
            assert!(e.hint().is_some(), "{e}");
            assert_eq!(e.kind(), ErrorKind::Usage);
        }
        assert!(samples[1].to_string().contains("main"));
    }
}
