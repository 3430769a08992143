//! The command blocks of README.md and docs/**/*.md, run as written against
//! the `bat` this test run built, so that a doc that drifts from the binary
//! fails CI (issue 31).
//!
//! Every fenced block whose language is `sh`, `bash`, `shell` or `console`
//! must be preceded by a directive, an HTML comment readers of the rendered
//! page do not see:
//!
//! ```text
//! <!-- doctest: run -->            run in a new empty directory
//! <!-- doctest: continue -->       run where the previous block of the same file ended
//! <!-- doctest: skip REASON -->    not run here (needs a GPU, a cloud account, ...)
//! ```
//!
//! A `run` or `continue` directive may span several lines and add:
//! - `before: SHELL` — a hidden setup line run before the block (e.g. copy a
//!   fixture); `$BAT_DOC_FIXTURES` is tests/data, `$BAT_DOC_REPO` the
//!   repository root;
//! - `set NAME: SHELL` — a named placeholder: the block's `<NAME>` is
//!   replaced by what the shell expression prints when that line runs,
//!   e.g. the id in `replay/<id>-reward-terminal`;
//! - `timeout: SECONDS` (default 300).
//!
//! The block runs as one `bash -euo pipefail` script with the `bat` under
//! test first on PATH, an isolated HOME and none of bat's behaviour
//! variables. In a `console` block only the lines after `$ ` are commands.
//! A `<name>` left in a block that runs is an error: either the directive
//! sets it or the block is skipped.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bat_exe, isolate};

