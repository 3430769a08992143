//! Argv templates (JSON arrays of non-empty strings), whole-element
//! placeholder substitution, and running a child without a shell while its
//! output is streamed to an [`OutputSink`] and saved to log files.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use crate::contract::json::{self, Value};

/// A command-template or child-process failure. (Expanding an evaluator
/// template under the contract's rules fails with
/// [`crate::contract::binding::CommandError`] instead: that one is the
/// contract's §G.4 code, this one is about running a process.)
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The template file is not a JSON array of non-empty strings.
    #[error("command_template_invalid")]
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

/// Receives a child's output as it arrives.
pub trait OutputSink {
    /// A chunk of `label`'s (e.g. `r01/trainer`) output on `stream`.
    fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]);
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
    let mut logs = Vec::new();
    let mut files = Vec::new();
    if let Some(dir) = spec.log_dir {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let path = dir.join(format!("{}.{}", spec.label, stream.as_str()));
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            files.push(Some(std::fs::File::create(&path).map_err(io)?));
            logs.push(path);
        }
    } else {
        files.push(None);
        files.push(None);
    }
    let mut child = Command::new(&program)
        .args(&spec.argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ChildError::Spawn {
            program: program.clone(),
            source,
        })?;
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
    for (stream, bytes) in rx {
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
    let status = child.wait().map_err(io)?;
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
}
