//! Issue 7's reproduction round trip with the real binary: a simulator
//! campaign is cloned, a round is verified and replayed as an ablation in
//! the clone, the replay branch is pushed back, and both ledgers are
//! fsck-clean with the pushed commits readable on the origin.

use crate::common::{bat_in as bat, stdout_json as json, succeeded as ok};

#[test]
fn clone_replay_in_the_clone_and_push_the_replay_branch_back() {
    let tmp = tempfile::tempdir().expect("tmp");
    let origin = tmp.path().join("origin");
    let copy = tmp.path().join("copy");
    ok(crate::common::bat()
        .arg("init")
        .arg(&origin)
        .output()
        .expect("init"));
    ok(bat(&origin)
        .args([
            "run",
            "--backend",
            "sim",
            "--rounds",
            "3",
            "--batches",
            "10",
        ])
        .output()
        .expect("run"));

    // A reviewer clones the campaign (no shared files: a fresh directory).
    ok(crate::common::bat()
        .arg("clone")
        .arg(&origin)
        .arg(&copy)
        .output()
        .expect("clone"));
    assert!(ok(bat(&copy).arg("fsck").output().expect("fsck"))
        .status
        .success());

    // Nothing outside the ledger is needed: the origin's run folders (work
    // dir, source grid, the folder the campaign started from) are gone.
    let runs = origin.join(".bat").join("runs");
    assert!(runs.is_dir());
    std::fs::remove_dir_all(&runs).expect("rm runs");
    // r01 starts from the campaign's starting checkpoint, recorded in the
    // ledger under a `checkpoints/<identity>` tag; r02 from r01's candidate.
    let tags = json(bat(&copy).args(["--json", "tag"]).output().expect("tags"));
    assert!(tags.to_string().contains("checkpoints/"), "{tags}");
    for rid in ["r01", "r02"] {
        let v = json(
            bat(&copy)
                .args(["--json", "replay", rid, "--verify"])
                .output()
                .expect("verify"),
        );
        assert_eq!(v["reproduced"], true, "{rid}: {v}");
    }
    let r = json(
        bat(&copy)
            .args([
                "--json",
                "replay",
                "r02..r03",
                "--ablate",
                "reward=terminal",
            ])
            .output()
            .expect("replay"),
    );
    let branch = r["branch"].as_str().expect("branch").to_string();
    assert!(branch.starts_with("replay/"), "{branch}");
    let tip = json(
        bat(&copy)
            .args(["--json", "log", "-n", "1", &branch])
            .output()
            .expect("log"),
    )[0]["id"]
        .as_str()
        .expect("id")
        .to_string();

    // Push the arm back to where the campaign came from.
    ok(bat(&copy)
        .args(["push", "origin", &branch])
        .output()
        .expect("push"));
    let there = json(
        bat(&origin)
            .args(["--json", "log", "-n", "1", &branch])
            .output()
            .expect("log"),
    );
    assert_eq!(
        there[0]["id"],
        tip.as_str(),
        "origin's branch is the pushed tip"
    );
    assert_eq!(there[0]["metadata"]["ablation"], "reward=terminal");
    // The pushed checkpoint reads back on the origin (verified restore).
    let out = tmp.path().join("restored");
    ok(bat(&origin)
        .args(["checkout", &branch, "--to"])
        .arg(&out)
        .output()
        .expect("checkout"));
    assert!(out.join("candidate").join("model.safetensors").is_file());
    // A second push sends nothing new and is accepted.
    ok(bat(&copy)
        .args(["push", "origin", &branch])
        .output()
        .expect("push again"));
    for l in [&origin, &copy] {
        assert!(ok(bat(l).arg("fsck").output().expect("fsck"))
            .status
            .success());
    }
    // A partial clone leaves checkpoints on the origin; replay fetches the
    // ones it starts from on demand (verified) and reproduces the round.
    let partial = tmp.path().join("partial");
    ok(crate::common::bat()
        .arg("clone")
        .arg(&origin)
        .arg(&partial)
        .args(["--filter", "no-checkpoints"])
        .output()
        .expect("partial clone"));
    let before = json(
        bat(&partial)
            .args(["--json", "fsck"])
            .output()
            .expect("fsck"),
    );
    let promised_before = before["promised_files"].as_u64().expect("promised_files");
    assert!(promised_before > 0, "{before}");
    let v = json(
        bat(&partial)
            .args(["--json", "replay", "r02", "--verify"])
            .output()
            .expect("verify in a partial clone"),
    );
    assert_eq!(v["reproduced"], true, "{v}");
    let after = json(
        bat(&partial)
            .args(["--json", "fsck"])
            .output()
            .expect("fsck"),
    );
    let promised_after = after["promised_files"].as_u64().expect("promised_files");
    assert!(
        promised_after < promised_before,
        "the starting checkpoint was fetched: {promised_before} -> {promised_after}"
    );
    // The original arm is untouched on the origin.
    let c = json(
        bat(&origin)
            .args(["--json", "compare", "main", &branch])
            .output()
            .expect("compare"),
    );
    assert!(c.is_object(), "{c}");
}
