//! Human output of the reading verbs, reviewed as insta snapshots
//! (`tests/snapshots/`): `log`, `show`, `diff`, `compare` on a 3-round
//! `bat demo` ledger. Commit ids, dates and wall-clock times differ per run,
//! so the snapshots redact them; the scores, stages, gate decisions and
//! compute counts come from the seeded simulator and are compared as they
//! are. Also: `--color`, `NO_COLOR`, the pager (through a pseudo-terminal
//! made by util-linux `script`), `bat completion` and `bat man`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::{self, bat, Demo};

/// One demo ledger for every test of this file (kept until the process
/// ends: the temp dir is leaked on purpose, it is removed with /tmp).
fn demo() -> &'static Demo {
    static DEMO: OnceLock<Demo> = OnceLock::new();
    DEMO.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir").keep().join("demo");
        Demo::build(&dir, &["--rounds", "3", "--batches", "2"])
    })
}

/// The replay branch the demo made (its name holds a commit id).
fn replay_branch() -> String {
    demo().replay_branch.clone()
}

fn run_env(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut runner = demo().bat();
    for (k, v) in env {
        runner = runner.env(k, v);
    }
    runner.ok(args)
}

fn run(args: &[&str]) -> String {
    run_env(args, &[])
}

/// Snapshot `text` with the per-run parts redacted, as
/// `tests/snapshots/terminal_cli__NAME.snap` (the name this file had as a
/// test binary of its own).
fn snap(name: &str, text: &str) {
    insta::with_settings!({
        filters => common::snapshot_filters(),
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(format!("terminal_cli__{name}"), text);
    });
}

#[test]
fn log_table_snapshot() {
    snap("log", &run(&["log"]));
}

#[test]
fn log_help_snapshot() {
    let out = common::succeeded(bat().args(["log", "--help"]).output().expect("run"));
    insta::assert_snapshot!(common::text(&out.stdout), @r"
        Show history

        Usage: bat log [OPTIONS] [REV]

        Arguments:
          [REV]
                  Where to start (default HEAD)

        Options:
          -C <DIR>
                  Find the ledger from DIR (walking up from there) instead of from the current directory. Overrides the BAT_DIR environment variable. Other paths, given or printed, stay relative to the current working directory (unlike `git -C`)

          -n <N>
                  Show at most N commits

              --graph
                  Draw the history's lanes (merges, forks) as ASCII art on the left

              --json
                  Print exactly one JSON document on stdout instead of text

              --all
                  Show the history of every branch (all arms of a campaign) in one walk, instead of REV's; with --graph, each branch is a lane

              --token <TOKEN>
                  Token for http(s):// remotes (clone/fetch/pull/push, and the files a partial clone fetches on demand). Overrides the BAT_TOKEN environment variable

              --endpoint <URL>
                  Endpoint URL for s3:// remotes. Overrides AWS_ENDPOINT_URL; the region and credentials come from AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN

              --color <WHEN>
                  Color the output: auto (when stdout is a terminal and NO_COLOR is unset), always, never

                  Possible values:
                  - auto:   Color when stdout is a terminal and `NO_COLOR` is unset or empty
                  - always: Always color (overrides `NO_COLOR`, as an explicit flag should)
                  - never:  Never color
                  
                  [default: auto]

              --no-pager
                  Do not send long output (log, show, diff) through the pager (BAT_PAGER, else PAGER, else `less -FRX`; used only on a terminal)

          -h, --help
                  Print help (see a summary with '-h')
        ");
}

#[test]
fn unknown_revision_error_snapshot() {
    let (code, err) = demo().bat().fails(&["show", "no-such-branch"]);
    insta::assert_snapshot!(format!("exit {code}\n{err}"), @r#"
        exit 2
        error: unknown revision "no-such-branch"
        hint: use a branch, tag, HEAD, a round id (r02), or a commit id prefix of at least 4 hex digits
        "#);
}

#[test]
fn log_graph_is_one_lane_on_a_linear_history() {
    let text = run(&["log", "--graph"]);
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "3 rounds:\n{text}");
    for r in &rows {
        assert!(r.starts_with("* "), "{r}");
    }
    snap("log_graph", &text);
}

#[test]
fn show_snapshot() {
    let text = run(&["show"]);
    // The summary, not the 5 KB metadata document on one line.
    assert!(text.lines().all(|l| l.len() < 200), "{text}");
    snap("show", &text);
    let full = run(&["show", "--metadata"]);
    assert!(full.contains("\"round_id\": \"r03\""));
}

#[test]
fn diff_snapshot() {
    snap("diff", &run(&["diff", "main~1", "main"]));
}

#[test]
fn compare_snapshot() {
    snap("compare", &run(&["compare", "main", &replay_branch()]));
}

#[test]
fn log_json_has_no_colors_and_is_one_document() {
    let text = run_env(&["--color", "always", "--json", "log"], &[]);
    assert!(!text.contains('\u{1b}'));
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v.as_array().map(Vec::len), Some(3));
}