/// What a directive asks for.
#[derive(Debug, Clone, PartialEq)]
enum Mode {
    Run,
    Continue,
    Skip(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Directive {
    mode: Mode,
    before: Vec<String>,
    set: Vec<(String, String)>,
    timeout: Duration,
}

#[derive(Debug, Clone)]
struct Block {
    file: PathBuf,
    /// 1-based line of the opening fence.
    line: usize,
    /// The commands, joined by newlines (console prompts removed).
    script: String,
    directive: Option<Directive>,
}

const SHELL_LANGS: [&str; 4] = ["sh", "bash", "shell", "console"];
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

fn parse_directive(comment: &str) -> Result<Directive, String> {
    let body = comment
        .trim()
        .strip_prefix("<!--")
        .and_then(|s| s.strip_suffix("-->"))
        .ok_or("not an HTML comment")?
        .trim();
    let rest = body
        .strip_prefix("doctest:")
        .ok_or("not a doctest directive")?;
    let mut lines = rest.lines();
    let head = lines.next().unwrap_or("").trim();
    let (word, arg) = head.split_once(' ').unwrap_or((head, ""));
    let mode = match word {
        "run" => Mode::Run,
        "continue" => Mode::Continue,
        "skip" if !arg.trim().is_empty() => Mode::Skip(arg.trim().to_string()),
        "skip" => return Err("`skip` needs a reason".into()),
        other => return Err(format!("unknown directive `{other}` (run, continue, skip)")),
    };
    let mut d = Directive {
        mode,
        before: Vec::new(),
        set: Vec::new(),
        timeout: DEFAULT_TIMEOUT,
    };
    for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(cmd) = line.strip_prefix("before:") {
            d.before.push(cmd.trim().to_string());
        } else if let Some(secs) = line.strip_prefix("timeout:") {
            let secs: u64 = secs
                .trim()
                .parse()
                .map_err(|_| format!("bad timeout `{line}`"))?;
            d.timeout = Duration::from_secs(secs);
        } else if let Some((name, expr)) = line.strip_prefix("set ").and_then(|s| s.split_once(':'))
        {
            let name = name.trim();
            if !is_placeholder_name(name) {
                return Err(format!("bad placeholder name `{name}`"));
            }
            d.set.push((name.to_string(), expr.trim().to_string()));
        } else {
            return Err(format!(
                "unknown directive line `{line}` (before:, set NAME:, timeout:)"
            ));
        }
    }
    if matches!(d.mode, Mode::Skip(_)) && (!d.before.is_empty() || !d.set.is_empty()) {
        return Err("a skipped block takes no before:/set lines".into());
    }
    Ok(d)
}

fn is_placeholder_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// The shell blocks of one markdown text, each with the directive (if any)
/// that precedes it; blank lines may sit between the two.
fn blocks_of(file: &Path, text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut pending: Option<(usize, Result<Directive, String>)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if line.starts_with("<!-- doctest") {
            let start = i;
            let mut comment = String::new();
            loop {
                comment.push_str(lines[i]);
                comment.push('\n');
                if lines[i].contains("-->") || i + 1 == lines.len() {
                    break;
                }
                i += 1;
            }
            pending = Some((start + 1, parse_directive(&comment)));
            i += 1;
            continue;
        }
        if let Some(info) = line.strip_prefix("```") {
            let lang = info.split_whitespace().next().unwrap_or("");
            let fence_line = i + 1;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(lines[i]);
                i += 1;
            }
            i += 1;
            let directive = pending.take();
            // An untagged block of `bat`/`cargo` lines is a command block
            // too: it must not escape the check by lacking a language.
            let untagged_commands = lang.is_empty()
                && body.iter().any(|l| {
                    let l = l.trim_start();
                    l.starts_with("bat ") || l.starts_with("cargo ") || l.starts_with("$ ")
                });
            if untagged_commands {
                out.push(Block {
                    file: file.to_path_buf(),
                    line: fence_line,
                    script: String::new(),
                    directive: None,
                });
                continue;
            }
            if !SHELL_LANGS.contains(&lang) {
                if let Some((at, _)) = directive {
                    return Err(format!(
                        "{}:{at}: a doctest directive before a `{lang}` block",
                        file.display()
                    ));
                }
                continue;
            }
            let directive = match directive {
                Some((at, Err(e))) => return Err(format!("{}:{at}: {e}", file.display())),
                Some((_, Ok(d))) => Some(d),
                None => None,
            };
            out.push(Block {
                file: file.to_path_buf(),
                line: fence_line,
                script: commands(lang, &body),
                directive,
            });
            continue;
        }
        if !line.is_empty() {
            // A directive applies only to the block right after it.
            if let Some((at, _)) = pending.take() {
                return Err(format!(
                    "{}:{at}: a doctest directive not followed by a block",
                    file.display()
                ));
            }
        }
        i += 1;
    }
    Ok(out)
}

/// The commands of a block: all of it for a script, the `$ ` lines (and
/// their `\` continuations) of a console session.
fn commands(lang: &str, body: &[&str]) -> String {
    if lang != "console" {
        return body.join("\n");
    }
    let mut out = Vec::new();
    let mut continuing = false;
    for line in body {
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(cmd.to_string());
            continuing = cmd.ends_with('\\');
        } else if continuing {
            out.push(line.to_string());
            continuing = line.ends_with('\\');
        }
    }
    out.join("\n")
}

/// `<name>` placeholders left in `script`.
fn placeholders(script: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = script;
    while let Some(open) = rest.find('<') {
        rest = &rest[open + 1..];
        if let Some(close) = rest.find('>') {
            let name = &rest[..close];
            if is_placeholder_name(name) && !found.iter().any(|f| f == name) {
                found.push(name.to_string());
            }
        }
    }
    found
}

