//! What every integration test of the root package shares: the real `bat`
//! binary run with an isolated environment ([`bat`], [`BatRunner`]), a temp
//! dir to run it in ([`TestEnv`]), the simulator campaign many tests start
//! from ([`Demo`]), and the filters that make human output snapshot-stable
//! ([`snapshot_filters`]). The submodules are the helpers of one family of
//! tests each (ledger journeys, rounds, the loop, `bat run`, reports,
//! Python, S3, `bat serve`, browsers driven over the DevTools protocol).

pub mod cdp;
pub mod external;
pub mod ledger;
pub mod loop_support;
pub mod python;
pub mod report;
pub mod round;
pub mod run;
pub mod s3;
pub mod serve;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Environment variables that change what `bat` does (its session, pager,
/// colors, remotes and test delays: see `Session::from_env` in src/cli).
/// A developer's shell may set any of them; no test inherits them.
const BEHAVIOUR_VARS: [&str; 16] = [
    "BAT_DIR",
    "BAT_TOKEN",
    "BAT_PAGER",
    "PAGER",
    "NO_COLOR",
    "BAT_HTTP_CONNECT_TIMEOUT",
    "BAT_HTTP_READ_TIMEOUT",
    "BAT_TEST_TRANSFER_DELAY_MS",
    "BAT_TEST_PROGRESS_DELAY_MS",
    "BAT_TEST_CHILD_RECORD_DELAY",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// The `bat` binary cargo built for this test run.
pub fn bat_exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_bat"))
}

/// Remove [`BEHAVIOUR_VARS`] from `c`'s environment and fix the author, so
/// commits do not carry the developer's `$USER`; for commands that start
/// `bat` indirectly (a shell, `script`).
pub fn isolate(c: &mut Command) -> &mut Command {
    for k in BEHAVIOUR_VARS {
        c.env_remove(k);
    }
    c.env("BAT_AUTHOR", "tester")
}

/// `bat` in an isolated environment ([`isolate`]); a test sets what it
/// needs on top.
pub fn bat() -> Command {
    let mut c = Command::new(bat_exe());
    isolate(&mut c);
    c
}

/// [`bat`] as an `assert_cmd` command (for `.assert()` chains).
pub fn bat_assert() -> assert_cmd::Command {
    assert_cmd::Command::from_std(bat())
}

/// `bat -C DIR` ([`bat`]).
pub fn bat_in(dir: &Path) -> Command {
    let mut c = bat();
    c.arg("-C").arg(dir);
    c
}

/// `bat -C DIR ARGS`, whatever the outcome.
pub fn output<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Output {
    BatRunner::new(dir).output(args)
}

/// [`output`] with extra environment variables.
pub fn output_env(dir: &Path, envs: &[(&str, &str)], args: &[&str]) -> Output {
    let mut runner = BatRunner::new(dir);
    for (k, v) in envs {
        runner = runner.env(k, v);
    }
    runner.output(args)
}

/// `bat -C DIR ARGS` expecting success; stdout ([`BatRunner::ok`]).
pub fn ok<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> String {
    BatRunner::new(dir).ok(args)
}

/// `bat -C DIR --json ARGS` expecting success ([`BatRunner::json`]).
pub fn json<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Value {
    BatRunner::new(dir).json(args)
}

/// `bat -C DIR ARGS` expecting failure ([`BatRunner::fails`]).
pub fn fails<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> (i32, String) {
    BatRunner::new(dir).fails(args)
}

/// The text of a child's stream, for assertions and failure messages.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A child's stderr as text.
pub fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

/// A path as `&str`, for argument lists (test paths are UTF-8).
pub fn utf8(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Write `value` as compact JSON to `path`; the path.
pub fn write_json(path: &Path, value: Value) -> PathBuf {
    std::fs::write(path, serde_json::to_vec(&value).expect("serialize")).expect("write JSON");
    path.to_path_buf()
}

/// Copy the regular files and folders of `from` into `to` (created),
/// permissions kept.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's folder");
    for e in std::fs::read_dir(from).expect("read the folder to copy") {
        let e = e.expect("a folder entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy a file");
        }
    }
}

/// Panic with both streams unless the command succeeded; the output.
pub fn succeeded(out: Output) -> Output {
    assert!(
        out.status.success(),
        "status {:?}\nstdout {}\nstderr {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// The stdout of a successful command as one JSON document.
pub fn stdout_json(out: Output) -> Value {
    let out = succeeded(out);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            text(&out.stdout)
        )
    })
}

/// Runs `bat -C DIR ...` with extra environment variables: the runner of
/// the tests that work in a ledger directory.
#[derive(Clone, Debug)]
pub struct BatRunner {
    dir: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl BatRunner {
    /// A runner for the ledger (or work tree) at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> BatRunner {
        BatRunner {
            dir: dir.into(),
            env: Vec::new(),
        }
    }

    /// Set `key=value` for every command of this runner.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> BatRunner {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The directory the commands run in (`-C`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The command, to add arguments, stdin or spawn it.
    pub fn cmd(&self) -> Command {
        let mut c = bat();
        c.arg("-C").arg(&self.dir);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Run with `args`, whatever the outcome.
    pub fn output<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.cmd().args(args).output().expect("spawn bat")
    }

    /// Run expecting success; stdout.
    pub fn ok<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "bat {:?} failed ({:?}):\n{}",
            args.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
            out.status,
            text(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 stdout")
    }

