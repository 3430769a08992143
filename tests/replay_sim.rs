//! The must-hold journey of issue 6 with the built-in simulator: a 3-round
//! campaign, `replay --verify` of each round (every artifact bit for bit),
//! a `reward=terminal` replay of the chain (equal budget, linked commits),
//! and `compare` — all with the real binary in a temp dir.

use std::path::Path;

use serde_json::Value;

use crate::common::{bat_in as bat, stdout_json as json, succeeded as ok};

fn rounds(ledger: &Path, rev: &str) -> Vec<Value> {
    let log = json(
        bat(ledger)
            .args(["--json", "log", rev])
            .output()
            .expect("log"),
    );
    let mut v: Vec<Value> = log
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .cloned()
        .collect();
    v.reverse();
    v
}

#[test]
fn sim_campaign_verifies_bit_for_bit_replays_with_terminal_reward_and_compares() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ledger = tmp.path().join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    ok(crate::common::bat()
        .arg("init")
        .arg(&ledger)
        .output()
        .expect("init"));
    ok(bat(&ledger)
        .args([
            "run",
            "--backend",
            "sim",
            "--rounds",
            "3",
            "--batches",
            "20",
        ])
        .output()
        .expect("run"));
    let originals = rounds(&ledger, "main");
    assert_eq!(originals.len(), 3);

    // Every round reproduces bit for bit.
    for (i, o) in originals.iter().enumerate() {
        let rid = format!("r0{}", i + 1);
        let r = json(
            bat(&ledger)
                .args(["--json", "replay", &rid, "--verify"])
                .output()
                .expect("verify"),
        );
        assert_eq!(r["reproduced"], true, "{rid}");
        let x = &r["rounds"][0];
        assert_eq!(x["original"], o["id"]);
        let v = &x["verify"];
        assert_eq!(v["mode"], "exact", "the simulator is compared bit for bit");
        assert_eq!(v["differing"], serde_json::json!([]), "{rid}");
        assert_eq!(v["identical"], v["compared"]);
        assert!(v["compared"].as_u64().expect("n") >= 11, "{v}");
        assert_eq!(x["same_budget"], true);
        assert_eq!(x["compute"]["measured"], x["original_compute"]["measured"]);
    }
    // The text says so.
    let out = ok(bat(&ledger)
        .args(["replay", "r02", "--verify"])
        .output()
        .expect("verify"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("reproduced bit for bit"));

    // The chain as a terminal-reward ablation: equal budget, linked commits.
    let r = json(
        bat(&ledger)
            .args([
                "--json",
                "replay",
                "r01..r03",
                "--ablate",
                "reward=terminal",
            ])
            .output()
            .expect("replay"),
    );
    let branch = r["branch"].as_str().expect("branch").to_string();
    let id0 = originals[0]["id"].as_str().expect("id");
    assert_eq!(branch, format!("replay/{}-reward-terminal", &id0[..12]));
    for x in r["rounds"].as_array().expect("rounds") {
        assert_eq!(x["same_budget"], true);
        let b = &x["compute"]["budget"]["trainer"];
        assert!(b["steps"].as_i64().is_some_and(|s| s > 0), "{b}");
        assert_eq!(b, &x["original_compute"]["budget"]["trainer"]);
        assert_eq!(
            x["compute"]["measured"]["steps"],
            x["original_compute"]["measured"]["steps"]
        );
    }
    // A work dir bat chose is removed once the replay succeeded (the
    // replay commits hold its rounds): no round folder stays.
    let kept: Vec<&str> = r["rounds"]
        .as_array()
        .expect("rounds")
        .iter()
        .filter_map(|x| x["work_dir"].as_str())
        .filter(|p| Path::new(p).exists())
        .collect();
    assert!(kept.is_empty(), "round folders left behind: {kept:?}");
    assert_eq!(r["work_dir"], Value::Null, "{r}");
    let first_dir = r["rounds"][0]["work_dir"].as_str().expect("work_dir");
    let work = Path::new(first_dir)
        .parent()
        .and_then(Path::parent)
        .expect("<work>/rounds/<round>");
    assert!(!work.exists(), "the work folder stays: {}", work.display());
    let replays = rounds(&ledger, &branch);
    assert_eq!(replays.len(), 3);
    for (rp, o) in replays.iter().zip(&originals) {
        let m = &rp["metadata"];
        assert_eq!(m["kind"], "bat_round");
        assert_eq!(m["replay_of"], o["id"]);
        assert_eq!(m["ablation"], "reward=terminal");
        assert_eq!(m["budget"], o["metadata"]["budget"]);
        assert_eq!(
            m["loop"]["campaign"]["extra_placeholders"]
                .as_array()
                .and_then(|a| a.iter().find(|p| p[0] == "{reward_mode}"))
                .map(|p| p[1].clone()),
            Some(serde_json::json!("terminal"))
        );
    }
    // The terminal-reward candidate differs from the BaT one.
    assert_ne!(
        replays[0]["metadata"]["candidate_checkpoint_sha256"],
        originals[0]["metadata"]["candidate_checkpoint_sha256"]
    );
    // A replay round is itself replayable, bit for bit.
    let again = json(
        bat(&ledger)
            .args([
                "--json",
                "replay",
                replays[1]["id"].as_str().expect("id"),
                "--verify",
            ])
            .output()
            .expect("verify replay"),
    );
    assert_eq!(again["reproduced"], true);

    // mixture=uniform: a view without an S-target pool, same budget, and
    // the replay is itself reproducible bit for bit.
    let u = json(
        bat(&ledger)
            .args(["--json", "replay", "r02", "--ablate", "mixture=uniform"])
            .output()
            .expect("uniform"),
    );
    let ub = u["branch"].as_str().expect("branch").to_string();
    assert!(ub.ends_with("-mixture-uniform"), "{ub}");
    assert_eq!(u["rounds"][0]["same_budget"], true);
    let m: Value = serde_json::from_slice(
        &ok(bat(&ledger)
            .args(["cat", &format!("{ub}:data/manifest.json")])
            .output()
            .expect("cat"))
        .stdout,
    )
    .expect("manifest");
    assert_eq!(m["artifact_kind"], "bat_uniform_round");
    assert_eq!(m["batches"], 20);
    assert_ne!(
        m["train"]["sha256"],
        serde_json::Value::String(String::new()),
        "a digest is recorded"
    );
    let uv = json(
        bat(&ledger)
            .args(["--json", "replay", &ub, "--verify"])
            .output()
            .expect("verify uniform"),
    );
    assert_eq!(uv["reproduced"], true);
    assert_eq!(
        uv["rounds"][0]["verify"]["differing"],
        serde_json::json!([])
    );

    // compare: per round and base → final, same budget.
    let cmp = json(
        bat(&ledger)
            .args(["--json", "compare", "main", &branch])
            .output()
            .expect("compare"),
    );
    assert_eq!(cmp["same_budget"], true);
    assert_eq!(cmp["a"]["base"], cmp["b"]["base"]);
    assert_eq!(cmp["a"]["compute"]["steps"], cmp["b"]["compute"]["steps"]);
    for (arm, log) in [("a", &originals), ("b", &replays)] {
        let rs = cmp[arm]["rounds"].as_array().expect("rounds");
        assert_eq!(rs.len(), 3);
        for (x, l) in rs.iter().zip(log.iter()) {
            assert_eq!(x["commit"], l["id"]);
            assert_eq!(x["overall"], l["metadata"]["scores"]["overall"]);
            assert_eq!(x["gate_status"], l["metadata"]["gate_status"]);
        }
    }
    ok(bat(&ledger).arg("fsck").output().expect("fsck"));

    // Inputs come from the ledger: with the campaign's source file gone, the
    // grid is rebuilt from the pack and checked against the recorded digest,
    // and r02 (which starts from r01's checked-out candidate) still
    // reproduces bit for bit.
    let runs = ledger.join(".bat").join("runs");
    let mut removed = 0;
    for run in std::fs::read_dir(&runs).expect("runs") {
        let src = run
            .expect("entry")
            .path()
            .join("sim-setup/source/source.jsonl");
        if src.is_file() {
            std::fs::remove_file(&src).expect("remove");
            removed += 1;
        }
    }
    assert_eq!(removed, 1, "the campaign's source file was found");
    let r = json(
        bat(&ledger)
            .args(["--json", "replay", "r02", "--verify"])
            .output()
            .expect("verify"),
    );
    assert_eq!(r["reproduced"], true);
}
