//! Helpers shared by the ledger verbs: opening the ledger, turning library
//! errors into messages with hints, rendering progress, parsing `REV:PATH`.

use std::path::PathBuf;
use std::sync::Mutex;

use bat_ledger::{CommitId, Error, Ledger, LockMode, Progress};
use indicatif::{ProgressBar, ProgressStyle};

use super::{CliError, Session};

/// Map a library error to a CLI error (kind and hint chosen by
/// `From<bat_ledger::Error> for CliError`).
pub fn lerr(e: Error) -> CliError {
    e.into()
}

/// Open the ledger found from the global start directory.
/// In a partial clone, promised files are fetched on demand with the
/// command line's remote options (`--token`, `--endpoint`, ...).
pub fn open(g: &Session) -> Result<Ledger, CliError> {
    let mut l = Ledger::discover(&g.start_dir()).map_err(lerr)?;
    let options = bat::remote::RemoteOptions {
        include_private: false,
        net: g.net.clone(),
    };
    bat::remote::attach_promisor(&mut l, options).map_err(lerr)?;
    Ok(l)
}

/// Open with an exclusive lock (gc).
pub fn open_exclusive(g: &Session) -> Result<Ledger, CliError> {
    Ledger::discover_with(&g.start_dir(), LockMode::Exclusive).map_err(lerr)
}

/// Resolve a revision; round ids (`r02`) name the newest round commit with
/// that id reachable from HEAD (see [`bat::round::resolve_rev`]).
pub fn resolve(l: &Ledger, rev: &str) -> Result<CommitId, CliError> {
    bat::round::resolve_rev(l, rev).map_err(|e| match e {
        bat::round::RoundError::Ledger(le) => lerr(le),
        other => other.into(),
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
    delay: Option<std::time::Duration>,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    /// A renderer that draws only on a terminal (and never in --json mode).
    pub fn new(g: &Session) -> Bars {
        Bars {
            enabled: g.progress,
            delay: g.progress_delay,
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
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
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
