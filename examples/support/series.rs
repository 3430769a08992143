//! What the storage benchmarks share: the rounds of a series directory,
//! CPU seconds from `/proc`, the machine's load. Included by each
//! benchmark with `#[path]`; not every one uses every function.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// The round directories of a series (`r00`, `r01`, ...: every
/// subdirectory, sorted) and their total size in bytes.
pub fn series_rounds(series: &Path) -> std::io::Result<(Vec<String>, u64)> {
    let mut rounds: Vec<String> = std::fs::read_dir(series)?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    rounds.sort();
    let raw = rounds
        .iter()
        .map(|r| bat_ledger::maint::dir_size(&series.join(r)))
        .sum();
    Ok((rounds, raw))
}

/// CPU seconds (user + system) used so far by the children this process
/// has waited for (`cutime + cstime` in `/proc/self/stat`): the difference
/// around one timed command is that command's CPU time, for
/// `sh -c 'zstd | tar'` the shell's, zstd's and tar's together, for a
/// restore child all of its threads. Unlike wall time it barely depends
/// on what else runs on the machine, so it compares the tools' work even
/// under load.
pub fn children_cpu(ticks_per_s: f64) -> f64 {
    stat_cpu(13) / ticks_per_s
}

/// CPU seconds (user + system) of this process so far, all threads (for
/// bat's ingest, which runs in this process).
pub fn self_cpu(ticks_per_s: f64) -> f64 {
    stat_cpu(11) / ticks_per_s
}

/// The sum of two adjacent CPU-time fields of `/proc/self/stat`, in
/// ticks, counted from field 3 (`at` 11: utime + stime; 13: cutime +
/// cstime). The command name before them is in parentheses and may hold
/// spaces, so fields are counted after its closing one.
fn stat_cpu(at: usize) -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    f.get(at).copied().unwrap_or(0.0) + f.get(at + 1).copied().unwrap_or(0.0)
}

/// Clock ticks per second of the `/proc` CPU times (`getconf CLK_TCK`).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The load averages (1, 5, 15 minutes) of `/proc/loadavg`.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
