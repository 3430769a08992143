//! `bat commit ROUND_DIR`: round commits, metadata, promotion, round ids as
//! revisions, revert, and the raw evaluation kept out of commits.

use round_common::*;

use crate::common::round as round_common;

fn commit_round(c: &Campaign, r: &str, extra: &[&str]) -> serde_json::Value {
    let out = bat(&c.ledger)
        .args(["--json", "commit", "--no-code-repo"])
        .arg(c.round(r))
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "commit {r} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn resolve(c: &Campaign, rev: &str) -> String {
    let out = bat(&c.ledger)
        .args(["--json", "show", rev])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["id"]
        .as_str()
        .or(v["commit"].as_str())
        .unwrap()
        .to_string()
}

#[test]
fn campaign_rounds_commit_with_metadata_promotion_and_round_revs() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let r1 = commit_round(&c, "r01", &[]);
    assert_eq!(r1["gate_status"], "promote");
    let r2 = commit_round(&c, "r02", &[]);
    assert_eq!(r2["gate_status"], "hold");
    let r3 = commit_round(&c, "r03", &[]);
    assert_eq!(r3["gate_status"], "promote");

    // bat log --json returns the round metadata and indexed fields.
    let log = log_json(&c.ledger);
    let arr = log.as_array().unwrap();
    assert_eq!(arr.len(), 3);
    let newest = &arr[0];
    assert_eq!(newest["metadata"]["kind"], "bat_round");
    assert_eq!(newest["metadata"]["round_id"], "r03");
    assert_eq!(newest["metadata"]["gate_status"], "promote");
    for k in ["overall", "task", "agentic", "S1", "S2", "S3", "S4", "S5"] {
        assert!(
            newest["metadata"]["scores"][k].is_f64(),
            "score {k}: {newest}"
        );
    }
    assert!(
        newest["fields"]["round_id"].to_string().contains("r03"),
        "{newest}"
    );
    let fields = newest["fields"].to_string();
    for k in [
        "round_id",
        "target_stage",
        "gate_status",
        "scores.overall",
        "scores.S5",
    ] {
        assert!(
            fields.contains(&format!("\"{k}\"")),
            "field {k} missing: {fields}"
        );
    }
    assert_eq!(arr[1]["metadata"]["gate_status"], "hold");
    // The held round's next start is r01's candidate, not its own.
    assert_eq!(
        arr[1]["metadata"]["starting_checkpoint_sha256"],
        arr[2]["metadata"]["candidate_checkpoint_sha256"]
    );
    assert_ne!(
        arr[1]["metadata"]["candidate_checkpoint_sha256"],
        arr[1]["metadata"]["starting_checkpoint_sha256"]
    );
    // r03 was gated against r01 (the last promoted), not the held r02.
    assert_eq!(
        arr[0]["metadata"]["trained_from_checkpoint_sha256"],
        arr[2]["metadata"]["candidate_checkpoint_sha256"]
    );

    // The library's view for the loop driver.
    {
        let l = bat_ledger::Ledger::discover(&c.ledger).unwrap();
        let start = bat::round::next_starting_checkpoint(&l, "main").unwrap();
        match &start {
            bat::round::StartingCheckpoint::Promoted(p) => {
                assert_eq!(p.round_id, "r03");
                assert_eq!(
                    p.candidate_checkpoint_sha256,
                    r3["metadata"]["candidate_checkpoint_sha256"]
                );
            }
            other => panic!("{other:?}"),
        }
        // A branch that does not exist yet inherits HEAD's promoted round.
        assert_eq!(
            bat::round::next_starting_checkpoint(&l, "fork").unwrap(),
            start
        );
    }

    // Round ids resolve as revisions; refs/promoted/main follows r03.
    let id3 = r3["commit"].as_str().unwrap();
    let id2 = r2["commit"].as_str().unwrap();
    assert_eq!(resolve(&c, "r03"), id3);
    assert_eq!(resolve(&c, "r02"), id2);
    assert_eq!(resolve(&c, "r03~1"), id2);
    assert_eq!(resolve(&c, "refs/promoted/main"), id3);

    // Text log: a table with round rows and markers.
    let out = bat(&c.ledger).arg("log").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().next().unwrap().contains("overall"), "{text}");
    let r3line = text.lines().find(|l| l.contains(" r03 ")).unwrap();
    assert!(
        r3line.contains("promote") && r3line.contains("promoted/main"),
        "{text}"
    );
    let r2line = text.lines().find(|l| l.contains(" r02 ")).unwrap();
    assert!(
        r2line.contains("hold") && !r2line.contains("promoted/"),
        "{text}"
    );

    // Revert r03: promoted goes back to r01, history keeps both.
    let out = bat(&c.ledger)
        .args(["--json", "revert", "r03"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rv: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rv["restored_round_id"], "r01");
    let id1 = r1["commit"].as_str().unwrap();
    assert_eq!(resolve(&c, "refs/promoted/main"), id1);
    assert_eq!(
        rv["starting_checkpoint_sha256"],
        r1["metadata"]["candidate_checkpoint_sha256"]
    );
    let log = log_json(&c.ledger);
    assert_eq!(log.as_array().unwrap().len(), 4);
    assert_eq!(log[0]["metadata"]["kind"], "bat_revert");
    assert_eq!(log[0]["metadata"]["reverts"], id3);
    assert_eq!(resolve(&c, "r03"), id3);
    // r03 is no longer the promoted round: a second revert is refused.
    bat(&c.ledger).args(["revert", "r03"]).assert().failure();
    // A held round cannot be reverted.
    let out = bat(&c.ledger).args(["revert", "r02"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("held"));
    // Reverting r01 goes back to the initial checkpoint and drops the ref.
    let out = bat(&c.ledger)
        .args(["--json", "revert", "r01"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rv: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rv["restored_round_id"].is_null());
    assert_eq!(
        rv["starting_checkpoint_sha256"],
        r1["metadata"]["trained_from_checkpoint_sha256"]
    );
    bat(&c.ledger)
        .args(["show", "refs/promoted/main"])
        .assert()
        .failure();
    let l = bat_ledger::Ledger::discover(&c.ledger).unwrap();
    assert!(bat::round::promoted_round(&l, "main").unwrap().is_none());
    assert_eq!(
        bat::round::next_starting_checkpoint(&l, "main").unwrap(),
        bat::round::StartingCheckpoint::Initial {
            checkpoint_sha256: r1["metadata"]["trained_from_checkpoint_sha256"]
                .as_str()
                .map(str::to_string)
        }
    );
    drop(l);
    bat(&c.ledger).arg("fsck").assert().success();
}

#[test]
fn raw_evaluation_never_enters_the_commit_and_is_kept_privately_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let r1 = commit_round(&c, "r01", &["--keep-raw-eval"]);
    assert_eq!(r1["raw_eval_kept"], true);
    let raw = std::fs::read(c.round("r01").join("candidate-eval/raw-evaluation.json")).unwrap();
    let b3 = blake3::hash(&raw).to_hex().to_string();
    let private = c.ledger.join(".bat/private/raw-eval").join(&b3);
    assert_eq!(std::fs::read(&private).unwrap(), raw);
    assert_eq!(r1["metadata"]["raw_eval_blake3"], b3);
    // Only its owner may read it, whatever the umask.
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&private).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");

    let co = tmp.path().join("co");
    bat(&c.ledger)
        .args(["checkout", "r01", "--to"])
        .arg(&co)
        .assert()
        .success();
    assert!(!co.join("candidate-eval/raw-evaluation.json").exists());
    for f in [
        "round.json",
        "provenance.json",
        "firewall.json",
        "baseline-summary.json",
        "gate.json",
        "candidate/model.safetensors",
        "candidate-eval/summary.json",
        "data/train.jsonl",
    ] {
        assert!(co.join(f).is_file(), "{f} missing from the round commit");
    }
    // No committed file holds the raw file's bytes or raw-only content; the
    // held-out task ids appear only in the evaluation summaries.
    let mut stack = vec![co.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(RAW_ONLY),
                "{} holds raw-only content",
                p.display()
            );
            assert_ne!(bytes, raw, "{} is the raw evaluation", p.display());
            let rel = p.strip_prefix(&co).unwrap().to_string_lossy().to_string();
            if !rel.ends_with("summary.json") {
                for id in TASK_IDS {
                    assert!(!text.contains(id), "{rel} holds held-out task id {id}");
                }
            }
        }
    }
    let round: serde_json::Value =
        serde_json::from_slice(&std::fs::read(co.join("round.json")).unwrap()).unwrap();
    assert_eq!(
        round["raw_evaluation"]["sha256"],
        r1["metadata"]["raw_eval_sha256"]
    );
    assert_eq!(round["raw_evaluation"]["kept_privately"], true);
    assert_eq!(
        round["raw_evaluation"]["copies_in_candidate"],
        serde_json::json!([])
    );
    assert_eq!(r1["warnings"], serde_json::json!([]));
    let prov: serde_json::Value =
        serde_json::from_slice(&std::fs::read(co.join("provenance.json")).unwrap()).unwrap();
    assert_eq!(prov["measured_compute"]["steps"], 50);
    assert_eq!(prov["measured_compute"]["gpu_seconds"], 240.0);
    assert!(prov["code"].is_null());

    // A checked-out round (bat's layout) commits again, into a new ledger:
    // its baseline is the baseline-summary.json it carries.
    let l2 = tmp.path().join("l2");
    std::fs::create_dir_all(&l2).unwrap();
    bat(&l2).arg("init").assert().success();
    let out = bat(&l2)
        .args(["--json", "commit", "--no-code-repo"])
        .arg(&co)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["metadata"]["layout"], "bat");
    assert_eq!(
        again["metadata"]["raw_eval_sha256"],
        r1["metadata"]["raw_eval_sha256"]
    );
}

