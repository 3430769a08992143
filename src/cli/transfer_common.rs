//! Helpers shared by the sharing verbs (remote, clone, fetch, pull, push,
//! bundle): opening a named remote, error hints, and progress.

use std::process::ExitCode;

use bat_ledger::remote::{Remote, RemoteConfig, RemoteError};
use bat_ledger::{Ledger, Progress};

use super::ledger_common::{lerr, Bars};
use super::{CliError, Session};
use bat::remote::{filter_by_name, open_remote, RemoteOptions};

/// Map a transfer error to a CLI error (kind and hint chosen by
/// `From<RemoteError> for CliError`).
pub fn rerr(e: RemoteError) -> CliError {
    e.into()
}

/// A named remote's settings and an open connection to it.
pub fn open_named(
    l: &Ledger,
    name: &str,
    opts: &RemoteOptions,
) -> Result<(RemoteConfig, Box<dyn Remote>), CliError> {
    let cfg = l.remote_config(name).map_err(lerr)?.ok_or_else(|| {
        CliError::new(format!("no remote named {name:?}"))
            .with_hint(
                "list remotes with `bat remote list`; add one with `bat remote add NAME URL`",
            )
            .usage()
    })?;
    // The remote's stored credential, unless --token / BAT_TOKEN is given.
    let opts = RemoteOptions {
        include_private: opts.include_private,
        net: bat::remote::credentials::with_stored_token(l.dir(), name, &opts.net)?,
    };
    let r = open_remote(&cfg.url, &opts).map_err(rerr)?;
    Ok((cfg, r))
}

/// Progress for transfers: a terminal line with the bytes moved and the
/// rate (MB/s), plus an optional per-update delay for crash and interrupt
/// tests (`BAT_TEST_TRANSFER_DELAY_MS`, read into the [`Session`]) so a
/// test can stop a transfer midway. Transfers count payload bytes (the
/// stored form that crosses the wire).
pub struct TransferProgress {
    bars: Bars,
    enabled: bool,
    line: std::sync::Mutex<Option<indicatif::ProgressBar>>,
    delay: Option<std::time::Duration>,
}

impl TransferProgress {
    /// Progress for the verb being run.
    pub fn new(g: &Session) -> Self {
        TransferProgress {
            bars: Bars::new(g),
            enabled: g.progress,
            line: std::sync::Mutex::new(None),
            delay: g.transfer_delay,
        }
    }
}

/// The transfer line: label, bytes so far, rate in MB/s, elapsed time.
fn transfer_line(label: &str) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} {spinner} {decimal_bytes} at {decimal_bytes_per_sec} ({elapsed})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    pb.set_message(label.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}

impl Progress for TransferProgress {
    fn start(&self, label: &str, total: Option<u64>) {
        if total.is_some() || !self.enabled {
            return self.bars.start(label, total);
        }
        if let Ok(mut l) = self.line.lock() {
            *l = Some(transfer_line(label));
        }
    }
    fn inc(&self, n: u64) {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        if let Ok(l) = self.line.lock() {
            if let Some(pb) = l.as_ref() {
                return pb.inc(n);
            }
        }
        self.bars.inc(n);
    }
    fn finish(&self) {
        if let Ok(mut l) = self.line.lock() {
            if let Some(pb) = l.take() {
                return pb.finish_and_clear();
            }
        }
        self.bars.finish();
    }
}

/// Exit code for success.
pub fn ok() -> Result<ExitCode, CliError> {
    Ok(ExitCode::SUCCESS)
}

/// Fetch from the named remote, honouring a partial clone's filter.
pub fn fetch_named(
    l: &mut bat_ledger::Ledger,
    name: &str,
    g: &Session,
) -> Result<bat_ledger::remote::FetchOutcome, CliError> {
    let (cfg, mut remote) = open_named(
        l,
        name,
        &RemoteOptions {
            net: g.net.clone(),
            ..RemoteOptions::default()
        },
    )?;
    let filter = match (&cfg.promisor, &cfg.filter) {
        (true, Some(f)) => Some(filter_by_name(f).map_err(CliError::new)?),
        _ => None,
    };
    let p = TransferProgress::new(g);
    let out = bat_ledger::remote::transfer::fetch(l, remote.as_mut(), name, filter, &p, g.cancel())
        .map_err(rerr)?;
    // A fetched history recording a round id twice is undone and refused.
    bat::round::unique::refuse_duplicate_rounds(l, &out.refs)?;
    Ok(out)
}

/// Text report of a fetch.
pub fn print_fetch(name: &str, out: &bat_ledger::remote::FetchOutcome) -> Result<(), CliError> {
    outln!(
        "Fetched from {name}: {} objects received, {} new, {} payload bytes{}",
        out.stats.objects_received,
        out.stats.objects_stored,
        out.stats.payload_bytes,
        if out.stats.files_promised > 0 {
            format!(", {} files left on the remote", out.stats.files_promised)
        } else {
            String::new()
        }
    );
    if out.stats.files_absent > 0 {
        outln!(
            "{} files arrived marked pruned on {name} (recorded as pruned here; fetch from a remote that has them to restore them)",
            out.stats.files_absent
        );
    }
    for r in &out.refs {
        if r.status != "up to date" {
            outln!(
                "  {} -> {} ({}) {}",
                r.remote_ref,
                r.local_ref,
                r.status,
                &r.new.to_string()[..12]
            );
        }
    }
    Ok(())
}
