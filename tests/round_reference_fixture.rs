//! The reference loop's rounds (promote, hold, promote) from
//! tests/data/round-fixture — the reference's candidate models, evaluation
//! files, gates, prescriptions and health files, byte for byte — commit as
//! rounds. Their train.jsonl holds the reference's prompt wording, so the
//! training data is rebuilt here with the default pack (`bat round build`,
//! same round ids, targets and batch count); nothing else depends on it.

use std::path::Path;

use round_common::bat;

use crate::common::copy_tree as copy_dir;
use crate::common::round as round_common;

#[test]
fn reference_loop_rounds_commit_with_the_reference_outcomes() {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("W");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/round-fixture"),
        &work,
    );
    let src = tmp.path().join("src");
    bat(tmp.path())
        .args(["source", "build", "--output-dir"])
        .arg(&src)
        .assert()
        .success();
    let source = src.join("source.jsonl");
    let sha = bat_contract::json::sha256_hex(&std::fs::read(&source).unwrap());
    let ledger = tmp.path().join("ledger");
    std::fs::create_dir_all(&ledger).unwrap();
    bat(&ledger).arg("init").assert().success();
    // (round, trained target, gate, next starting checkpoint) as in the
    // reference's state.json history.
    let cases = [
        (
            "r01",
            "S3",
            "promote",
            "2070c4e9eeb5202293a5464b98343958639eeea1a726e25738d22fb29cd0b4c3",
        ),
        (
            "r02",
            "S4",
            "hold",
            "2070c4e9eeb5202293a5464b98343958639eeea1a726e25738d22fb29cd0b4c3",
        ),
        (
            "r03",
            "S4",
            "promote",
            "cefcf0402dd4f133b0e75276bf6597c3983e6715b990f3a8f080e28ec1672ebb",
        ),
    ];
    for (rid, target, gate, start) in cases {
        let rd = work.join(rid);
        bat(tmp.path())
            .args(["round", "build", "--source"])
            .arg(&source)
            .args([
                "--source-sha256",
                &sha,
                "--round-id",
                rid,
                "--target-stage",
                target,
            ])
            .args(["--batches", "1", "--output-dir"])
            .arg(rd.join("data"))
            .assert()
            .success();
        let out = bat(&ledger)
            .args(["--json", "commit", "--no-code-repo", "--keep-raw-eval"])
            .arg(&rd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{rid}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["gate_status"], gate, "{rid}");
        assert_eq!(v["metadata"]["target_stage"], target, "{rid}");
        assert_eq!(v["metadata"]["starting_checkpoint_sha256"], start, "{rid}");
        // The reference's toy trainer copies the raw evaluation into the
        // model folder as raw.json: reported, since it is part of the model.
        assert!(
            v["warnings"][0]
                .as_str()
                .unwrap()
                .contains("candidate/raw.json"),
            "{v}"
        );
    }
    // The reference's files are kept with their exact bytes.
    let co = tmp.path().join("co");
    bat(&ledger)
        .args(["checkout", "r02", "--to"])
        .arg(&co)
        .assert()
        .success();
    for f in [
        "gate.json",
        "prescription.json",
        "training-health.json",
        "candidate-eval/summary.json",
        "candidate-eval/receipt.json",
        "candidate-eval/checkpoint-binding.json",
        "candidate/model.safetensors",
    ] {
        assert_eq!(
            std::fs::read(co.join(f)).unwrap(),
            std::fs::read(work.join("r02").join(f)).unwrap(),
            "{f}"
        );
    }
    assert!(!co.join("candidate-eval/raw-evaluation.json").exists());
    // r02 was gated against r01's summary.
    assert_eq!(
        std::fs::read(co.join("baseline-summary.json")).unwrap(),
        std::fs::read(work.join("r01/candidate-eval/summary.json")).unwrap()
    );
    bat(&ledger).arg("fsck").assert().success();
}
