//! `bat demo` journey: a fresh ledger with a simulator BaT campaign on
//! `main`, its terminal-reward replay on a linked replay branch at the same
//! compute, and the comparison; the ledger verbs read it all back. The test
//! runs 3 rounds (a hidden flag) to keep the suite fast; the 10-round
//! default is measured in release (see README).

use assert_cmd::Command;
use serde_json::Value;

fn bat() -> Command {
    Command::cargo_bin("bat").expect("the bat binary is built for tests")
}

fn json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[test]
fn demo_runs_a_campaign_replays_it_with_terminal_reward_and_compares() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("demo");
    let report = json(
        &bat()
            .arg("--json")
            .arg("demo")
            .arg(&dir)
            .args(["--rounds", "3"])
            .output()
            .expect("run demo"),
    );
    assert_eq!(report["rounds"], 3);
    assert_eq!(report["campaign_branch"], "main");
    let branch = report["replay_branch"].as_str().expect("replay branch");
    assert!(
        branch.starts_with("replay/") && branch.ends_with("-reward-terminal"),
        "{branch}"
    );
    let cmp = &report["comparison"];
    assert_eq!(cmp["same_budget"], true, "the arms ran at the same compute");
    assert_eq!(
        cmp["a"]["base"], cmp["b"]["base"],
        "both arms start from one checkpoint"
    );
    assert_eq!(cmp["b"]["ablation"], "reward=terminal");
    for arm in ["a", "b"] {
        assert_eq!(cmp[arm]["rounds"].as_array().map(Vec::len), Some(3));
        for k in ["overall", "task", "agentic", "S1", "S2", "S3", "S4", "S5"] {
            assert!(cmp[arm]["final_scores"][k].is_f64(), "{arm} {k}");
            assert!(cmp[arm]["base"][k].is_f64(), "{arm} {k}");
        }
    }
    assert_eq!(cmp["a"]["compute"]["steps"], cmp["b"]["compute"]["steps"]);
    assert_eq!(
        cmp["a"]["compute"]["rollouts"],
        cmp["b"]["compute"]["rollouts"]
    );

    // The ledger holds both arms; the replay commits link to the originals.
    let main_log = json(
        &bat()
            .arg("-C")
            .arg(&dir)
            .args(["--json", "log", "main"])
            .output()
            .expect("log"),
    );
    let originals: Vec<&Value> = main_log
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .collect();
    assert_eq!(originals.len(), 3);
    let replay_log = json(
        &bat()
            .arg("-C")
            .arg(&dir)
            .args(["--json", "log", branch])
            .output()
            .expect("log"),
    );
    let replays = replay_log.as_array().expect("log");
    assert_eq!(replays.len(), 3);
    for (r, o) in replays.iter().zip(&originals) {
        assert_eq!(r["metadata"]["replay_of"], o["id"]);
        assert_eq!(r["metadata"]["ablation"], "reward=terminal");
        assert_eq!(r["metadata"]["budget"], o["metadata"]["budget"]);
    }

    // The next commands the demo suggests work on this ledger.
    let verify = bat()
        .arg("-C")
        .arg(&dir)
        .args(["replay", "r03", "--verify"])
        .output()
        .expect("verify");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(String::from_utf8_lossy(&verify.stdout).contains("reproduced bit for bit"));
    bat()
        .arg("-C")
        .arg(&dir)
        .args(["diff", "main", branch])
        .assert()
        .success();
    bat().arg("-C").arg(&dir).arg("fsck").assert().success();
}

#[test]
fn demo_text_names_the_ledger_the_table_and_the_next_commands() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("d");
    let out = bat()
        .arg("demo")
        .arg(&dir)
        .args(["--rounds", "2", "--batches", "10"])
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "base → final",
        "Overall",
        "agentic",
        "S5",
        "compute A:",
        "compute B:",
        "identical in both arms",
        "/.bat",
        "replay r02 --verify",
        "compare main replay/",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    // Progress went to stderr, never stdout.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("r02"), "{err}");
}

#[test]
fn demo_refuses_a_directory_that_holds_files() {
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::write(tmp.path().join("keep.txt"), b"mine").expect("write");
    let out = bat()
        .arg("demo")
        .arg(tmp.path())
        .output()
        .expect("run demo");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not empty"), "{err}");
    assert!(
        !tmp.path().join(".bat").exists(),
        "no ledger may be created"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("keep.txt")).expect("read"),
        b"mine"
    );
}
