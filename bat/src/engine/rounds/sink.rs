//! Where finished rounds go: the [`RoundSink`] trait, its typed error, and
//! the sink that commits every round to a ledger.

use super::*;
use crate::round::meta::LoopMeta;
use crate::Ctx;

/// A finished round, as handed to the [`RoundSink`].
#[derive(Debug, Clone)]
pub struct CompletedRound<'a> {
    /// The round id.
    pub round_id: &'a str,
    /// `W/<round_id>`.
    pub round_dir: &'a Path,
    /// The gate's decision.
    pub gate_status: GateStatus,
    /// The `"loop"` record to commit with the round (resume state).
    pub loop_meta: &'a LoopMeta,
    /// The summary the candidate was gated against, when it is on disk.
    pub baseline_summary: Option<&'a Path>,
    /// Wall-clock seconds of the trainer child, measured by bat.
    pub trainer_wall_seconds: Option<f64>,
}

/// Records finished rounds (the CLI commits them to the ledger).
pub trait RoundSink {
    /// Record a round; `Ok` carries a note for the progress output (e.g. the
    /// commit id). An error stops the loop.
    fn round_completed(&mut self, round: &CompletedRound<'_>) -> Result<String, SinkError>;

    /// Whether a recorded round's child logs are stored by this sink (the
    /// ledger sink commits them in the round's tree), so the loop may
    /// remove the log files once [`RoundSink::round_completed`] returned.
    /// Default `false`: the files are kept.
    fn stores_logs(&self) -> bool {
        false
    }
}

/// Why a [`RoundSink`] did not record a round.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The round's `"loop"` metadata does not read back.
    #[error("its loop metadata is invalid: {0}")]
    Metadata(#[from] crate::round::meta::MetaError),
    /// The campaign's starting checkpoint could not be recorded.
    #[error("cannot record the starting checkpoint {}: {source}", path.display())]
    InitialCheckpoint {
        /// The checkpoint folder.
        path: PathBuf,
        /// Why (boxed: a round check carries paths and ids, and a sink's
        /// result is returned on every round).
        source: Box<crate::round::RoundError>,
    },
    /// The round commit was refused.
    #[error(transparent)]
    Round(Box<crate::round::RoundError>),
    /// A sink of the caller's stopped the campaign.
    #[error("{0}")]
    Stopped(String),
}

impl bat_ledger::Diagnostic for SinkError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        match self {
            SinkError::Metadata(e) => e.kind(),
            SinkError::Round(e) => e.kind(),
            SinkError::InitialCheckpoint { source: e, .. } => e.kind(),
            _ => bat_ledger::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            SinkError::Metadata(e) => e.hint(),
            SinkError::Round(e) => e.hint(),
            SinkError::InitialCheckpoint { source: e, .. } => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            SinkError::Metadata(e) => e.code(),
            SinkError::Round(e) => e.code(),
            SinkError::InitialCheckpoint { source: e, .. } => e.code(),
            _ => None,
        }
    }
}

impl From<crate::round::RoundError> for SinkError {
    fn from(e: crate::round::RoundError) -> Self {
        SinkError::Round(Box::new(e))
    }
}

impl From<String> for SinkError {
    fn from(reason: String) -> Self {
        SinkError::Stopped(reason)
    }
}

impl From<&str> for SinkError {
    fn from(reason: &str) -> Self {
        SinkError::Stopped(reason.to_string())
    }
}

/// The [`RoundSink`] that commits every finished round to a ledger with
/// [`crate::round::commit_round`], the loop state under `"loop"`.
pub struct LedgerSink<'l> {
    /// The ledger.
    pub ledger: &'l mut bat_ledger::Ledger,
    /// Options for every round commit; `loop_meta` is set per round.
    pub options: crate::round::CommitRoundOptions,
    /// Progress of the commits and the flag that stops one.
    pub ctx: Ctx<'l>,
}

/// Commit one finished round. The single place the loop commits through.
pub fn commit_loop_round(
    ledger: &mut bat_ledger::Ledger,
    round: &CompletedRound<'_>,
    options: &crate::round::CommitRoundOptions,
    ctx: &Ctx<'_>,
) -> Result<crate::round::RoundCommit, crate::round::RoundError> {
    let mut opts = options.clone();
    opts.loop_meta = Some(round.loop_meta.clone());
    if let Some(b) = round.baseline_summary {
        opts.baseline_summary = Some(b.to_path_buf());
    }
    if round.trainer_wall_seconds.is_some() {
        opts.trainer_wall_seconds = round.trainer_wall_seconds;
    }
    crate::round::commit_round(ledger, round.round_dir, &opts, ctx)
}

impl LedgerSink<'_> {
    /// Commit one round (and, with the first, the starting checkpoint).
    pub fn commit(
        &mut self,
        round: &CompletedRound<'_>,
    ) -> Result<crate::round::RoundCommit, SinkError> {
        // The campaign's starting checkpoint goes into the ledger with its
        // first round (once per identity), so replays need no outside copy.
        let lm = round.loop_meta;
        if lm.round_number == 1 {
            let initial = &lm.campaign.initial_checkpoint;
            let author = self.options.author.as_deref().unwrap_or("unknown");
            crate::round::initial::record_checkpoint(self.ledger, initial, author, &self.ctx)
                .map_err(|source| SinkError::InitialCheckpoint {
                    path: initial.clone(),
                    source: Box::new(source),
                })?;
        }
        Ok(commit_loop_round(
            self.ledger,
            round,
            &self.options,
            &self.ctx,
        )?)
    }

    /// The progress note of a round commit.
    pub fn note(c: &crate::round::RoundCommit) -> String {
        format!("committed {} ({})", c.commit.0.short(), c.gate_status)
    }
}

impl RoundSink for LedgerSink<'_> {
    fn round_completed(&mut self, round: &CompletedRound<'_>) -> Result<String, SinkError> {
        let c = self.commit(round)?;
        Ok(LedgerSink::note(&c))
    }

    fn stores_logs(&self) -> bool {
        true
    }
}