/// The script one block runs as: setup, placeholder values, the block,
/// and where it ended (for a `continue` block after it).
fn script_for(
    block: &Block,
    d: &Directive,
    start: &Path,
    cwd_file: &Path,
) -> Result<String, String> {
    let mut text = block.script.clone();
    let mut s = String::from("set -euo pipefail\n");
    s.push_str(&format!("cd {}\n", shell_quote(start)));
    for b in &d.before {
        s.push_str(b);
        s.push('\n');
    }
    // Substituted as a command substitution, so it is evaluated when the
    // line that uses it runs (the id of a branch an earlier line made).
    for (name, expr) in &d.set {
        text = text.replace(&format!("<{name}>"), &format!("$({expr})"));
    }
    let left = placeholders(&text);
    if !left.is_empty() {
        return Err(format!(
            "placeholders {} are not set by the directive (add `set NAME: SHELL` or skip the block)",
            left.iter().map(|p| format!("<{p}>")).collect::<Vec<_>>().join(" ")
        ));
    }
    s.push_str(&text);
    s.push_str(&format!("\npwd > {}\n", shell_quote(cwd_file)));
    Ok(s)
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every docs/**/*.md, in a stable order.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut dirs = vec![repo().join("docs")];
    while let Some(dir) = dirs.pop() {
        let mut entries: Vec<_> = fs::read_dir(&dir)
            .expect("docs/ is part of the repository")
            .map(|e| e.expect("readable docs entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                files.push(p);
            }
        }
    }
    files
}

struct Ran {
    ok: bool,
    report: String,
}

/// Run one script with the `bat` under test first on PATH; kill its whole
/// process group when it outlives `timeout`.
fn run_script(script: &str, home: &Path, timeout: Duration) -> Ran {
    let bin_dir = bat_exe()
        .parent()
        .expect("the bat binary lives in a directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    isolate(&mut cmd)
        .arg("-c")
        .arg(script)
        .env("PATH", path)
        .env("HOME", home)
        .env("BAT_DOC_FIXTURES", repo().join("tests/data"))
        .env("BAT_DOC_REPO", repo())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("bash runs");
    let started = Instant::now();
    let mut timed_out = false;
    // Drain the pipes on threads so a chatty block cannot fill them and stall.
    let mut out_pipe = child.stdout.take().expect("piped stdout");
    let mut err_pipe = child.stderr.take().expect("piped stderr");
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out_pipe, &mut v).ok();
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err_pipe, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for bash") {
            break status;
        }
        if started.elapsed() > timeout {
            timed_out = true;
            let _ = Command::new("kill")
                .arg("-9")
                .arg(format!("-{}", child.id()))
                .status();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = out_t.join().expect("stdout reader");
    let err = err_t.join().expect("stderr reader");
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(25)..].join("\n")
    };
    Ran {
        ok: status.success() && !timed_out,
        report: format!(
            "{}exit: {status}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
            if timed_out { "TIMED OUT\n" } else { "" },
            tail(&out),
            tail(&err)
        ),
    }
}

/// Run the blocks of one file in order; failures as messages.
fn run_file(
    blocks: &[Block],
    scratch: &Path,
    counts: &mut BTreeMap<&'static str, usize>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut cwd: Option<PathBuf> = None;
    for (n, block) in blocks.iter().enumerate() {
        let at = format!(
            "{}:{}",
            block
                .file
                .strip_prefix(repo())
                .unwrap_or(&block.file)
                .display(),
            block.line
        );
        let Some(d) = &block.directive else {
            failures.push(format!(
                "{at}: a command block without a directive (and a language: ```sh); add `<!-- doctest: run -->`, `continue` or `skip REASON` before it"
            ));
            continue;
        };
        let start = match &d.mode {
            Mode::Skip(_) => {
                *counts.entry("skipped").or_default() += 1;
                continue;
            }
            Mode::Run => {
                let dir = scratch.join(format!("block-{n}"));
                fs::create_dir_all(&dir).expect("scratch dir");
                dir
            }
            Mode::Continue => match &cwd {
                Some(dir) => dir.clone(),
                None => {
                    failures.push(format!(
                        "{at}: `continue` with no block run before it in this file"
                    ));
                    continue;
                }
            },
        };
        let cwd_file = scratch.join("cwd");
        let script = match script_for(block, d, &start, &cwd_file) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{at}: {e}"));
                continue;
            }
        };
        let home = scratch.join("home");
        fs::create_dir_all(&home).expect("home dir");
        let ran = run_script(&script, &home, d.timeout);
        *counts.entry("run").or_default() += 1;
        if ran.ok {
            let ended = fs::read_to_string(&cwd_file).expect("the script records where it ended");
            cwd = Some(PathBuf::from(ended.trim()));
        } else {
            cwd = None;
            failures.push(format!(
                "{at}: the block failed\n--- script\n{}\n{}",
                block.script, ran.report
            ));
        }
    }
    failures
}

