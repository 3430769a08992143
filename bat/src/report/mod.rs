//! Seeing a campaign: round rows written as files ([`export`]), the
//! custom metrics of each round ([`metrics`]), read-only
//! SQL over a campaign ([`query`]) and the self-contained HTML report
//! ([`html`], with its inline SVG plots in [`svg`]). Everything here reads
//! the ledger and returns or writes bytes; the CLI prints.

pub mod export;
pub mod html;
pub mod metrics;
pub mod query;
pub mod svg;

use bat_ledger::{CommitId, Ledger};

use crate::round::{resolve_rev, RoundError};

/// A listed history: a name (branch or revision as given) and its tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The name rows carry in their `branch` column.
    pub name: String,
    /// The tip commit.
    pub tip: CommitId,
}

/// Resolve the branches or revisions named; none named means every local
/// branch, in name order.
pub fn sources(ledger: &Ledger, names: &[String]) -> Result<Vec<Source>, RoundError> {
    if names.is_empty() {
        return Ok(ledger
            .list_refs("refs/heads/")?
            .into_iter()
            .map(|(name, tip)| Source { name, tip })
            .collect());
    }
    names
        .iter()
        .map(|n| {
            Ok(Source {
                name: n.clone(),
                tip: resolve_rev(ledger, n)?,
            })
        })
        .collect()
}
