//! Argv templates (JSON arrays of non-empty strings), whole-element
//! placeholder substitution, checking a template's placeholders before
//! anything runs, and running a child without a shell while its output is
//! streamed to an [`OutputSink`] and saved to log files.
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

use bat_contract::json::{self, Value};

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

/// A template file that `bat run` refuses before anything runs.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template file is not valid JSON.
    #[error("command template {file} is not valid JSON at line {line}, column {column}: {reason}")]
    TemplateJson {
        /// The template file.
        file: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's message.
        reason: String,
    },
    /// The template file is JSON but not an array of non-empty strings.
    #[error("command template {file} is not valid: {reason}")]
    TemplateShape {
        /// The template file.
        file: String,
        /// What is wrong (with the argv position).
        reason: String,
    },
    /// An element looks like a placeholder but is not one of the template's.
    #[error(
        "{kind} template {file}: argv[{position}] is {element}, which is not a {kind} placeholder{}; known: {}",
        suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default(),
        known.join(" ")
    )]
    UnknownPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// 0-based argv position.
        position: usize,
        /// The element.
        element: String,
        /// The closest known placeholder.
        suggestion: Option<String>,
        /// Every placeholder the template may use.
        known: Vec<String>,
    },
    /// A placeholder inside a longer element (substitution is whole-element
    /// only, so it would reach the child literally).
    #[error(
        "{kind} template {file}: argv[{position}] {element:?} contains {placeholder}, but placeholders are replaced only as whole elements; give it its own element (e.g. [\"--flag\", \"{placeholder}\"])"
    )]
    EmbeddedPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// 0-based argv position.
        position: usize,
        /// The element.
        element: String,
        /// The placeholder found in it.
        placeholder: String,
    },
    /// A required placeholder is not used.
    #[error("{kind} template {file} lacks the required placeholder {placeholder} (required: {})", required.join(" "))]
    MissingPlaceholder {
        /// `trainer` or `evaluator`.
        kind: &'static str,
        /// The template file.
        file: String,
        /// The missing placeholder.
        placeholder: String,
        /// Every required placeholder.
        required: Vec<String>,
    },
}

impl bat_ledger::Diagnostic for TemplateError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::Usage
    }

    fn hint(&self) -> Option<String> {
        match self {
            TemplateError::UnknownPlaceholder { .. } => {
                Some("fix the template; placeholders are listed in `bat run --help`".to_string())
            }
            TemplateError::EmbeddedPlaceholder { .. } => {
                Some("fix the template; placeholders are listed in `bat run --help`".to_string())
            }
            TemplateError::MissingPlaceholder { .. } => {
                Some("fix the template; placeholders are listed in `bat run --help`".to_string())
            }
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            TemplateError::TemplateJson { .. } | TemplateError::TemplateShape { .. } => {
                Some("command_template_invalid".to_string())
            }
            _ => None,
        }
    }
}

/// Parse a command template file's bytes: a non-empty JSON array of
/// non-empty strings, otherwise `command_template_invalid`.
pub fn parse_template(bytes: &[u8]) -> Result<Vec<String>, ChildError> {
    let v = json::parse_bytes(bytes).map_err(|_| ChildError::TemplateInvalid)?;
    let items = v.as_array().ok_or(ChildError::TemplateInvalid)?;
    if items.is_empty() {
        return Err(ChildError::TemplateInvalid);
    }
    items
        .iter()
        .map(|item| match item {
            Value::Str(s) if !s.is_empty() => Ok(s.clone()),
            _ => Err(ChildError::TemplateInvalid),
        })
        .collect()
}

/// [`parse_template`] with the file named in every error, JSON syntax
/// errors located by line and column and shape errors by argv position.
pub fn parse_template_file(file: &str, bytes: &[u8]) -> Result<Vec<String>, TemplateError> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| TemplateError::TemplateJson {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            reason: e.to_string(),
        })?;
    let shape = |reason: String| TemplateError::TemplateShape {
        file: file.to_string(),
        reason,
    };
    let items = v
        .as_array()
        .ok_or_else(|| shape("not a JSON array of strings".into()))?;
    if items.is_empty() {
        return Err(shape("the array is empty (argv[0] is the program)".into()));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            serde_json::Value::String(s) if !s.is_empty() => Ok(s.clone()),
            serde_json::Value::String(_) => Err(shape(format!("argv[{i}] is an empty string"))),
            other => Err(shape(format!("argv[{i}] is {other}, not a string"))),
        })
        .collect()
}

