//! `bat revert REV [-m MSG] [--branch B]`: undo a round's promotion.

use std::process::ExitCode;

use clap::Args;

use super::ledger_common::{open, short};
use super::{print_json, CliResult, Session};
use bat::round::revert_round;

/// Add a commit that undoes REV's promotion: `refs/promoted/<branch>` and
/// the next round's starting checkpoint go back to REV's baseline (the
/// round promoted before REV, or the initial checkpoint). History keeps
/// both REV and the revert.
#[derive(Debug, Args)]
pub struct RevertArgs {
    /// The promoted round to undo (a round id such as r03, looked up on the
    /// branch, or any revision).
    pub rev: String,
    /// Commit message (default: derived).
    #[arg(short = 'm', long = "message")]
    pub message: Option<String>,
    /// The branch whose promotion is undone (default: the current branch).
    #[arg(long)]
    pub branch: Option<String>,
    /// Author (default: $BAT_AUTHOR, else $USER, else "unknown").
    #[arg(long)]
    pub author: Option<String>,
}

/// Run `bat revert`.
pub fn run(args: RevertArgs, g: &Session) -> CliResult {
    let author = g.author(args.author.as_deref());
    let mut l = open(g)?;
    let out = revert_round(
        &mut l,
        &args.rev,
        args.branch.as_deref(),
        &author,
        args.message.as_deref(),
    )?;
    if g.json {
        print_json(&serde_json::json!({
            "commit": out.commit,
            "reverts": out.reverted,
            "reverts_round_id": out.reverted_round_id,
            "branch": out.branch,
            "restored_commit": out.restored.as_ref().map(|p| p.commit),
            "restored_round_id": out.restored.as_ref().map(|p| p.round_id.clone()),
            "starting_checkpoint_sha256": out.starting_checkpoint_sha256,
        }))?;
    } else {
        outln!(
            "[{} {}] reverted promotion of round {}; promoted is now {}",
            out.branch,
            short(&out.commit),
            out.reverted_round_id,
            out.restored
                .as_ref()
                .map(|p| format!("round {} ({})", p.round_id, short(&p.commit)))
                .unwrap_or_else(|| "the initial checkpoint".into())
        );
    }
    Ok(ExitCode::SUCCESS)
}
