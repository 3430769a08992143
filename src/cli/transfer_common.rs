//! Helpers shared by the sharing verbs (remote, clone, fetch, pull, push,
//! bundle): opening a named remote, error hints, and progress.

use std::process::ExitCode;

use bat_ledger::remote::{Remote, RemoteConfig, RemoteError};
use bat_ledger::{Ledger, Progress};

use super::ledger_common::{lerr, Bars};
use super::{CliError, Globals};
use crate::remote::{open_remote, RemoteOptions};

/// Map a transfer error to a CLI error with a hint.
pub fn rerr(e: RemoteError) -> CliError {
    let hint = match &e {
        RemoteError::NonFastForward { .. } => {
            Some("fetch or pull first; push --force overwrites the remote branch")
        }
        RemoteError::RefMoved { .. } => Some("someone pushed meanwhile: pull, then push again"),
        RemoteError::Corrupt { .. }
        | RemoteError::Protocol { .. }
        | RemoteError::LimitExceeded { .. } => {
            Some("the peer sent data that does not verify; nothing was referenced locally")
        }
        RemoteError::MissingObject { .. } => {
            Some("the peer does not have everything its refs need; nothing was referenced locally")
        }
        RemoteError::Unsupported { .. } => Some("use a directory or bundle remote"),
        _ => None,
    };
    let mut c = match e {
        RemoteError::Ledger(le) => return lerr(le),
        other => CliError::new(other.to_string()),
    };
    if let Some(h) = hint {
        c = c.with_hint(h);
    }
    c
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
            .with_code(2)
    })?;
    let r = open_remote(&cfg.url, opts).map_err(rerr)?;
    Ok((cfg, r))
}

/// Progress for transfers: terminal bars, plus an optional per-update
/// delay for crash tests (`BAT_TEST_TRANSFER_DELAY_MS`, read only here in
/// the CLI layer) so a test can kill a transfer midway.
pub struct TransferProgress {
    bars: Bars,
    delay: Option<std::time::Duration>,
}

impl TransferProgress {
    /// Progress for the verb being run.
    pub fn new(g: &Globals) -> Self {
        let delay = std::env::var("BAT_TEST_TRANSFER_DELAY_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(std::time::Duration::from_millis);
        TransferProgress {
            bars: Bars::new(g),
            delay,
        }
    }
}

impl Progress for TransferProgress {
    fn start(&self, label: &str, total: Option<u64>) {
        self.bars.start(label, total);
    }
    fn inc(&self, n: u64) {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        self.bars.inc(n);
    }
    fn finish(&self) {
        self.bars.finish();
    }
}

/// Exit code for success.
pub fn ok() -> Result<ExitCode, CliError> {
    Ok(ExitCode::SUCCESS)
}