#[test]
fn without_keep_raw_eval_nothing_is_stored_privately() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let r1 = commit_round(&c, "r01", &[]);
    assert_eq!(r1["raw_eval_kept"], false);
    assert!(!c.ledger.join(".bat/private").exists());
}

#[test]
fn plain_directories_still_need_a_message_and_commit_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = tmp.path().join("l");
    std::fs::create_dir_all(&ledger).unwrap();
    bat(&ledger).arg("init").assert().success();
    let d = tmp.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.txt"), b"a").unwrap();
    bat(&ledger).arg("commit").arg(&d).assert().code(2);
    bat(&ledger)
        .arg("commit")
        .arg(&d)
        .args(["-m", "x"])
        .assert()
        .success();
    let log = log_json(&ledger);
    assert_eq!(log[0]["message"], "x");
    // Plain history prints the classic format.
    let out = bat(&ledger).arg("log").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("commit "));
}

/// A round's candidate is committed through hard links in a staging folder
/// that is removed afterwards; the ledger remembers the candidate's own
/// path instead, where the next round's commit reads its delta bases.
#[test]
fn a_large_candidate_is_remembered_at_its_own_path() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign_with(tmp.path(), 3 << 20);
    let sources = |c: &Campaign| -> Vec<std::path::PathBuf> {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(c.ledger.join(".bat/sources")).unwrap()).unwrap();
        v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| std::path::PathBuf::from(f["path"].as_str().unwrap()))
            .collect()
    };
    let model = |r: &str| {
        c.round(r)
            .join("candidate/model.safetensors")
            .canonicalize()
            .unwrap()
    };
    commit_round(&c, "r01", &[]);
    assert_eq!(sources(&c), vec![model("r01")]);
    commit_round(&c, "r02", &[]);
    assert_eq!(sources(&c), vec![model("r02"), model("r01")]);
    bat(&c.ledger).arg("fsck").assert().success();
}
