//! `bat demo` journey: a fresh ledger with a verified, firewall-clean round
//! view that the ledger verbs can read back.

use assert_cmd::Command;

fn bat() -> Command {
    Command::cargo_bin("bat").expect("the bat binary is built for tests")
}

#[test]
fn demo_builds_checks_and_records_a_round_view() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("demo");
    let out = bat()
        .arg("--json")
        .arg("demo")
        .arg(&dir)
        .output()
        .expect("run demo");
    assert!(
        out.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(report["rows"], 378 * 8);
    assert_eq!(report["round_id"], "r01");
    assert_eq!(report["target_stage"], "S3");
    assert_eq!(report["firewall_violations"], 0);

    // The recorded train file is the one on disk, byte for byte, and its
    // digest is the one reported.
    let train = std::fs::read(dir.join("r01/data/train.jsonl")).expect("train file");
    let cat = bat()
        .arg("-C")
        .arg(&dir)
        .args(["cat", "HEAD:r01/data/train.jsonl"])
        .output()
        .expect("cat");
    assert!(cat.status.success());
    assert_eq!(cat.stdout, train);
    let sha = bat::contract::json::sha256_hex(&train);
    assert_eq!(report["train_sha256"], sha.as_str());

    // The view verifies with the public verb too.
    bat()
        .args(["round", "verify", "--train"])
        .arg(dir.join("r01/data/train.jsonl"))
        .arg("--manifest")
        .arg(dir.join("r01/data/manifest.json"))
        .assert()
        .success();

    bat().arg("-C").arg(&dir).arg("fsck").assert().success();
    let log = bat()
        .arg("-C")
        .arg(&dir)
        .args(["--json", "log"])
        .output()
        .expect("log");
    let log: serde_json::Value = serde_json::from_slice(&log.stdout).expect("log JSON");
    assert_eq!(log.as_array().map(Vec::len), Some(1));
    assert_eq!(log[0]["metadata"]["kind"], "bat_round_view");
    assert_eq!(log[0]["id"], report["commit"]);
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
