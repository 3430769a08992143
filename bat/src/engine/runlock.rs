//! The run lock, `<ledger>/run.lock`: one `bat run` (fresh or `--resume`)
//! per ledger at a time, and none while the children of an earlier one
//! still live.
//!
//! The file is a JSON object naming the holder: its pid (and the pid's
//! start time, so a reused pid is not taken for the holder), the command
//! line, when it started, and the process group of the child it is running
//! (children run in a group of their own, see
//! [`super::child::Supervision`]). It is created complete and atomically
//! (written to a temporary file, then hard-linked to `run.lock`, which fails
//! when the name exists), rewritten (temporary file + rename) when the
//! child changes, and removed when the run ends.
//!
//! A lock is *live* while its pid runs or any process of its child group
//! does (a `bat run` killed with SIGKILL leaves its child group running:
//! the lock then names that orphaned group). A lock whose processes are all
//! gone is *stale* and is taken over, and the caller is told so.
//! Liveness is read from `/proc` (Linux), else probed with signal 0.
//!
//! The child's group is known only once `spawn` returned, so a `bat run`
//! killed between the spawn and the lock update would leave a lock naming
//! no group while its trainer runs on. The lock therefore also carries a
//! token unique to the run, written before any child starts and set in
//! every child's environment as [`RUN_TOKEN_ENV`]: any process (of this
//! user) whose environment carries it keeps the lock live too, recorded
//! group or not. That scan reads `/proc/<pid>/environ` and is Linux-only;
//! elsewhere only the recorded group counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock's file name inside the ledger directory.
pub const LOCK_FILE: &str = "run.lock";

/// The environment variable that carries the run's token
/// ([`LockInfo::run_token`]) into every child of a `bat run`.
pub const RUN_TOKEN_ENV: &str = "BAT_RUN_TOKEN";

/// Who holds (or held) the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The `bat run` process.
    pub pid: u32,
    /// Its start time in clock ticks after boot (`/proc/<pid>/stat` field
    /// 22), when known: a live process with this pid but another start time
    /// is not the holder.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// The command line.
    pub command: String,
    /// Unix seconds when the run started.
    pub started_unix: u64,
    /// The process group of the child being run (trainer or evaluator),
    /// if any.
    #[serde(default)]
    pub child_pgid: Option<u32>,
    /// The child's label (`r02/trainer`).
    #[serde(default)]
    pub child_label: Option<String>,
    /// A token unique to this run (random hex), in the lock before any
    /// child starts and in every child's environment ([`RUN_TOKEN_ENV`]),
    /// so a child is found even when bat died before recording its group.
    /// `None` in locks written before the token existed.
    #[serde(default)]
    pub run_token: Option<String>,
}

impl LockInfo {
    /// A lock for this process.
    pub fn for_current_process(command: String, started_unix: u64) -> LockInfo {
        let pid = std::process::id();
        let ticks = start_ticks(pid);
        LockInfo {
            pid,
            pid_start_ticks: ticks,
            command,
            started_unix,
            child_pgid: None,
            child_label: None,
            run_token: Some(new_token(pid, ticks)),
        }
    }

    /// The environment entry that marks a child of this run, if the lock
    /// has a token.
    pub fn child_env(&self) -> Option<(&'static str, String)> {
        self.run_token.clone().map(|t| (RUN_TOKEN_ENV, t))
    }

    /// Processes carrying this run's token whose group is not the
    /// recorded (and separately reported) child group: pgid → pids.
    fn unrecorded_children(&self) -> BTreeMap<u32, Vec<u32>> {
        let Some(token) = &self.run_token else {
            return BTreeMap::new();
        };
        let mut groups = token_holders(token);
        if let Some(g) = self.child_pgid {
            groups.remove(&g);
        }
        groups
    }

