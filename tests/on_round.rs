//! `bat run --on-round H.json`: the hook runs after every durable round
//! commit with its placeholders substituted; a hook that fails or hangs
//! (killed after `--on-round-timeout`) is reported and logged, and in every
//! case the rounds are committed and `bat fsck` is clean. Real child
//! processes (`sh`, `sleep`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::{stderr, write_json, BatRunner, TestEnv};

/// Round commits of the current branch, oldest first: (round id, commit).
fn rounds(b: &BatRunner) -> Vec<(String, String)> {
    let log = b.json(&["log"]);
    let mut out: Vec<(String, String)> = log
        .as_array()
        .expect("log array")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .map(|e| {
            (
                e["metadata"]["round_id"]
                    .as_str()
                    .expect("round id")
                    .to_string(),
                e["id"].as_str().expect("commit id").to_string(),
            )
        })
        .collect();
    out.reverse();
    out
}

/// The `on-round.json` logs of the run, by round id.
fn hook_logs(ledger: &Path) -> Vec<Value> {
    let runs = ledger.join(".bat").join("runs");
    let mut out: Vec<Value> = Vec::new();
    for run in std::fs::read_dir(&runs).expect("runs dir") {
        let logs = run.expect("entry").path().join("logs");
        for r in ["r01", "r02"] {
            let p = logs.join(r).join("on-round.json");
            if let Ok(bytes) = std::fs::read(&p) {
                out.push(serde_json::from_slice(&bytes).expect("on-round.json is JSON"));
            }
        }
    }
    out.sort_by_key(|v| v["round_id"].as_str().unwrap_or_default().to_string());
    out
}

/// A sim campaign of two rounds with the hook `template` (extra flags
/// after it); stderr of the run.
fn run_with_hook(t: &TestEnv, template: Value, extra: &[&str]) -> (BatRunner, String, PathBuf) {
    let b = t.init_ledger("ledger");
    let hook = write_json(&t.path("hook.json"), template);
    let mut args = vec![
        "run",
        "--backend",
        "sim",
        "--rounds",
        "2",
        "--batches",
        "2",
        "--on-round",
        hook.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    let out = b.output(&args);
    let err = stderr(&out);
    assert!(out.status.success(), "bat run failed:\n{err}");
    let fsck = b.output(&["fsck"]);
    assert!(fsck.status.success(), "fsck: {}", stderr(&fsck));
    let dir = b.dir().to_path_buf();
    (b, err, dir)
}

#[test]
fn a_succeeding_hook_gets_the_round_commit_and_its_placeholders() {
    let t = TestEnv::new();
    let argv_file = t.path("argv.txt");
    let script = format!("printf '%s\\n' \"$@\" >> '{}'", argv_file.display());
    let (b, err, dir) = run_with_hook(
        &t,
        json!([
            "sh",
            "-c",
            script,
            "hook",
            "{commit}",
            "{round_id}",
            "{branch}",
            "{ledger}"
        ]),
        &[],
    );
    let committed = rounds(&b);
    assert_eq!(committed.len(), 2, "{err}");
    let lines: Vec<String> = std::fs::read_to_string(&argv_file)
        .expect("the hook wrote its argv")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 8, "{lines:?}");
    let ledger = std::fs::canonicalize(&dir).expect("ledger dir");
    for (i, (rid, commit)) in committed.iter().enumerate() {
        let got = &lines[i * 4..i * 4 + 4];
        assert_eq!(&got[0], commit, "{{commit}} of {rid}");
        assert_eq!(&got[1], rid);
        assert_eq!(got[2], "main");
        assert_eq!(
            std::fs::canonicalize(&got[3]).expect("{ledger} is a directory"),
            ledger
        );
    }
    assert!(
        err.contains("r01: committed") && err.contains("on-round hook succeeded"),
        "{err}"
    );
    let logs = hook_logs(&dir);
    assert_eq!(logs.len(), 2);
    assert!(logs.iter().all(|l| l["status"] == "succeeded"), "{logs:?}");
    assert_eq!(logs[1]["commit"], committed[1].1.as_str());
}

#[test]
fn a_failing_hook_is_reported_and_logged_and_the_rounds_stay() {
    let t = TestEnv::new();
    let (b, err, dir) = run_with_hook(
        &t,
        json!(["sh", "-c", "echo hook went wrong >&2; exit 3"]),
        &[],
    );
    assert_eq!(rounds(&b).len(), 2);
    assert!(
        err.contains("on-round hook FAILED with exit status 3"),
        "{err}"
    );
    let logs = hook_logs(&dir);
    assert_eq!(logs.len(), 2);
    for l in &logs {
        assert_eq!(l["status"], "failed");
        assert_eq!(l["rc"], 3);
    }
    let runs = dir.join(".bat").join("runs");
    let run = std::fs::read_dir(runs)
        .expect("runs")
        .next()
        .expect("one run")
        .expect("entry")
        .path();
    let log = std::fs::read_to_string(run.join("logs/r01/on-round.stderr")).expect("hook stderr");
    assert_eq!(log, "hook went wrong\n");
}

#[test]
fn a_hanging_hook_is_killed_after_the_timeout() {
    let t = TestEnv::new();
    let started = std::time::Instant::now();
    let (b, err, dir) = run_with_hook(&t, json!(["sleep", "600"]), &["--on-round-timeout", "0.5"]);
    assert_eq!(rounds(&b).len(), 2);
    assert!(err.contains("on-round hook TIMED OUT after 0.5s"), "{err}");
    let logs = hook_logs(&dir);
    assert_eq!(logs.len(), 2);
    assert!(logs.iter().all(|l| l["status"] == "timed_out"), "{logs:?}");
    // Killed, not waited for: two 600 s sleeps did not run out.
    assert!(started.elapsed().as_secs() < 300);
}

#[test]
fn an_unknown_hook_placeholder_is_refused_before_anything_runs() {
    let t = TestEnv::new();
    let b = t.init_ledger("ledger");
    let hook = write_json(&t.path("hook.json"), json!(["echo", "{comit}"]));
    let (code, err) = b.fails(&[
        "run",
        "--backend",
        "sim",
        "--rounds",
        "1",
        "--on-round",
        hook.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean {commit}?"), "{err}");
    let runs = b.dir().join(".bat").join("runs");
    assert!(
        std::fs::read_dir(&runs).map_or(true, |mut d| d.next().is_none()),
        "no campaign started"
    );
}
