//! `bat gc`

use std::process::ExitCode;

use bat_ledger::{GcOptions, Ledger, LockMode};
use clap::Args;

use super::ledger_common::{lerr, open, open_exclusive, Bars};
use super::{print_json, CliError, CliResult, Session};
use bat::retention::{self, KeepPolicy};

/// `bat gc` arguments; the command's help text is on its variant in
/// `cli/mod.rs` (clap shows that one).
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Prune checkpoint files this policy does not keep (e.g.
    /// promoted,last=3,tagged).
    #[arg(long, value_name = "POLICY")]
    pub keep: Option<KeepPolicy>,
    /// Delete reflog entries older than DURATION (now, 90s, 30m, 12h, 30d,
    /// 2w) first, so the commits only they held (deleted branches, resets)
    /// can go.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub expire_reflog: Option<u64>,
    /// Change nothing: print what would be pruned and freed.
    #[arg(long)]
    pub dry_run: bool,
    /// Leave delta chains as they are. By default gc moves the keyframe of
    /// each checkpoint piece's chain of versions to the middle of the
    /// chain, which takes the same space and halves the work of reading
    /// its deepest versions.
    #[arg(long)]
    pub keep_chains: bool,
}

fn parse_duration(s: &str) -> Result<u64, String> {
    retention::parse_duration(s).map_err(|e| e.to_string())
}

/// Run `bat gc`.
pub fn run(args: GcArgs, g: &Session) -> CliResult {
    let mut l = if args.dry_run {
        open(g)?
    } else {
        open_exclusive(g)?
    };
    let mut opts = GcOptions {
        dry_run: args.dry_run,
        keep_chains: args.keep_chains,
        ..Default::default()
    };
    if let Some(secs) = args.expire_reflog {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        // `now` expires everything written up to this second.
        opts.expire_reflog_before = Some(now.saturating_sub(secs) as i64 + i64::from(secs == 0));
    }
    let plan = match &args.keep {
        Some(p) => {
            let plan = retention::plan(&l, p).map_err(CliError::from)?;
            opts.prune = plan.files.clone();
            opts.policy = plan.policy.clone();
            Some(plan)
        }
        None => None,
    };
    let bars = Bars::new(g);
    let rep = l.gc_with(&opts, &bars, g.cancel()).map_err(|e| {
        let full = e.is_storage_full();
        let c = lerr(e);
        if full && !args.keep_chains {
            // Re-rooting writes new keyframes before the old records go.
            c.with_hint("`bat gc --keep-chains` needs less room: it only merges packs")
        } else {
            c
        }
    })?;
    // Scratch: replay work folders no replay uses any more, and the folders
    // of runs that committed nothing.
    let scratch = retention::remove_stale_scratch(&l, args.dry_run).map_err(CliError::from)?;
    let scratch_bytes: u64 = scratch.iter().map(|d| d.bytes).sum();
    if g.json {
        let mut v = serde_json::to_value(&rep).map_err(|e| CliError::internal(e.to_string()))?;
        v["scratch_removed"] =
            serde_json::to_value(&scratch).map_err(|e| CliError::internal(e.to_string()))?;
        v["scratch_removed_bytes"] = scratch_bytes.into();
        if let Some(plan) = &plan {
            v["retention"] =
                serde_json::to_value(plan).map_err(|e| CliError::internal(e.to_string()))?;
        }
        print_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let would = if rep.dry_run { "would " } else { "" };
    if let Some(plan) = &plan {
        let ids = |v: &[(String, bat_ledger::CommitId)]| {
            let mut r: Vec<&str> = v.iter().map(|x| x.0.as_str()).collect();
            r.dedup();
            r.join(" ")
        };
        outln!(
            "retention {}: {} of {} round commits keep their checkpoints ({})",
            plan.policy,
            plan.kept_rounds.len(),
            plan.rounds,
            ids(&plan.kept_rounds)
        );
        outln!(
            "{would}prune {} checkpoint files ({} bytes) of rounds {}",
            rep.pruned_files,
            rep.pruned_file_bytes,
            ids(&plan.pruned_rounds)
        );
    }
    if rep.expired_reflog_entries > 0 || args.expire_reflog.is_some() {
        outln!(
            "{would}expire {} reflog entries",
            rep.expired_reflog_entries
        );
    }
    outln!(
        "{would}drop {} objects ({} bytes of pack records); {would}re-base {} delta records",
        rep.dropped_objects,
        rep.dropped_record_bytes,
        rep.rebased_records
    );
    if rep.rerooted_trees > 0 {
        outln!(
            "{would}re-root {} delta chains at their middle ({} records re-encoded)",
            rep.rerooted_trees,
            rep.rerooted_records
        );
    }
    if !scratch.is_empty() {
        outln!(
            "{would}remove {} stale scratch folders ({} bytes): {}",
            scratch.len(),
            scratch_bytes,
            scratch
                .iter()
                .map(|d| d.path.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if !rep.dry_run {
        outln!(
            "gc: kept {} objects, removed {}, rewrote {} packs, deleted {} pack files; packs {} -> {} bytes",
            rep.kept_objects, rep.removed_objects, rep.rewritten_packs, rep.deleted_packs, rep.bytes_before, rep.bytes_after
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The automatic gc after `bat commit` and `bat run` (`bat config gc.auto`):
/// when more small packs than the threshold wait to be merged, gc as `bat
/// gc` would, with progress, if no other bat process uses the ledger (it
/// tries the exclusive lock once and otherwise leaves it to a later
/// commit). `verb` has finished and recorded its work: a failed gc is a
/// warning, an interrupted one ends the process as interrupted (the ledger
/// is unchanged, gc being crash-safe).
pub fn auto(g: &Session, verb: &str) -> Result<(), CliError> {
    let due = match open(g).and_then(|l| l.gc_auto_due().map_err(lerr)) {
        Ok(Some(due)) => due,
        Ok(None) => return Ok(()),
        Err(e) => {
            eprintln!(
                "bat {verb}: warning: cannot check whether to gc: {}",
                e.message
            );
            return Ok(());
        }
    };
    let mut l = match Ledger::discover_with(&g.start_dir(), LockMode::Exclusive) {
        Ok(l) => l,
        Err(bat_ledger::Error::Busy { .. }) => {
            eprintln!(
                "bat {verb}: auto gc skipped: another bat process is using the ledger \
                 ({} small packs, gc.auto {}; a later commit or `bat gc` merges them)",
                due.small_packs, due.limit
            );
            return Ok(());
        }
        Err(e) => {
            eprintln!("bat {verb}: warning: auto gc skipped: {}", lerr(e).message);
            return Ok(());
        }
    };
    eprintln!(
        "bat {verb}: auto gc: {} small packs, over gc.auto {} (`bat config gc.auto 0` turns this off)",
        due.small_packs, due.limit
    );
    let bars = Bars::new(g);
    match l.gc_with(&GcOptions::default(), &bars, g.cancel()) {
        Ok(rep) => {
            eprintln!(
                "bat {verb}: auto gc: rewrote {} packs, deleted {} pack files; packs {} -> {} bytes",
                rep.rewritten_packs, rep.deleted_packs, rep.bytes_before, rep.bytes_after
            );
            Ok(())
        }
        Err(bat_ledger::Error::Cancelled) => Err(CliError::interrupted(format!(
            "auto gc after bat {verb} stopped (what {verb} recorded is kept; gc changed nothing)"
        ))),
        Err(e) => {
            eprintln!(
                "bat {verb}: warning: auto gc failed (what {verb} recorded is kept): {}",
                lerr(e).message
            );
            Ok(())
        }
    }
}
