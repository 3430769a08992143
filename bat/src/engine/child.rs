//! Running a child without a shell while its output is streamed to an
//! [`OutputSink`] and saved to log files.
//!
//! A sink that asks for [`Supervision`] gets its children in their own
//! process group: when the caller is interrupted ([`OutputSink::stop_signal`])
//! the signal is forwarded to the whole group, and whatever still lives after
//! the grace period is killed with SIGKILL.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// A command-template or child-process failure. (Expanding an evaluator
/// template under the contract's rules fails with
/// [`bat_contract::binding::CommandError`] instead: that one is the
/// contract's §G.4 code, this one is about running a process.)
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The template is not a JSON array of non-empty strings.
    #[error("the command template is not a JSON array of non-empty strings")]
    TemplateInvalid,
    /// The child could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// argv[0].
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Reading the child's output, writing a log or waiting failed.
    #[error("i/o error while running {program}: {source}")]
    Io {
        /// argv[0].
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The argv is empty.
    #[error("empty command")]
    Empty,
    /// The caller was interrupted: the signal was forwarded to the child's
    /// process group (and SIGKILL followed when it outlived the grace period).
    #[error("{program} stopped: {} forwarded to its process group{}", signal.as_str(), if *killed { ", SIGKILL after the grace period" } else { "" })]
    Interrupted {
        /// argv[0].
        program: String,
        /// The signal forwarded.
        signal: Signal,
        /// Whether the group had to be killed.
        killed: bool,
    },
}

impl bat_ledger::Diagnostic for ChildError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            ChildError::TemplateInvalid => Some("command_template_invalid".to_string()),
            _ => None,
        }
    }
}

