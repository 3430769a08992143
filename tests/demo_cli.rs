//! `bat demo` journey: a fresh ledger with a simulator BaT campaign on
//! `main`, its terminal-reward replay on a linked replay branch at the same
//! compute, and the comparison; the ledger verbs read it all back. The test
//! runs 3 rounds (a hidden flag) to keep the suite fast; the 10-round
//! default is measured in release (see README).

use serde_json::Value;

use crate::common::{self, bat, TestEnv};

#[test]
fn demo_runs_a_campaign_replays_it_with_terminal_reward_and_compares() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 3);
    let report = &demo.report;
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
            ]),
    );
    let _filters = common::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!(common::text(&out.stdout), @r"
        BaT campaign (2 rounds, simulator seed 0) vs. terminal-reward GRPO replay at the same compute

        A: main (BaT)
        B: replay/xxxxxxxxxxxx-reward-terminal (reward=terminal)

        round  A target  gate     overall  B target  gate     overall
        r01    S4        promote   0.2060  S4        promote   0.1887
        r02    S4        promote   0.2263  S4        promote   0.1966

        base → final  A                          B
        Overall       0.1820 → 0.2263 (+0.0443)  0.1820 → 0.1966 (+0.0146)
        task          0.0634 → 0.0942 (+0.0308)  0.0634 → 0.0725 (+0.0091)
        agentic       0.3005 → 0.3584 (+0.0578)  0.3005 → 0.3208 (+0.0202)
        S1            0.5054 → 0.5488 (+0.0434)  0.5054 → 0.5212 (+0.0158)
        S2            0.3467 → 0.3997 (+0.0531)  0.3467 → 0.3665 (+0.0198)
        S3            0.2071 → 0.2706 (+0.0635)  0.2071 → 0.2304 (+0.0233)
        S4            0.1882 → 0.2603 (+0.0722)  0.1882 → 0.2098 (+0.0217)
        S5            0.2148 → 0.2742 (+0.0594)  0.2148 → 0.2338 (+0.0191)
        final from    r02                        r02

        compute A: steps 100, rollouts 3200, tokens 2264280, wall [s]
        compute B: steps 100, rollouts 3200, tokens 5489540, wall [s]
        budget per round: identical in both arms

        ledger      [tmp]
        arm A       branch main (BaT: stage rewards, S-targets)
        arm B       branch replay/xxxxxxxxxxxx-reward-terminal (replay of every round with reward=terminal)
        took        [s]

        next:
          bat -C [tmp] log
          bat -C [tmp] log replay/xxxxxxxxxxxx-reward-terminal
          bat -C [tmp] compare main replay/xxxxxxxxxxxx-reward-terminal
          bat -C [tmp] diff main replay/xxxxxxxxxxxx-reward-terminal        # the two arms' last rounds, section by section
          bat -C [tmp] replay r02 --verify  # re-run a round: bit-identical artifacts
          bat -C [tmp] replay r01..r02 --ablate target=S3
        ");
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