/// Which template a placeholder check is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateKind {
    /// `--trainer`.
    Trainer,
    /// `--evaluator`.
    Evaluator,
}

/// The trainer's placeholders (`{reward_mode}` is `stage` or `terminal`).
pub const TRAINER_PLACEHOLDERS: [&str; 9] = [
    "{checkpoint}",
    "{dataset}",
    "{manifest}",
    "{output}",
    "{health}",
    "{round_id}",
    "{target_stage}",
    "{runtime_tool_format}",
    "{reward_mode}",
];
/// The evaluator's placeholders.
pub const EVALUATOR_PLACEHOLDERS: [&str; 4] =
    ["{checkpoint}", "{output}", "{request}", "{reward_mode}"];
/// Placeholders the trainer template must use.
pub const TRAINER_REQUIRED: [&str; 5] = [
    "{checkpoint}",
    "{dataset}",
    "{output}",
    "{health}",
    "{runtime_tool_format}",
];
/// Placeholders the evaluator template must use.
pub const EVALUATOR_REQUIRED: [&str; 3] = ["{checkpoint}", "{output}", "{request}"];

impl TemplateKind {
    /// `trainer` or `evaluator`.
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateKind::Trainer => "trainer",
            TemplateKind::Evaluator => "evaluator",
        }
    }

    /// The placeholders the loop substitutes.
    pub fn placeholders(self) -> &'static [&'static str] {
        match self {
            TemplateKind::Trainer => &TRAINER_PLACEHOLDERS,
            TemplateKind::Evaluator => &EVALUATOR_PLACEHOLDERS,
        }
    }

    /// The placeholders the template must use.
    pub fn required(self) -> &'static [&'static str] {
        match self {
            TemplateKind::Trainer => &TRAINER_REQUIRED,
            TemplateKind::Evaluator => &EVALUATOR_REQUIRED,
        }
    }
}