/// Which output stream of a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The child's stdout.
    Stdout,
    /// The child's stderr.
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr` (also the log file extension).
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// How supervised children are stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supervision {
    /// How long a child's process group may take to end after the forwarded
    /// signal before it is killed with SIGKILL.
    pub grace: Duration,
}

/// How often a supervised child is checked for a stop request.
const POLL: Duration = Duration::from_millis(50);

/// Receives a child's output as it arrives, and (optionally) supervises it.
pub trait OutputSink {
    /// A chunk of `label`'s (e.g. `r01/trainer`) output on `stream`.
    fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]);

    /// `Some`: run each child in a process group of its own (pgid = its
    /// pid) and stop it when [`OutputSink::stop_signal`] asks. `None` (the
    /// default): the child shares the caller's group and is never stopped.
    fn supervision(&self) -> Option<Supervision> {
        None
    }

    /// The signal to forward to the running child's group, once the caller
    /// wants it stopped (checked every 50 ms while a supervised child runs).
    fn stop_signal(&self) -> Option<Signal> {
        None
    }

    /// Variables to add to each child's environment (default: none).
    fn child_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// A supervised child started; its process group id is `pgid`.
    fn child_started(&mut self, _label: &str, _pgid: u32) {}

    /// A supervised child (and its group, as far as it was stopped) ended.
    fn child_ended(&mut self, _label: &str, _pgid: u32) {}
}

/// Forwards a stop request to a child's process group, then SIGKILL after
/// the grace period.
struct Stopper {
    pgid: Pid,
    grace: Duration,
    sent: Option<(Signal, Instant)>,
    killed: bool,
}

impl Stopper {
    fn poll(&mut self, sink: &dyn OutputSink) {
        match self.sent {
            None => {
                if let Some(sig) = sink.stop_signal() {
                    // ESRCH (the group is gone already) is fine.
                    let _ = killpg(self.pgid, sig);
                    self.sent = Some((sig, Instant::now()));
                }
            }
            Some((_, at)) if !self.killed && at.elapsed() >= self.grace => {
                let _ = killpg(self.pgid, Signal::SIGKILL);
                self.killed = true;
            }
            Some(_) => {}
        }
    }

    /// After the group leader ended: members that outlive it get the rest
    /// of the grace period, then SIGKILL, so no process of a stopped child
    /// survives.
    fn finish(&mut self) {
        let Some((_, at)) = self.sent else { return };
        while !self.killed && killpg(self.pgid, None).is_ok() {
            if at.elapsed() >= self.grace {
                let _ = killpg(self.pgid, Signal::SIGKILL);
                self.killed = true;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// An [`OutputSink`] that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Discard;

impl OutputSink for Discard {
    fn output(&mut self, _label: &str, _stream: Stream, _bytes: &[u8]) {}
}

/// How one child is run.
#[derive(Debug, Clone)]
pub struct ChildSpec<'a> {
    /// Label for the sink and the log file names (`r01/trainer`).
    pub label: &'a str,
    /// The expanded argv.
    pub argv: &'a [String],
    /// Where `<label>.stdout` / `<label>.stderr` are written (created if
    /// missing); `None` keeps no logs.
    pub log_dir: Option<&'a Path>,
}

/// The result of a child run.
#[derive(Debug, Clone)]
pub struct ChildOutcome {
    /// The exit code; minus the signal number when killed by a signal.
    pub rc: i32,
    /// The log files written (stdout, stderr), if any.
    pub logs: Vec<PathBuf>,
}

/// The log files of a child (stdout, stderr; `None` when no logs are kept)
/// and their paths.
type LogFiles = (Vec<Option<std::fs::File>>, Vec<PathBuf>);

fn open_logs(spec: &ChildSpec<'_>) -> std::io::Result<LogFiles> {
    let Some(dir) = spec.log_dir else {
        return Ok((vec![None, None], Vec::new()));
    };
    let mut logs = Vec::new();
    let mut files = Vec::new();
    for stream in [Stream::Stdout, Stream::Stderr] {
        let path = dir.join(format!("{}.{}", spec.label, stream.as_str()));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        files.push(Some(std::fs::File::create(&path)?));
        logs.push(path);
    }
    Ok((files, logs))
}

/// Run a child directly (no shell) with stdin from /dev/null and the
/// caller's environment and working directory; its stdout and stderr are
/// passed to `sink` as they arrive and saved in the log folder.
pub fn run_child(
    spec: &ChildSpec<'_>,
    sink: &mut dyn OutputSink,
) -> Result<ChildOutcome, ChildError> {
    let program = spec.argv.first().ok_or(ChildError::Empty)?.clone();
    let io = |source| ChildError::Io {
        program: program.clone(),
        source,
    };
    let (mut files, logs) = open_logs(spec).map_err(io)?;
    let supervision = sink.supervision();
    if supervision.is_some() {
        if let Some(signal) = sink.stop_signal() {
            // Stopped before it started: nothing to forward to.
            return Err(ChildError::Interrupted {
                program,
                signal,
                killed: false,
            });
        }
    }
    let mut cmd = Command::new(&program);
    cmd.args(&spec.argv[1..])
        .envs(sink.child_env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if supervision.is_some() {
        // Its own group: a terminal's Ctrl-C reaches only bat, which
        // forwards it, and the whole group (the child's own children
        // included) can be signalled at once.
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|source| ChildError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut stopper = supervision.map(|s| Stopper {
        pgid: Pid::from_raw(i32::try_from(child.id()).expect("pids fit in pid_t")),
        grace: s.grace,
        sent: None,
        killed: false,
    });
    if supervision.is_some() {
        sink.child_started(spec.label, child.id());
    }
    let (tx, rx) = mpsc::channel::<(Stream, Vec<u8>)>();
    let mut readers = Vec::new();
    let pipes: [(Stream, Option<Box<dyn Read + Send>>); 2] = [
        (
            Stream::Stdout,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            Stream::Stderr,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ];
    for (stream, pipe) in pipes {
        let Some(mut pipe) = pipe else { continue };
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            let mut buf = vec![0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tx.send((stream, buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
        }));
    }
    drop(tx);
    let mut write_err = None;
    loop {
        let (stream, bytes) = match rx.recv_timeout(POLL) {
            Ok(chunk) => chunk,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(st) = stopper.as_mut() {
                    st.poll(&*sink);
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        sink.output(spec.label, stream, &bytes);
        let idx = usize::from(stream == Stream::Stderr);
        if let Some(Some(f)) = files.get_mut(idx) {
            if let Err(e) = f.write_all(&bytes) {
                write_err.get_or_insert(e);
            }
        }
    }
    for r in readers {
        let _ = r.join();
    }
    let status = match stopper.as_mut() {
        None => child.wait().map_err(io)?,
        // The child may close its output and still run: keep watching.
        Some(st) => loop {
            if let Some(status) = child.try_wait().map_err(io)? {
                break status;
            }
            st.poll(&*sink);
            std::thread::sleep(POLL);
        },
    };
    if let Some(st) = stopper.as_mut() {
        st.finish();
        sink.child_ended(spec.label, child.id());
        if let Some((signal, _)) = st.sent {
            return Err(ChildError::Interrupted {
                program,
                signal,
                killed: st.killed,
            });
        }
    }
    for f in files.iter_mut().flatten() {
        if let Err(e) = f.sync_all() {
            write_err.get_or_insert(e);
        }
    }
    if let Some(e) = write_err {
        return Err(io(e));
    }
    use std::os::unix::process::ExitStatusExt;
    let rc = status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1);
    Ok(ChildOutcome { rc, logs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<(String, Stream, Vec<u8>)>);
    impl OutputSink for Collect {
        fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]) {
            self.0.push((label.to_string(), stream, bytes.to_vec()));
        }
    }

    #[test]
    fn child_output_is_streamed_and_logged_and_rc_reported() {
        let dir = tempfile::tempdir().unwrap();
        let argv: Vec<String> = ["sh", "-c", "echo out; echo err >&2; read x || exit 3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut sink = Collect::default();
        let out = run_child(
            &ChildSpec {
                label: "r01/trainer",
                argv: &argv,
                log_dir: Some(dir.path()),
            },
            &mut sink,
        )
        .unwrap();
        // stdin is /dev/null, so `read` fails and the shell exits 3.
        assert_eq!(out.rc, 3);
        assert_eq!(
            std::fs::read(dir.path().join("r01/trainer.stdout")).unwrap(),
            b"out\n"
        );
        assert_eq!(
            std::fs::read(dir.path().join("r01/trainer.stderr")).unwrap(),
            b"err\n"
        );
        let all: Vec<u8> = sink
            .0
            .iter()
            .filter(|c| c.1 == Stream::Stdout)
            .flat_map(|c| c.2.clone())
            .collect();
        assert_eq!(all, b"out\n");
    }

    /// Asks for a stop as soon as the child started.
    struct StopAtOnce {
        started: Option<u32>,
        ended: bool,
    }
    impl OutputSink for StopAtOnce {
        fn output(&mut self, _: &str, _: Stream, _: &[u8]) {}
        fn supervision(&self) -> Option<Supervision> {
            Some(Supervision {
                grace: Duration::from_millis(300),
            })
        }
        fn stop_signal(&self) -> Option<Signal> {
            self.started.map(|_| Signal::SIGTERM)
        }
        fn child_started(&mut self, _: &str, pgid: u32) {
            self.started = Some(pgid);
        }
        fn child_ended(&mut self, _: &str, _: u32) {
            self.ended = true;
        }
    }

    #[test]
    fn a_stopped_child_group_is_signalled_then_killed() {
        // The shell ignores SIGTERM, and so does its background sleep.
        let argv = v(&["sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"]);
        let spec = ChildSpec {
            label: "x",
            argv: &argv,
            log_dir: None,
        };
        let mut sink = StopAtOnce {
            started: None,
            ended: false,
        };
        let t = Instant::now();
        let e = run_child(&spec, &mut sink).unwrap_err();
        assert!(
            matches!(
                e,
                ChildError::Interrupted {
                    signal: Signal::SIGTERM,
                    killed: true,
                    ..
                }
            ),
            "{e}"
        );
        assert!(t.elapsed() >= Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(20));
        assert!(sink.ended);
        let pgid = sink.started.expect("started");
        // SIGKILL is sent; on a loaded machine the kernel may take a moment
        // to tear the group's processes down.
        let gone = Instant::now();
        while crate::engine::runlock::group_alive(pgid) {
            assert!(
                gone.elapsed() < Duration::from_secs(10),
                "the killed group still runs"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn signals_are_negative_and_missing_programs_fail_to_spawn() {
        let argv: Vec<String> = ["sh", "-c", "kill -9 $$"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let spec = ChildSpec {
            label: "x",
            argv: &argv,
            log_dir: None,
        };
        assert_eq!(run_child(&spec, &mut Discard).unwrap().rc, -9);
        let argv = vec!["/nonexistent/bat-test-program".to_string()];
        let spec = ChildSpec {
            label: "x",
            argv: &argv,
            log_dir: None,
        };
        assert!(matches!(
            run_child(&spec, &mut Discard),
            Err(ChildError::Spawn { .. })
        ));
    }
}
