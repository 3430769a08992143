//! Bad round directories are refused before anything is written, with the
//! failed check and the file named.

use std::path::Path;

use round_common::*;

use crate::common::round as round_common;

/// Commit r01 and expect a refusal naming `check` and `file`.
fn refused(c: &Campaign, check: &str, file: &str, extra: &[&str]) -> String {
    let out = bat(&c.ledger)
        .args(["commit", "--no-code-repo"])
        .arg(c.round("r01"))
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "expected a refusal: {err}");
    assert!(
        err.contains(&format!("`{check}`")),
        "check {check} not named: {err}"
    );
    assert!(err.contains(file), "file {file} not named: {err}");
    assert!(err.contains("hint:"), "no hint: {err}");
    // Nothing was written.
    let log = bat(&c.ledger).args(["--json", "log"]).output().unwrap();
    let empty = !log.status.success()
        || serde_json::from_slice::<serde_json::Value>(&log.stdout)
            .map(|v| v.as_array().is_some_and(|a| a.is_empty()))
            .unwrap_or(false);
    assert!(empty, "a refused round left a commit");
    assert!(!c.ledger.join(".bat/private").exists());
    bat(&c.ledger)
        .args(["show", "refs/promoted/main"])
        .assert()
        .failure();
    err
}

fn edit(p: &Path, f: impl FnOnce(String) -> String) {
    let s = std::fs::read_to_string(p).unwrap();
    std::fs::write(p, f(s)).unwrap();
}

/// Rewrite the manifest's train digest to match the current train.jsonl.
fn refresh_manifest(rd: &Path) {
    let train = std::fs::read(rd.join("data/train.jsonl")).unwrap();
    let sha = bat_contract::json::sha256_hex(&train);
    edit(&rd.join("data/manifest.json"), |m| {
        let v: serde_json::Value = serde_json::from_str(&m).unwrap();
        let old = v["train"]["sha256"].as_str().unwrap().to_string();
        m.replace(&old, &sha)
    });
}

#[test]
fn tampered_manifest_digest_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    edit(&c.round("r01").join("data/manifest.json"), |m| {
        let v: serde_json::Value = serde_json::from_str(&m).unwrap();
        let old = v["train"]["sha256"].as_str().unwrap().to_string();
        let new = format!(
            "{}{}",
            if old.starts_with('0') { '1' } else { '0' },
            &old[1..]
        );
        m.replace(&old, &new)
    });
    refused(&c, "manifest_digest", "manifest.json", &[]);
}

#[test]
fn tampered_training_rows_fail_round_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let rd = c.round("r01");
    // Drop the last row, keep the manifest digest consistent.
    edit(&rd.join("data/train.jsonl"), |t| {
        let lines: Vec<&str> = t.lines().collect();
        lines[..lines.len() - 1].join("\n") + "\n"
    });
    refresh_manifest(&rd);
    let err = refused(&c, "round_verify", "train.jsonl", &[]);
    assert!(
        err.contains("the round does not hold 8 rows per batch"),
        "{err}"
    );
}

#[test]
fn leaked_heldout_task_id_in_train_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let rd = c.round("r01");
    // Put an evaluation task id into a training row's text.
    edit(&rd.join("data/train.jsonl"), |t| {
        let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
        let mut row: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        row["leak_note"] = serde_json::json!(format!("solve {} first", TASK_IDS[1].to_uppercase()));
        lines[0] = serde_json::to_string(&row).unwrap();
        lines.join("\n") + "\n"
    });
    refresh_manifest(&rd);
    let err = refused(&c, "firewall", "train.jsonl", &[]);
    assert!(err.contains("heldout_marker"), "{err}");
}

#[test]
fn extra_heldout_markers_file_is_used() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    // A marker taken from the training data itself must trip the scan.
    let train = std::fs::read_to_string(c.round("r01").join("data/train.jsonl")).unwrap();
    let row: serde_json::Value = serde_json::from_str(train.lines().next().unwrap()).unwrap();
    let sid = row["extra_info"]["state_id"]
        .as_str()
        .or(row["state_id"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no state_id in {row}"));
    let markers = tmp.path().join("markers.json");
    std::fs::write(&markers, serde_json::to_vec(&vec![sid]).unwrap()).unwrap();
    let m = markers.to_str().unwrap().to_string();
    let err = refused(&c, "firewall", "train.jsonl", &["--heldout-markers", &m]);
    assert!(err.contains("heldout_marker"), "{err}");
    // An invalid markers file is refused too.
    std::fs::write(&markers, b"[\"ab\"]").unwrap();
    refused(&c, "markers", "markers.json", &["--heldout-markers", &m]);
}

#[test]
fn nan_scores_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let raw = c.round("r01").join("candidate-eval/raw-evaluation.json");
    let orig = std::fs::read_to_string(&raw).unwrap();
    edit(&raw, |s| {
        s.replacen("\"task_score\": 0.550", "\"task_score\": NaN", 1)
    });
    let err = refused(&c, "raw_evaluation", "raw-evaluation.json", &[]);
    assert!(
        err.contains("a task score is missing or not a number in [0, 1]"),
        "{err}"
    );
    // NaN in the summary itself (raw evaluation intact).
    std::fs::write(&raw, orig).unwrap();
    edit(&c.round("r01").join("candidate-eval/summary.json"), |s| {
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let o = v["means"]["overall"].to_string();
        s.replacen(&format!("\"overall\": {o}"), "\"overall\": NaN", 1)
    });
    refused(&c, "summary", "summary.json", &[]);
}

#[test]
fn missing_candidate_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    std::fs::remove_dir_all(c.round("r01").join("candidate")).unwrap();
    refused(&c, "candidate", "candidate", &[]);
}

#[test]
fn evaluation_of_another_model_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    // The candidate changed after its evaluation.
    write_model(&c.round("r01").join("candidate"), "swapped", [9.0, 9.0]);
    refused(&c, "binding", "checkpoint-binding.json", &[]);
}

#[test]
fn gate_that_disagrees_with_its_summaries_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    edit(&c.round("r01").join("gate.json"), |g| {
        g.replace("\"status\": \"promote\"", "\"status\": \"hold\"")
            .replace("\"promoted\": true", "\"promoted\": false")
    });
    let err = refused(&c, "gate", "gate.json", &[]);
    assert!(err.contains("recomputed status: promote"), "{err}");
}

#[test]
fn prescription_that_disagrees_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    edit(&c.round("r01").join("prescription.json"), |p| {
        let v: serde_json::Value = serde_json::from_str(&p).unwrap();
        let t = v["target_stage"].as_str().unwrap().to_string();
        let other = if t == "S1" { "S2" } else { "S1" };
        p.replace(
            &format!("\"target_stage\": \"{t}\""),
            &format!("\"target_stage\": \"{other}\""),
        )
    });
    refused(&c, "prescription", "prescription.json", &[]);
}

#[test]
fn round_without_a_baseline_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    std::fs::remove_dir_all(c.work.join("baseline-eval")).unwrap();
    let out = bat(&c.ledger)
        .args(["commit", "--no-code-repo"])
        .arg(c.round("r01"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("no baseline summary for round r01"), "{err}");
    assert!(err.contains("--baseline-summary"), "{err}");
}

#[test]
fn committing_a_later_round_first_is_refused_by_the_gate() {
    // r02 was gated against r01's summary; with nothing promoted yet its
    // baseline is the initial one, so the recomputed gate disagrees.
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let out = bat(&c.ledger)
        .args(["commit", "--no-code-repo"])
        .arg(c.round("r02"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`gate`"), "{err}");
}