#[test]
fn color_always_emits_ansi_and_never_or_no_color_do_not() {
    for args in [&["log"][..], &["show"], &["compare", "main", "main"]] {
        let mut with = vec!["--color", "always"];
        with.extend_from_slice(args);
        assert!(run(&with).contains("\u{1b}["), "{args:?}");
        let mut without = vec!["--color", "never"];
        without.extend_from_slice(args);
        assert!(!run(&without).contains('\u{1b}'), "{args:?}");
        // auto: not a terminal here, and NO_COLOR on top.
        assert!(!run_env(args, &[("NO_COLOR", "1")]).contains('\u{1b}'));
    }
}

/// A pager script that leaves a marker file and passes its input on.
fn pager_script(dir: &Path) -> (PathBuf, PathBuf) {
    let marker = dir.join("pager-ran");
    let script = dir.join("pager.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()),
    )
    .expect("write pager script");
    (script, marker)
}

#[test]
fn no_pager_when_stdout_is_not_a_terminal() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (script, marker) = pager_script(tmp.path());
    let cmd = format!("sh {}", script.display());
    let text = run_env(&["log"], &[("BAT_PAGER", &cmd)]);
    assert!(text.contains("r03"));
    assert!(!marker.exists(), "the pager ran although stdout is a pipe");
}

/// Run `bat ARGS` on a pseudo-terminal (util-linux `script`); `None`
/// when `script` is not installed.
fn on_tty(args: &str, pager: &str) -> Option<String> {
    if which("script").is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "util-linux `script` is required under CI=true"
        );
        eprintln!("skipped: util-linux `script` is not installed");
        return None;
    }
    let line = format!(
        "{} -C {} {args}",
        common::bat_exe().display(),
        demo().dir.display()
    );
    let out = common::isolate(&mut std::process::Command::new("script"))
        .args(["-qec", &line, "/dev/null"])
        .env("BAT_PAGER", pager)
        .output()
        .expect("run script");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

#[test]
fn pager_runs_on_a_terminal_unless_no_pager() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (script, marker) = pager_script(tmp.path());
    let cmd = format!("sh {}", script.display());
    let Some(text) = on_tty("--no-pager log", &cmd) else {
        return;
    };
    assert!(text.contains("r03"));
    assert!(!marker.exists(), "--no-pager still ran the pager");
    let text = on_tty("log", &cmd).expect("script is installed");
    assert!(text.contains("r03"), "{text}");
    assert!(marker.exists(), "no pager on a terminal");
    // Colors are on by default on a terminal, through the pager too.
    assert!(text.contains("\u{1b}["));
}

#[test]
fn a_pager_that_quits_early_is_not_an_error() {
    // `head -c 1` reads one byte and exits: bat's next write fails with
    // EPIPE, which must end bat with success.
    let Some(text) = on_tty("log", "head -c 1") else {
        return;
    };
    assert!(text.len() < 64, "{text}");
}

#[test]
fn completion_lists_the_subcommands() {
    let out = bat().args(["completion", "bash"]).output().expect("run");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    for sub in ["log", "show", "diff", "compare", "completion", "man"] {
        assert!(text.contains(sub), "{sub} missing");
    }
    assert!(
        text.contains("_bat()") || text.contains("complete"),
        "not bash"
    );
}

#[test]
fn man_writes_roff_pages() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("man1");
    let out = bat().arg("man").arg("-o").arg(&dir).output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in ["bat.1", "bat-log.1", "bat-show.1", "bat-completion.1"] {
        let text = std::fs::read_to_string(dir.join(page)).expect(page);
        // clap_mangen opens with the portable quote-string definition
        // (`.ie \n(.g …`), then the title macro.
        assert!(text.starts_with('.'), "{page} is not roff");
        assert!(
            text.lines().any(|l| l.starts_with(".TH ")),
            "{page} has no .TH"
        );
        assert!(text.contains(".SH NAME"), "{page}");
    }
    let log = std::fs::read_to_string(dir.join("bat-log.1")).expect("bat-log.1");
    assert!(log.contains("graph"), "bat-log.1 lacks --graph");
    // Hidden verbs get no page.
    assert!(!dir.join("bat-sim.1").exists());
}
