//! `bat stats`

use std::process::ExitCode;

use bat_ledger::GcOptions;
use clap::Args;

use super::ledger_common::{lerr, open, Bars};
use super::{print_json, CliError, CliResult, Session};
use bat::retention::{self, KeepPolicy};

/// Object counts and sizes: logical (all versions of all files) vs stored.
/// Scratch (work folders of replays and runs under .bat/replays and
/// .bat/runs) is counted apart from the stored bytes. With `--reclaimable [POLICY]`, also what `bat gc --keep POLICY` would
/// free (a dry run; POLICY defaults to promoted,last=3).
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Also show what `gc --keep POLICY` would free.
    #[arg(long, value_name = "POLICY", num_args = 0..=1,
          default_missing_value = retention::DEFAULT_POLICY)]
    pub reclaimable: Option<KeepPolicy>,
}

/// What a retention gc would free, for `bat stats --reclaimable`.
#[derive(Debug, serde::Serialize)]
struct Reclaimable {
    policy: String,
    rounds: usize,
    kept_rounds: usize,
    files: u64,
    file_bytes: u64,
    objects: u64,
    record_bytes: u64,
    rebased_records: u64,
}

/// Run `bat stats`.
pub fn run(args: StatsArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let all = retention::stats(&l).map_err(CliError::from)?;
    let (s, scratch, stale) = (&all.ledger, &all.scratch, all.stale_bytes);
    let reclaim = match &args.reclaimable {
        Some(p) => {
            let plan = retention::plan(&l, p).map_err(CliError::from)?;
            let opts = GcOptions {
                prune: plan.files.clone(),
                policy: plan.policy.clone(),
                dry_run: true,
                ..Default::default()
            };
            let rep = l.gc_with(&opts, &Bars::new(g), g.cancel()).map_err(lerr)?;
            Some(Reclaimable {
                policy: plan.policy,
                rounds: plan.rounds,
                kept_rounds: plan.kept_rounds.len(),
                files: rep.pruned_files,
                file_bytes: rep.pruned_file_bytes,
                objects: rep.dropped_objects,
                record_bytes: rep.dropped_record_bytes,
                rebased_records: rep.rebased_records,
            })
        }
        None => None,
    };
    if g.json {
        let mut v = all.to_json();
        if let Some(r) = &reclaim {
            v["reclaimable"] =
                serde_json::to_value(r).map_err(|e| CliError::internal(e.to_string()))?;
        }
        print_json(&v)?;
    } else {
        outln!("objects        {}", s.objects);
        outln!("commits        {}", s.commits);
        outln!("packs          {}", s.packs);
        outln!("logical bytes  {}", s.logical_bytes);
        outln!("unique bytes   {}", s.unique_bytes);
        outln!("stored bytes   {}", s.stored_bytes);
        outln!(
            "scratch bytes  {} (replays {}, runs {}; not part of the ledger; {} stale, `bat gc` removes them)",
            scratch.bytes(),
            scratch.replay_bytes,
            scratch.run_bytes,
            stale
        );
        outln!(
            "delta objects  {} ({} logical bytes stored in {})",
            s.delta_objects,
            s.delta_logical_bytes,
            s.delta_stored_bytes
        );
        if s.logical_bytes > 0 {
            outln!(
                "ratio          {:.3}",
                s.stored_bytes as f64 / s.logical_bytes as f64
            );
        }
        if s.pruned_files > 0 {
            outln!("pruned files   {} (fetch restores them)", s.pruned_files);
        }
        if let Some(r) = reclaim {
            outln!(
                "reclaimable    {} checkpoint files ({} bytes; {} bytes of pack records) under --keep {}: {} of {} round commits kept",
                r.files, r.file_bytes, r.record_bytes, r.policy, r.kept_rounds, r.rounds
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