    /// What of the holder still runs: `pid N`, `process group N`, and
    /// the groups of children that carry the run's token but were not
    /// recorded (bat died right after starting them).
    pub fn living(&self) -> Vec<String> {
        let mut out = Vec::new();
        if holder_alive(self.pid, self.pid_start_ticks) {
            out.push(format!("pid {}", self.pid));
        }
        if let Some(g) = self.child_pgid {
            if group_alive(g) {
                out.push(format!(
                    "process group {g}{}",
                    self.child_label
                        .as_ref()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default()
                ));
            }
        }
        for (g, pids) in self.unrecorded_children() {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            out.push(format!(
                "process group {g} (pid {}: a child of that run not yet recorded in the lock, found by its {RUN_TOKEN_ENV})",
                pids.join(", ")
            ));
        }
        out
    }

    /// The child process groups of the holder that still run: the
    /// recorded one and those found by the run's token.
    pub fn live_child_groups(&self) -> Vec<u32> {
        let mut out: Vec<u32> = self
            .child_pgid
            .filter(|g| group_alive(*g))
            .into_iter()
            .collect();
        out.extend(self.unrecorded_children().into_keys());
        out
    }
}

/// A new run token: 128 bits from the kernel's random source in hex; where
/// that cannot be read, the pid, its start time and the clock (unique as
/// well, which is all a token needs to be).
fn new_token(pid: u32, ticks: Option<u64>) -> String {
    use std::io::Read;
    let mut buf = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if random.is_ok() {
        return buf.iter().map(|b| format!("{b:02x}")).collect();
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{pid:x}-{:x}-{nanos:x}", ticks.unwrap_or(0))
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another run, or its orphaned child group, still lives.
    #[error(
        "another `bat run` holds {}: pid {} ({}), started at unix time {}; still running: {}",
        path.display(), info.pid, info.command, info.started_unix, living.join(", ")
    )]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Its content (boxed: errors stay small).
        info: Box<LockInfo>,
        /// What still runs.
        living: Vec<String>,
    },
    /// The lock file exists but cannot be read as a lock.
    #[error("{} exists but is not a run lock ({reason})", path.display())]
    Unreadable {
        /// The lock file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A file operation failed.
    #[error("cannot write or read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl bat_ledger::Diagnostic for LockError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }

    fn hint(&self) -> Option<String> {
        let LockError::Held { path, info, .. } = self else {
            return None;
        };
        let group: String = info
            .live_child_groups()
            .iter()
            .map(|g| format!("`kill -TERM -{g}` ends its child group; "))
            .collect();
        Some(format!(
            "wait for it to finish, or stop it (`kill -TERM {}` forwards to its children; {group}then retry); if you are sure nothing of it runs, `bat run --break-lock` (or removing {}) clears the lock",
            info.pid,
            path.display()
        ))
    }
}

/// A held lock; removed when dropped.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
    info: LockInfo,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LockError + '_ {
    move |source| LockError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn encode(info: &LockInfo) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(info).expect("a lock is plain data");
    b.push(b'\n');
    b
}

/// Read a lock file (`Ok(None)`: there is none).
pub fn read_lock(path: &Path) -> Result<Option<LockInfo>, LockError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| LockError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LockError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// How [`RunLock::acquire`] got the lock.
#[derive(Debug)]
pub enum Acquired {
    /// Nobody held it.
    Free,
    /// A stale lock (all its processes gone) was taken over.
    Stale(LockInfo),
    /// A live lock was broken on request (`--break-lock`).
    Broken(LockInfo),
}

impl RunLock {
    /// Take the lock of the ledger directory `dir` for `info`. A stale lock
    /// is taken over; a live one refuses unless `break_lock` is set.
    pub fn acquire(
        dir: &Path,
        info: LockInfo,
        break_lock: bool,
    ) -> Result<(RunLock, Acquired), LockError> {
        let path = dir.join(LOCK_FILE);
        let tmp = dir.join(format!("{LOCK_FILE}.{}.tmp", info.pid));
        bat_contract::fsutil::write_atomic(&tmp, &encode(&info)).map_err(io(&tmp))?;
        let result = Self::link_in(&path, &tmp, break_lock);
        let _ = std::fs::remove_file(&tmp);
        result.map(|how| (RunLock { path, info }, how))
    }