/// Whether `s` has a placeholder's shape: `{` lower-case letters, digits or
/// `_` `}`.
fn placeholder_shaped(s: &str) -> bool {
    s.len() > 2
        && s.starts_with('{')
        && s.ends_with('}')
        && s[1..s.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The known placeholder closest to `unknown` (shares the longest common
/// prefix or contains it), if any is plausibly meant.
fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let inner = |s: &str| s.trim_matches(['{', '}']).to_string();
    let u = inner(unknown);
    known
        .iter()
        .map(|k| {
            let k_in = inner(k);
            let prefix = u
                .bytes()
                .zip(k_in.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            let contains = k_in.contains(&u) || u.contains(&k_in);
            (
                if contains {
                    prefix.max(3) + 100
                } else {
                    prefix
                },
                *k,
            )
        })
        .filter(|(score, _)| *score >= 3)
        .max_by_key(|(score, _)| *score)
        .map(|(_, k)| k)
}

/// Check a template's placeholders before anything runs: every element of
/// placeholder shape must be one of `kind`'s or of `extra` (a campaign's own,
/// such as the simulator's `{bat}`), no known placeholder may hide inside a
/// longer element, and the required ones must all be there. `file` names the
/// template in the errors.
pub fn check_placeholders(
    kind: TemplateKind,
    file: &str,
    template: &[String],
    extra: &[&str],
) -> Result<(), TemplateError> {
    let known: Vec<&str> = kind
        .placeholders()
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect();
    for (position, element) in template.iter().enumerate() {
        if known.contains(&element.as_str()) {
            continue;
        }
        if placeholder_shaped(element) {
            return Err(TemplateError::UnknownPlaceholder {
                kind: kind.as_str(),
                file: file.to_string(),
                position,
                element: element.clone(),
                suggestion: closest(element, &known).map(str::to_string),
                known: known.iter().map(|k| k.to_string()).collect(),
            });
        }
        if let Some(p) = known.iter().find(|k| element.contains(*k)) {
            return Err(TemplateError::EmbeddedPlaceholder {
                kind: kind.as_str(),
                file: file.to_string(),
                position,
                element: element.clone(),
                placeholder: p.to_string(),
            });
        }
    }
    if let Some(missing) = kind
        .required()
        .iter()
        .find(|r| !template.iter().any(|t| t == *r))
    {
        return Err(TemplateError::MissingPlaceholder {
            kind: kind.as_str(),
            file: file.to_string(),
            placeholder: missing.to_string(),
            required: kind.required().iter().map(|r| r.to_string()).collect(),
        });
    }
    Ok(())
}

/// Replace every element that equals a placeholder (e.g. `{checkpoint}`) by
/// its value. There is no substring substitution.
pub fn expand(template: &[String], values: &[(&str, String)]) -> Vec<String> {
    template
        .iter()
        .map(|item| {
            values
                .iter()
                .find(|(k, _)| *k == item.as_str())
                .map_or_else(|| item.clone(), |(_, v)| v.clone())
        })
        .collect()
}

/// Whether every value occurs as a whole element of `argv`.
pub fn all_present(argv: &[String], required: &[&str]) -> bool {
    required.iter().all(|r| argv.iter().any(|a| a == r))
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

    #[test]
    fn templates_must_be_arrays_of_non_empty_strings() {
        assert_eq!(
            parse_template(br#"["a", "{x}"]"#).unwrap(),
            vec!["a".to_string(), "{x}".to_string()]
        );
        for bad in [&b"[]"[..], b"[\"\"]", b"[1]", b"{}", b"nope", b"\"a\""] {
            assert!(matches!(
                parse_template(bad),
                Err(ChildError::TemplateInvalid)
            ));
        }
    }

    #[test]
    fn expansion_is_whole_element_only() {
        let t: Vec<String> = ["x", "{a}", "pre{a}", "{b}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let out = expand(&t, &[("{a}", "A".into()), ("{b}", "B".into())]);
        assert_eq!(out, vec!["x", "A", "pre{a}", "B"]);
        assert!(all_present(&out, &["A", "B"]));
        assert!(!all_present(&out, &["C"]));
    }

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
    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn placeholders_are_checked_with_positions() {
        let ok = v(&[
            "t",
            "{checkpoint}",
            "{dataset}",
            "{output}",
            "{health}",
            "{runtime_tool_format}",
            "{reward_mode}",
            "{x}",
            "{\"json\": 1}",
        ]);
        check_placeholders(TemplateKind::Trainer, "t.json", &ok, &["{x}"]).unwrap();
        let mut bad = ok.clone();
        bad[6] = "{round}".into();
        let e = check_placeholders(TemplateKind::Trainer, "t.json", &bad, &[]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("t.json: argv[6] is {round}"), "{msg}");
        assert!(msg.contains("did you mean {round_id}?"), "{msg}");
        // Nothing close: no suggestion.
        bad[6] = "{zzz}".into();
        let msg = check_placeholders(TemplateKind::Trainer, "t.json", &bad, &["{x}"])
            .unwrap_err()
            .to_string();
        assert!(!msg.contains("did you mean"), "{msg}");
        let mut emb = ok.clone();
        emb[3] = "--out={output}".into();
        assert!(matches!(
            check_placeholders(TemplateKind::Trainer, "t.json", &emb, &["{x}"]),
            Err(TemplateError::EmbeddedPlaceholder { position: 3, .. })
        ));
        let ev = v(&["e", "{checkpoint}", "{output}"]);
        assert!(matches!(
            check_placeholders(TemplateKind::Evaluator, "e.json", &ev, &[]),
            Err(TemplateError::MissingPlaceholder { ref placeholder, .. }) if placeholder == "{request}"
        ));
    }

    #[test]
    fn template_files_report_line_and_column() {
        let e = parse_template_file("t.json", b"[\"a\",\n  }").unwrap_err();
        assert!(
            matches!(
                e,
                TemplateError::TemplateJson {
                    line: 2,
                    column: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e
            .to_string()
            .starts_with("command_template_invalid: t.json:2:3"));
        let e = parse_template_file("t.json", br#"["a", ""]"#).unwrap_err();
        assert!(e.to_string().contains("argv[1] is an empty string"), "{e}");
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
}