#[test]
fn every_shell_block_of_the_docs_runs_or_says_why_not() {
    let mut failures = Vec::new();
    let mut counts = BTreeMap::new();
    let scratch = tempfile::tempdir().expect("temp dir");
    for (i, file) in doc_files().iter().enumerate() {
        let text = fs::read_to_string(file).expect("readable doc");
        match blocks_of(file, &text) {
            Ok(blocks) => {
                let dir = scratch.path().join(format!("doc-{i}"));
                failures.extend(run_file(&blocks, &dir, &mut counts));
            }
            Err(e) => failures.push(e),
        }
    }
    eprintln!("doc blocks: {counts:?}");
    assert!(
        failures.is_empty(),
        "{} doc block problem(s):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // The runner must have run something, or a parsing slip would pass vacuously.
    assert!(
        counts.get("run").copied().unwrap_or(0) >= 10,
        "too few blocks ran: {counts:?}"
    );
}

#[test]
fn directives_and_console_prompts_parse() {
    let md = "intro\n\n<!-- doctest: run\nbefore: mkdir x\nset id: echo 42\ntimeout: 9\n-->\n\n```sh\nbat log <id>\n```\n\n\
              <!-- doctest: skip needs a GPU -->\n```console\n$ bat run \\\n  --rounds 2\noutput line\n$ bat log\n```\n\n```json\n{}\n```\n";
    let blocks = blocks_of(Path::new("x.md"), md).expect("parses");
    assert_eq!(blocks.len(), 2);
    let d = blocks[0].directive.clone().expect("directive");
    assert_eq!(d.mode, Mode::Run);
    assert_eq!(d.before, vec!["mkdir x"]);
    assert_eq!(d.set, vec![("id".to_string(), "echo 42".to_string())]);
    assert_eq!(d.timeout, Duration::from_secs(9));
    assert_eq!(blocks[0].line, 9);
    assert_eq!(blocks[1].script, "bat run \\\n  --rounds 2\nbat log");
    assert_eq!(
        blocks[1].directive.clone().expect("skip").mode,
        Mode::Skip("needs a GPU".into())
    );
    let s = script_for(&blocks[0], &d, Path::new("/s"), Path::new("/c")).expect("placeholders set");
    assert!(s.contains("bat log $(echo 42)"), "{s}");
}

#[test]
fn malformed_directives_are_refused() {
    for md in [
        "<!-- doctest: skip -->\n```sh\nbat log\n```\n",
        "<!-- doctest: sometimes -->\n```sh\nbat log\n```\n",
        "<!-- doctest: run -->\n\ntext between\n```sh\nbat log\n```\n",
        "<!-- doctest: run -->\n```json\n{}\n```\n",
        "<!-- doctest: run\nunknown line\n-->\n```sh\nbat log\n```\n",
    ] {
        assert!(blocks_of(Path::new("x.md"), md).is_err(), "accepted: {md}");
    }
    let b = blocks_of(
        Path::new("x.md"),
        "<!-- doctest: run -->\n```sh\nbat show <hash>\n```\n",
    )
    .expect("parses");
    let d = b[0].directive.clone().expect("directive");
    let e = script_for(&b[0], &d, Path::new("/s"), Path::new("/c")).expect_err("unset placeholder");
    assert!(e.contains("<hash>"), "{e}");
}