    fn link_in(path: &Path, tmp: &Path, break_lock: bool) -> Result<Acquired, LockError> {
        let mut how = Acquired::Free;
        // Two rounds at most: a lock removed (or set aside) by us is retried
        // once; anything else wins the race and we refuse.
        for _ in 0..3 {
            match std::fs::hard_link(tmp, path) {
                Ok(()) => return Ok(how),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(LockError::Io {
                        path: path.to_path_buf(),
                        source,
                    })
                }
            }
            let Some(held) = read_lock(path)? else {
                continue; // removed meanwhile
            };
            let living = held.living();
            if !living.is_empty() && !break_lock {
                return Err(LockError::Held {
                    path: path.to_path_buf(),
                    info: Box::new(held),
                    living,
                });
            }
            // Set the old lock aside under a name of our own, and check it
            // is the one judged (another process may have replaced it).
            let aside = path.with_extension(format!("lock.{}.old", std::process::id()));
            match std::fs::rename(path, &aside) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(LockError::Io {
                        path: path.to_path_buf(),
                        source,
                    })
                }
            }
            let moved = read_lock(&aside).ok().flatten();
            if moved.as_ref() != Some(&held) {
                // Not the one we judged: put it back if nobody took the name.
                let _ = std::fs::hard_link(&aside, path);
                let _ = std::fs::remove_file(&aside);
                continue;
            }
            let _ = std::fs::remove_file(&aside);
            how = if living.is_empty() {
                Acquired::Stale(held)
            } else {
                Acquired::Broken(held)
            };
        }
        match read_lock(path)? {
            Some(held) => Err(LockError::Held {
                path: path.to_path_buf(),
                living: held.living(),
                info: Box::new(held),
            }),
            None => Err(LockError::Unreadable {
                path: path.to_path_buf(),
                reason: "it keeps changing".into(),
            }),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the lock says.
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// Record the child now running (`None`: none).
    pub fn set_child(&mut self, pgid: Option<u32>, label: Option<&str>) -> Result<(), LockError> {
        self.info.child_pgid = pgid;
        self.info.child_label = label.map(str::to_string);
        bat_contract::fsutil::write_atomic(&self.path, &encode(&self.info)).map_err(io(&self.path))
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Only our own lock (a --break-lock of another run may have
        // replaced it).
        if read_lock(&self.path)
            .ok()
            .flatten()
            .is_some_and(|l| l.pid == self.info.pid)
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `/proc/<pid>/stat` split after the command name: (state, fields from
/// the state on).
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn proc_available() -> bool {
    Path::new("/proc/self/stat").is_file()
}

/// A process's start time in clock ticks after boot (Linux).
pub fn start_ticks(pid: u32) -> Option<u64> {
    // Field 22 of stat; index 19 counted from the state (field 3).
    stat_fields(&pid.to_string())?.get(19)?.parse().ok()
}

fn is_running(state: Option<&String>) -> bool {
    !matches!(state.map(String::as_str), Some("Z" | "X") | None)
}

/// Whether process `pid` runs (not a zombie), and is the one started at
/// `ticks` when that is known.
pub fn holder_alive(pid: u32, ticks: Option<u64>) -> bool {
    if !proc_available() {
        let Ok(p) = i32::try_from(pid) else {
            return false;
        };
        return nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok();
    }
    let Some(f) = stat_fields(&pid.to_string()) else {
        return false;
    };
    let same = match (ticks, f.get(19).and_then(|t| t.parse::<u64>().ok())) {
        (Some(want), Some(got)) => want == got,
        _ => true,
    };
    same && is_running(f.first())
}

/// The processes (not zombies, not this one) whose environment carries
/// `RUN_TOKEN_ENV=token`, by process group: pgid → pids. Reads
/// `/proc/<pid>/environ`, which only this user's processes let us read;
/// empty without `/proc`.
pub fn token_holders(token: &str) -> BTreeMap<u32, Vec<u32>> {
    let mut out: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    let want = format!("{RUN_TOKEN_ENV}={token}").into_bytes();
    let me = std::process::id();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Unreadable (another user's, or gone meanwhile): not ours.
        let Ok(env) = std::fs::read(format!("/proc/{name}/environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|kv| kv == want.as_slice()) {
            continue;
        }
        let Some(f) = stat_fields(&name) else {
            continue;
        };
        // Field 5 (pgrp) is index 2 counted from the state.
        match f.get(2).and_then(|g| g.parse::<u32>().ok()) {
            Some(pgid) if is_running(f.first()) => out.entry(pgid).or_default().push(pid),
            _ => {}
        }
    }
    for pids in out.values_mut() {
        pids.sort_unstable();
    }
    out
}

/// Whether any process (not a zombie) is in process group `pgid`.
pub fn group_alive(pgid: u32) -> bool {
    if !proc_available() {
        let Ok(g) = i32::try_from(pgid) else {
            return false;
        };
        return nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), None).is_ok();
    }
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return false;
    };
    let want = pgid.to_string();
    rd.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        // Field 5 (pgrp) is index 2 counted from the state.
        stat_fields(&name).is_some_and(|f| f.get(2) == Some(&want) && is_running(f.first()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pid of a process that has ended.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// The lock a `bat run` that has died (pid `dead`) left behind.
    fn old_lock(dead: u32, child_pgid: Option<u32>, run_token: Option<String>) -> LockInfo {
        LockInfo {
            pid: dead,
            pid_start_ticks: None,
            command: "bat run --old".into(),
            started_unix: 0,
            child_pgid,
            child_label: None,
            run_token,
        }
    }

    #[test]
    fn a_live_lock_refuses_and_a_stale_one_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let me = LockInfo::for_current_process("bat run".into(), 1);
        let (lock, how) = RunLock::acquire(dir.path(), me.clone(), false).unwrap();
        assert!(matches!(how, Acquired::Free));
        // This process lives: a second acquire refuses and names it.
        let err = RunLock::acquire(dir.path(), me.clone(), false).unwrap_err();
        assert!(
            err.to_string().contains(&format!("pid {}", me.pid)),
            "{err}"
        );
        drop(lock);
        assert!(!dir.path().join(LOCK_FILE).exists());
        // A lock of a process that is gone is stale.
        let dead = dead_pid();
        let old = old_lock(dead, Some(dead), None);
        std::fs::write(dir.path().join(LOCK_FILE), encode(&old)).unwrap();
        let (_lock, how) = RunLock::acquire(dir.path(), me, false).unwrap();
        assert!(matches!(how, Acquired::Stale(i) if i == old));
    }

    #[test]
    fn a_child_carrying_the_token_keeps_a_lock_without_a_group_live() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        // bat died right after the spawn: the lock names no group, but its
        // child carries the token.
        let old = old_lock(dead, None, Some(new_token(dead, None)));
        let (k, v) = old.child_env().expect("a token");
        /// Kills the orphan even when an assertion fails.
        struct Reap(std::process::Child);
        impl Drop for Reap {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let orphan = Reap({
            use std::os::unix::process::CommandExt;
            std::process::Command::new("sleep")
                .arg("30")
                .env(k, v)
                .process_group(0)
                .spawn()
                .unwrap()
        });
        let orphan_pid = orphan.0.id();
        std::fs::write(dir.path().join(LOCK_FILE), encode(&old)).unwrap();
        let me = LockInfo::for_current_process("bat run".into(), 1);
        let err = RunLock::acquire(dir.path(), me.clone(), false).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("process group {orphan_pid} (pid {orphan_pid}")),
            "{msg}"
        );
        assert_eq!(old.live_child_groups(), vec![orphan_pid]);
        drop(orphan);
        let (_lock, how) = RunLock::acquire(dir.path(), me, false).unwrap();
        assert!(matches!(how, Acquired::Stale(i) if i == old));
    }
}
