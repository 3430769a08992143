//! What the storage benchmarks share: the rounds of a series directory,
//! CPU seconds from `/proc`, the machine's load. Included by each
//! benchmark with `#[path]`; not every one uses every function.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `bat` binary built beside the running example
/// (`target/<profile>/examples/NAME` → `target/<profile>/bat`).
pub fn bat_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .map(|p| p.join("bat"))
        .expect("target directory")
}

/// Marsaglia's xorshift64: cheap reproducible bits for generated series
/// (the seed must not be zero).
pub struct Xorshift(pub u64);

impl Xorshift {
    /// The next 64 bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

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

/// What one timed command cost: wall seconds, CPU seconds (user + system
/// of the command and every process it waited for) and peak resident set
/// size in MB (the largest of those processes' `ru_maxrss`, from
/// `wait4`), as GNU time (`/usr/bin/time`) reports them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cost {
    pub wall: f64,
    pub cpu: f64,
    pub rss_mb: f64,
}

/// Run `argv` under `/usr/bin/time` (and, with `one_core`, under
/// `taskset -c 0`, so it and its threads share one core), its stdout to
/// nowhere and its stderr to `log`; its [`Cost`], or what went wrong
/// (including a failed command's last stderr lines).
pub fn timed(argv: &[String], one_core: bool, log: &Path) -> Result<Cost, String> {
    let report = log.with_extension("time");
    let mut c = Command::new("/usr/bin/time");
    c.arg("-f").arg("%e %U %S %M").arg("-o").arg(&report);
    if one_core {
        c.args(["taskset", "-c", "0"]);
    }
    c.args(argv).stdout(std::process::Stdio::null());
    let err = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    c.stderr(err);
    let st = c.status().map_err(|e| format!("running {argv:?}: {e}"))?;
    if !st.success() {
        let tail = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(8).collect();
        return Err(format!("{argv:?} failed ({st}): {}", tail.join(" / ")));
    }
    let text =
        std::fs::read_to_string(&report).map_err(|e| format!("{}: {e}", report.display()))?;
    // GNU time may add a "Command exited ..." line first; the figures are last.
    let f: Vec<f64> = text
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    match f[..] {
        [wall, user, sys, kb] => Ok(Cost {
            wall,
            cpu: user + sys,
            rss_mb: kb / 1024.0,
        }),
        _ => Err(format!("unreadable /usr/bin/time report {text:?}")),
    }
}

/// A running process's peak RSS so far (`VmHWM`, MB) and CPU seconds
/// (user + system, all threads), from `/proc/PID`: for a server, read just
/// before stopping it.
pub fn proc_cost(pid: u32, ticks_per_s: f64) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let ticks = f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0);
    (hwm_kb / 1024.0, ticks / ticks_per_s)
}
