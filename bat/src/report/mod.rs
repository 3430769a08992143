//! Seeing a campaign: round rows written as files ([`export`]), the
//! custom metrics of each round ([`metrics`]), read-only
//! SQL over a campaign ([`query`]) and the self-contained HTML report
//! ([`html`], with its inline SVG plots in [`svg`]). Everything here reads
//! the ledger and returns or writes bytes; the CLI prints.

pub mod arm_scores;
pub mod export;
pub mod html;
pub mod metrics;
pub mod mlflow;
pub mod query;
pub mod svg;
pub mod tensorboard;

use bat_ledger::{CommitId, Ledger};

use crate::experiment::arms::{resolve, ArmSpec};
use crate::round::resolve_rev;
use html::ReportError;

/// A listed history: a name (branch or revision as given) and its tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The name rows carry in their `branch` column.
    pub name: String,
    /// The tip commit.
    pub tip: CommitId,
    /// The arm it was listed by, as given: the name itself, or the arm
    /// group's specification (`bat/*`, `a,b`) when it is one member of a
    /// group.
    pub arm: String,
}

/// Resolve the branches, revisions or arm groups named; none named means
/// every local branch, in name order. An arm group (a glob such as
/// `'bat/*'` or a comma list `a,b`) stands for its member branches, in the
/// group's order.
pub fn sources(ledger: &Ledger, names: &[String]) -> Result<Vec<Source>, ReportError> {
    if names.is_empty() {
        return Ok(ledger
            .list_refs("refs/heads/")
            .map_err(|e| ReportError::from(crate::inspect::InspectError::from(e)))?
            .into_iter()
            .map(|(name, tip)| Source {
                arm: name.clone(),
                name,
                tip,
            })
            .collect());
    }
    let mut out = Vec::new();
    for n in names {
        match ArmSpec::parse(n)? {
            ArmSpec::One(_) => out.push(Source {
                name: n.clone(),
                tip: resolve_rev(ledger, n)?,
                arm: n.clone(),
            }),
            spec => {
                let group = resolve(ledger, &spec)?;
                for m in group.members {
                    out.push(Source {
                        name: m.name,
                        tip: m.head,
                        arm: n.clone(),
                    });
                }
            }
        }
    }
    Ok(out)
}
