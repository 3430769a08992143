//! The after-round hook (`bat run --on-round T.json`): an argv template run
//! once each round commit is durable, e.g. to mirror the round to a
//! tracker. It never undoes or blocks the commit: a hook that cannot start,
//! exits non-zero or outlives its timeout (its process group is killed) is
//! reported in the round's progress note and in `on-round.json` beside the
//! run's child logs (`<log dir>/<round>/`), with its output in
//! `on-round.stdout` / `on-round.stderr` there; the campaign goes on.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::rounds::{CompletedRound, LedgerSink, RoundSink, SinkError};
use super::template::{self, TemplateError};

/// The placeholders of an on-round template.
pub const HOOK_PLACEHOLDERS: [&str; 4] = ["{commit}", "{round_id}", "{branch}", "{ledger}"];

/// The default time a hook may run before its process group is killed.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Check an on-round template's placeholders (none is required).
pub fn check_hook_template(file: &str, argv: &[String]) -> Result<(), TemplateError> {
    template::check_known("on-round", file, argv, &HOOK_PLACEHOLDERS, &[])
}

/// A checked on-round template and how it runs.
#[derive(Debug, Clone)]
pub struct RoundHook {
    /// The argv template.
    pub argv: Vec<String>,
    /// How long the hook may run before it is killed.
    pub timeout: Duration,
    /// Where `<round>/on-round.*` go (the run's log dir); `None`: output
    /// is discarded and nothing is written.
    pub log_dir: Option<PathBuf>,
}

/// How a hook run ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum HookStatus {
    /// Exit status 0.
    Succeeded,
    /// A non-zero exit (negative: killed by that signal).
    Failed {
        /// The exit code.
        rc: i32,
    },
    /// Still running at the timeout: its process group was killed.
    TimedOut {
        /// The timeout, in seconds.
        timeout_seconds: f64,
    },
    /// It could not be started (or its log could not be written).
    NotStarted {
        /// Why.
        reason: String,
    },
}

/// One hook run, as logged in `on-round.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HookRun {
    /// The round.
    pub round_id: String,
    /// The round commit the hook was given.
    pub commit: String,
    /// The argv it ran.
    pub argv: Vec<String>,
    /// How it ended.
    #[serde(flatten)]
    pub status: HookStatus,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl HookRun {
    /// Whether the hook succeeded.
    pub fn succeeded(&self) -> bool {
        self.status == HookStatus::Succeeded
    }

    /// A short sentence for the round's progress note.
    pub fn describe(&self) -> String {
        match &self.status {
            HookStatus::Succeeded => "on-round hook succeeded".to_string(),
            HookStatus::Failed { rc } => {
                format!("on-round hook FAILED with exit status {rc} (the round stays committed)")
            }
            HookStatus::TimedOut { timeout_seconds } => format!(
                "on-round hook TIMED OUT after {timeout_seconds}s and was killed (the round stays committed)"
            ),
            HookStatus::NotStarted { reason } => {
                format!("on-round hook could not run: {reason} (the round stays committed)")
            }
        }
    }
}

/// What a hook is told about the round.
#[derive(Debug, Clone)]
pub struct HookValues<'a> {
    /// The round commit id.
    pub commit: &'a str,
    /// The round id.
    pub round_id: &'a str,
    /// The branch the round went to.
    pub branch: &'a str,
    /// The directory holding the ledger (what `bat -C` takes).
    pub ledger: &'a Path,
}

impl RoundHook {
    /// Run the hook for one round and log the outcome (see the module
    /// docs). Never fails: every failure is in the returned status.
    pub fn run(&self, v: &HookValues<'_>) -> HookRun {
        let values = [
            ("{commit}", v.commit.to_string()),
            ("{round_id}", v.round_id.to_string()),
            ("{branch}", v.branch.to_string()),
            ("{ledger}", v.ledger.to_string_lossy().into_owned()),
        ];
        let argv = template::expand(&self.argv, &values);
        let started = Instant::now();
        let dir = self.log_dir.as_ref().map(|d| d.join(v.round_id));
        let status = self
            .spawn_and_wait(&argv, dir.as_deref())
            .unwrap_or_else(|reason| HookStatus::NotStarted { reason });
        let run = HookRun {
            round_id: v.round_id.to_string(),
            commit: v.commit.to_string(),
            argv,
            status,
            seconds: started.elapsed().as_secs_f64(),
        };
        if let Some(dir) = dir {
            // The log is a record for the user, not part of the round:
            // failing to write it must not fail the campaign either.
            if let Ok(text) = serde_json::to_string_pretty(&run) {
                let _ = bat_contract::fsutil::write_atomic(
                    &dir.join("on-round.json"),
                    format!("{text}\n").as_bytes(),
                );
            }
        }
        run
    }

    fn spawn_and_wait(&self, argv: &[String], dir: Option<&Path>) -> Result<HookStatus, String> {
        let (program, args) = argv.split_first().ok_or("the template is empty")?;
        let out = |stream: &str| -> Result<Stdio, String> {
            let Some(dir) = dir else {
                return Ok(Stdio::null());
            };
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let p = dir.join(format!("on-round.{stream}"));
            std::fs::File::create(&p)
                .map(Stdio::from)
                .map_err(|e| format!("cannot write {}: {e}", p.display()))
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out("stdout")?)
            .stderr(out("stderr")?)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            match child.try_wait() {
                Ok(Some(st)) => {
                    return Ok(match exit_code(st) {
                        0 => HookStatus::Succeeded,
                        rc => HookStatus::Failed { rc },
                    })
                }
                Ok(None) if Instant::now() >= deadline => {
                    let pgid = i32::try_from(child.id()).map_err(|e| e.to_string())?;
                    // The whole group: a shell hook's own children too.
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                    let _ = child.wait();
                    return Ok(HookStatus::TimedOut {
                        timeout_seconds: self.timeout.as_secs_f64(),
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(format!("cannot wait for {program}: {e}")),
            }
        }
    }
}

fn exit_code(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().or_else(|| st.signal().map(|s| -s)).unwrap_or(-1)
}

/// The directory holding the ledger dir `dir` (`X` for `X/.bat`).
pub fn ledger_root(dir: &Path) -> PathBuf {
    match (dir.file_name(), dir.parent()) {
        (Some(n), Some(p)) if n == ".bat" => p.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// A [`LedgerSink`] that runs a [`RoundHook`] after every round commit.
pub struct HookSink<'l> {
    /// Commits the rounds.
    pub inner: LedgerSink<'l>,
    /// The hook.
    pub hook: RoundHook,
    /// Every hook run so far, in order.
    pub runs: Vec<HookRun>,
}

impl RoundSink for HookSink<'_> {
    fn round_completed(&mut self, round: &CompletedRound<'_>) -> Result<String, SinkError> {
        let c = self.inner.commit(round)?;
        let note = LedgerSink::note(&c);
        let commit = c.commit.to_string();
        let branch = c
            .refname
            .strip_prefix("refs/heads/")
            .unwrap_or(&c.refname)
            .to_string();
        let ledger = ledger_root(self.inner.ledger.dir());
        let run = self.hook.run(&HookValues {
            commit: &commit,
            round_id: round.round_id,
            branch: &branch,
            ledger: &ledger,
        });
        let note = format!("{note}; {}", run.describe());
        self.runs.push(run);
        Ok(note)
    }

    fn stores_logs(&self) -> bool {
        self.inner.stores_logs()
    }
}
