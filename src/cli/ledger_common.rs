//! Helpers shared by the ledger verbs: opening the ledger, turning library
//! errors into messages with hints, rendering progress, parsing `REV:PATH`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use bat_ledger::{CommitId, Error, Ledger, LockMode, Progress};
use indicatif::{ProgressBar, ProgressStyle};

use super::{CliError, Globals};

/// Never set: bat relies on crash safety rather than signal handling, so an
/// interrupted command simply leaves unreferenced data for gc.
pub static NEVER_CANCEL: AtomicBool = AtomicBool::new(false);

/// Map a library error to a CLI error with a hint where one helps.
pub fn lerr(e: Error) -> CliError {
    let hint = match &e {
        Error::NotALedger { .. } => Some("run `bat init` first, or pass -C DIR / set BAT_DIR"),
        Error::UnsupportedVersion { .. } => {
            Some("use a bat build that supports this format version")
        }
        Error::AmbiguousPrefix { .. } => Some("use more hex digits"),
        Error::UnknownRevision { .. } => {
            Some("use a branch, tag, HEAD, a round id (r02), or a commit id prefix of at least 4 hex digits")
        }
        Error::Corrupt { .. } | Error::ObjectMissing { .. } => {
            Some("run `bat fsck` to list all damage")
        }
        Error::BranchMoved { .. } => Some("another process moved the branch; re-run the command"),
        Error::SymlinkEscapes { .. } => {
            Some("only relative symlinks that stay inside the committed directory can be recorded")
        }
        Error::UnsupportedFileType { .. } => {
            Some("remove or move special files out of the directory")
        }
        Error::DestinationNotEmpty { .. } => Some("check out into a new or empty directory"),
        Error::Busy { .. } => Some("wait for the other bat process to finish"),
        Error::RefNotFound { .. } => Some("list branches with `bat branch`"),
        _ => None,
    };
    let code = match &e {
        Error::Corrupt { .. }
        | Error::ObjectMissing { .. }
        | Error::Io { .. }
        | Error::Catalog { .. } => 1,
        _ => 2,
    };
    let mut c = CliError::new(e.to_string()).with_code(code);
    if let Some(h) = hint {
        c = c.with_hint(h);
    }
    c
}

/// Open the ledger found from the global start directory.
/// In a partial clone, promised files are fetched on demand with the
/// command line's remote options (`--token`, `--endpoint`, ...).
pub fn open(g: &Globals) -> Result<Ledger, CliError> {
    let mut l = Ledger::discover(&g.start_dir()).map_err(lerr)?;
    let options = crate::remote::RemoteOptions {
        include_private: false,
        net: g.net.clone(),
    };
    crate::remote::attach_promisor(&mut l, options).map_err(lerr)?;
    Ok(l)
}

/// Open with an exclusive lock (gc).
pub fn open_exclusive(g: &Globals) -> Result<Ledger, CliError> {
    Ledger::discover_with(&g.start_dir(), LockMode::Exclusive).map_err(lerr)
}

/// Resolve a revision; round ids (`r02`) name the newest round commit with
/// that id reachable from HEAD (see [`crate::round::resolve_rev`]).
pub fn resolve(l: &Ledger, rev: &str) -> Result<CommitId, CliError> {
    crate::round::resolve_rev(l, rev).map_err(|e| match e {
        crate::round::RoundError::Ledger(le) => lerr(le),
        other => CliError::new(other.to_string()),
    })
}

/// Split `REV:PATH` (PATH may be empty).
pub fn split_rev_path(s: &str) -> (&str, &str) {
    match s.split_once(':') {
        Some((r, p)) => (r, p),
        None => (s, ""),
    }
}

/// Progress bars on stderr, only when stderr is a terminal.
pub struct Bars {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// A renderer that draws only on a terminal (and never in --json mode).
    pub fn new(g: &Globals) -> Bars {
        Bars {
            enabled: !g.json && std::io::stderr().is_terminal(),
            bar: Mutex::new(None),
        }
    }
}

impl Progress for Bars {
    fn start(&self, label: &str, total: Option<u64>) {
        if !self.enabled {
            return;
        }
        let pb = match total {
            Some(t) => {
                let pb = ProgressBar::new(t);
                if let Ok(s) = ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
                ) {
                    pb.set_style(s);
                }
                pb
            }
            None => ProgressBar::new_spinner(),
        };
        pb.set_message(label.to_string());
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(pb);
        }
    }
    fn inc(&self, n: u64) {
        if let Ok(b) = self.bar.lock() {
            if let Some(pb) = b.as_ref() {
                pb.inc(n);
            }
        }
    }
    fn finish(&self) {
        if let Ok(mut b) = self.bar.lock() {
            if let Some(pb) = b.take() {
                pb.finish_and_clear();
            }
        }
    }
}

/// Absolute form of a user path (for messages).
pub fn display_path(p: &std::path::Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Short id for text output.
pub fn short(id: &impl std::fmt::Display) -> String {
    let s = id.to_string();
    s[..12.min(s.len())].to_string()
}

/// Format Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian;
/// days-from-civil inverse after H. Hinnant), without a date crate.
pub fn fmt_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::fmt_time;

    #[test]
    fn formats_utc_times() {
        assert_eq!(fmt_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_time(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(fmt_time(1_796_021_204), "2026-11-30 06:46:44 UTC");
        assert_eq!(fmt_time(-1), "1969-12-31 23:59:59 UTC");
    }
}
