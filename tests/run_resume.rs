//! `bat run --resume` extends a finished campaign with `--rounds N`, and
//! follows the promoted ref after `bat revert`s (simulator campaigns).

use std::path::Path;

use run_support::*;

use crate::common::run as run_support;

fn sim_campaign(rounds: u32, seed: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let l = tmp.path().join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    ok(bat().arg("init").arg(&l).output().unwrap());
    ok(bat()
        .arg("-C")
        .arg(&l)
        .args(["run", "--backend", "sim", "--batches", "4"])
        .args(["--rounds", &rounds.to_string(), "--seed", &seed.to_string()])
        .output()
        .unwrap());
    (tmp, l)
}

fn resume(l: &Path, extra: &[&str]) -> std::process::Output {
    bat()
        .arg("-C")
        .arg(l)
        .args(["--json", "run", "--resume"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn resume_with_rounds_extends_a_finished_campaign() {
    let (_tmp, l) = sim_campaign(2, 3);
    assert_eq!(logged_rounds(&l).len(), 2);
    // Without --rounds a finished campaign has nothing left to run.
    ok(resume(&l, &[]));
    assert_eq!(logged_rounds(&l).len(), 2);
    // Shrinking is refused.
    let out = resume(&l, &["--rounds", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("already completed 2 rounds"),
        "{}",
        stderr(&out)
    );
    // --rounds 3 runs one more round.
    let out = ok(resume(&l, &["--rounds", "3"]));
    assert!(
        stderr(&out).contains("after round 2 of 3"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rounds"], 3);
    assert_eq!(v["history"].as_array().unwrap().len(), 3);
    let rounds = logged_rounds(&l);
    let ids: Vec<&str> = rounds
        .iter()
        .map(|r| r["round_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r03", "r02", "r01"]);
    assert_eq!(rounds[0]["loop"]["campaign"]["rounds"], 3);
    let log = ok(bat().arg("-C").arg(&l).arg("log").output().unwrap());
    assert!(String::from_utf8_lossy(&log.stdout).contains("r03"));
    fsck_ok(&l);
}

#[test]
fn resume_after_two_reverts_starts_from_the_promoted_checkpoint() {
    let (_tmp, l) = sim_campaign(4, 1);
    let rounds = logged_rounds(&l);
    // Oldest first.
    let promoted: Vec<&serde_json::Value> = rounds
        .iter()
        .rev()
        .filter(|r| r["gate_status"] == "promote")
        .collect();
    assert!(
        promoted.len() >= 2,
        "the campaign needs two promoted rounds: {:?}",
        rounds.iter().map(|r| &r["gate_status"]).collect::<Vec<_>>()
    );
    let initial_sha = rounds.last().unwrap()["trained_from_checkpoint_sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let n = promoted.len();
    for p in [promoted[n - 1], promoted[n - 2]] {
        ok(bat()
            .arg("-C")
            .arg(&l)
            .args(["revert", p["round_id"].as_str().unwrap()])
            .output()
            .unwrap());
    }
    let expected = if n >= 3 {
        promoted[n - 3]["candidate_checkpoint_sha256"]
            .as_str()
            .unwrap()
            .to_string()
    } else {
        initial_sha
    };
    let out = ok(resume(&l, &["--rounds", "5"]));
    let err = stderr(&out);
    assert!(err.contains("continuing from"), "{err}");
    let r05 = &logged_rounds(&l)[0];
    assert_eq!(r05["round_id"], "r05");
    assert_eq!(
        r05["trained_from_checkpoint_sha256"].as_str().unwrap(),
        expected,
        "r05 did not start from the promoted checkpoint"
    );
    assert_ne!(
        expected,
        promoted[n - 1]["candidate_checkpoint_sha256"]
            .as_str()
            .unwrap()
    );
    fsck_ok(&l);
}