    /// Run expecting failure; the exit code (-1 when killed by a signal)
    /// and stderr.
    pub fn fails<S: AsRef<OsStr>>(&self, args: &[S]) -> (i32, String) {
        let out = self.output(args);
        assert!(
            !out.status.success(),
            "bat {:?} unexpectedly succeeded:\n{}",
            args.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
            text(&out.stdout)
        );
        (out.status.code().unwrap_or(-1), text(&out.stderr))
    }

    /// Run `bat --json ARGS` expecting success; stdout as one JSON document.
    pub fn json<S: AsRef<OsStr>>(&self, args: &[S]) -> Value {
        let mut all: Vec<&OsStr> = vec![OsStr::new("--json")];
        all.extend(args.iter().map(AsRef::as_ref));
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| {
            panic!("stdout of bat {all:?} is not one JSON document ({e}): {out}")
        })
    }
}

/// A temp dir for one test, removed when dropped, with `bat` runners in it.
pub struct TestEnv {
    tmp: tempfile::TempDir,
}

impl Default for TestEnv {
    fn default() -> TestEnv {
        TestEnv {
            tmp: tempfile::tempdir().expect("a temp dir"),
        }
    }
}

impl TestEnv {
    pub fn new() -> TestEnv {
        TestEnv::default()
    }

    /// The temp dir.
    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    /// `root/rel`.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// A runner in the temp dir itself.
    pub fn bat(&self) -> BatRunner {
        BatRunner::new(self.root())
    }

    /// `bat init` a new ledger at `root/rel`; its runner.
    pub fn init_ledger(&self, rel: &str) -> BatRunner {
        let dir = self.path(rel);
        std::fs::create_dir_all(&dir).expect("create the ledger dir");
        succeeded(bat().arg("init").arg(&dir).output().expect("spawn bat"));
        BatRunner::new(dir)
    }

    /// A copy of the tree at `from` (files, folders and symlinks, modes
    /// kept) at `root/rel`.
    pub fn copy_tree(&self, from: &Path, rel: &str) -> PathBuf {
        let to = self.path(rel);
        succeeded(
            Command::new("cp")
                .arg("-a")
                .arg(from)
                .arg(&to)
                .output()
                .expect("spawn cp"),
        );
        to
    }

    /// `bat demo` into `root/rel`: a simulator campaign of `rounds` rounds
    /// and its terminal-reward replay.
    /// One seed per arm: the tests that only need a campaign and its
    /// replay stay fast (demo_cli runs the default three).
    pub fn demo(&self, rel: &str, rounds: u32) -> Demo {
        Demo::build(
            &self.path(rel),
            &["--rounds", &rounds.to_string(), "--seeds", "1"],
        )
    }
}

/// A simulator campaign made by `bat demo` (the campaign on `main`, its
/// terminal-reward replay on `replay_branch`): the ledger many tests read.
pub struct Demo {
    pub dir: PathBuf,
    pub replay_branch: String,
    /// `bat --json demo`'s report.
    pub report: Value,
}

impl Demo {
    /// `bat --json demo DIR EXTRA...`.
    pub fn build(dir: &Path, extra: &[&str]) -> Demo {
        let out = succeeded(
            bat()
                .args(["--json", "demo"])
                .arg(dir)
                .args(extra)
                .output()
                .expect("spawn bat demo"),
        );
        let report: Value = serde_json::from_slice(&out.stdout).expect("demo JSON");
        let replay_branch = report["replay_branch"]
            .as_str()
            .expect("the demo names its replay branch")
            .to_string();
        Demo {
            dir: dir.to_path_buf(),
            replay_branch,
            report,
        }
    }

    /// A runner in the demo ledger.
    pub fn bat(&self) -> BatRunner {
        BatRunner::new(&self.dir)
    }
}

/// Filters for snapshots of human output: ids, dates, wall-clock times and
/// temp paths differ per run, so they become same-width stand-ins (the
/// tables stay reviewable); byte counts move with the timestamps inside
/// round files.
pub fn snapshot_filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"\b[0-9a-f]{64}\b", "[commit or object id]"),
        (r"\b[0-9a-f]{12}\b", "xxxxxxxxxxxx"),
        (
            r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC",
            "YYYY-MM-DD hh:mm:ss UTC",
        ),
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "YYYY-MM-DD hh:mm"),
        (r"wall \d+\.\d+s?", "wall [s]"),
        (r"\d+ -> \d+ bytes \([+-]\d+\)", "N -> N bytes (±N)"),
        (r"\d+ -> \d+ bytes", "N -> N bytes"),
        (r"\d+ bytes", "N bytes"),
        (r"/tmp/[^\s]*", "[tmp]"),
    ]
}

/// Insta settings for an inline snapshot of human output: the system's temp
/// dir (wherever `TMPDIR` points), durations (`took 1.2 s`) and then
/// [`snapshot_filters`]. Bind them
/// for the test's scope: `let _s = common::snapshot_settings().bind_to_scope();`.
pub fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    let tmp = std::env::temp_dir();
    let tmp = tmp.to_string_lossy();
    let tmp = tmp.trim_end_matches('/');
    if tmp != "/tmp" {
        settings.add_filter(&format!("{}/[^\\s]*", regex_escape(tmp)), "[tmp]");
    }
    settings.add_filter(r"\b(took +)\d+(\.\d+)? s\b", "${1}[s]");
    for (regex, replacement) in snapshot_filters() {
        settings.add_filter(regex, replacement);
    }
    settings
}

/// `text` as a regular expression matching itself.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
