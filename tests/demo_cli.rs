//! `bat demo` journey: a fresh ledger with simulator BaT campaigns for
//! three seeds (`bat/s<seed>`, `main` naming the first), their
//! terminal-reward replays on linked branches at the same compute
//! (`terminal/s<seed>`), and the comparison with confidence intervals; the
//! ledger verbs read it all back. The test runs 3 rounds (a hidden flag) to
//! keep the suite fast; the 10-round default is measured in release (see
//! README).

use serde_json::Value;

use crate::common::{self, bat, TestEnv};

#[test]
fn demo_runs_a_campaign_replays_it_with_terminal_reward_and_compares() {
    let env = TestEnv::new();
    // The default three seeds.
    let demo = common::Demo::build(&env.path("demo"), &["--rounds", "3"]);
    let report = &demo.report;
    assert_eq!(report["rounds"], 3);
    assert_eq!(report["campaign_branch"], "main");
    assert_eq!(report["seeds"], serde_json::json!([0, 1, 2]));
    assert_eq!(
        report["bat_branches"],
        serde_json::json!(["bat/s0", "bat/s1", "bat/s2"])
    );
    let branch = report["replay_branch"].as_str().expect("replay branch");
    assert_eq!(branch, "terminal/s0");
    // main names the first seed's BaT arm.
    assert_eq!(
        demo.bat().json(&["log", "main"]),
        demo.bat().json(&["log", "bat/s0"])
    );
    // The experiment: both groups with their three seeds, a verdict on the
    // pair, comparable arms.
    let e = &report["experiment"];
    assert_eq!(e["comparable"], true, "{e}");
    for (arm, label) in e["arms"]
        .as_array()
        .expect("arms")
        .iter()
        .zip(["bat", "terminal"])
    {
        assert_eq!(arm["members"].as_array().map(Vec::len), Some(3), "{label}");
    }
    // At 3 rounds BaT is ahead of the terminal reward: Overall +0.0463
    // [+0.0417, +0.0508], P(bat > terminal) 0.89 [0.86, 0.92] (the
    // simulator is deterministic, so these figures are too).
    let verdict = e["pairs"][0]["verdict"].as_str().expect("a verdict");
    assert_eq!(verdict, "bat ahead", "{}", e["pairs"][0]["scores"][0]);
    let lo = e["pairs"][0]["scores"][0]["difference"]["lo"]
        .as_f64()
        .expect("an interval");
    assert!(lo > 0.0, "{}", e["pairs"][0]["scores"][0]);
    // Each seed's chain was replayed at the same compute, on its own branch.
    for seed in 0..3 {
        let replays = demo.bat().json(&["log", &format!("terminal/s{seed}")]);
        assert_eq!(replays.as_array().map(Vec::len), Some(3), "seed {seed}");
    }
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
    let main_log = demo.bat().json(&["log", "main"]);
    let originals: Vec<&Value> = main_log
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .collect();
    assert_eq!(originals.len(), 3);
    let replay_log = demo.bat().json(&["log", branch]);
    let replays = replay_log.as_array().expect("log");
    assert_eq!(replays.len(), 3);
    for (r, o) in replays.iter().zip(&originals) {
        assert_eq!(r["metadata"]["replay_of"], o["id"]);
        assert_eq!(r["metadata"]["ablation"], "reward=terminal");
        assert_eq!(r["metadata"]["budget"], o["metadata"]["budget"]);
    }

    // The next commands the demo suggests work on this ledger.
    let verify = demo.bat().ok(&["replay", "r03", "--verify"]);
    assert!(verify.contains("reproduced bit for bit"));
    demo.bat().ok(&["diff", "main", branch]);
    demo.bat().ok(&["fsck"]);
}

#[test]
fn demo_text_names_the_ledger_the_table_and_the_next_commands() {
    let env = TestEnv::new();
    // `bat` on PATH is this binary, so the commands say `bat` (errs_cli
    // covers a PATH without it).
    let bin = env.path("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(common::bat_exe(), bin.join("bat")).expect("symlink");
    let out = common::succeeded(
        env.bat()
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output(&[
                "demo",
                common::utf8(&env.path("d")),
                "--rounds",
                "2",
                "--batches",
                "10",
                "--seeds",
                "2",
            ]),
    );
    let _filters = common::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("demo_text", common::text(&out.stdout));
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
