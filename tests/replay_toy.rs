//! `bat replay` and `bat compare` as processes, with the external toy
//! backends (real child processes, real safetensors checkpoints, a real
//! ledger): verify within tolerance, a terminal-reward chain replay with
//! linked commits at the same budget, other ablations, refusals.

use std::path::PathBuf;
use std::process::{Command, Output};

use bat_contract::pack::Pack;
use loop_support::{example, source};
use serde_json::Value;

use crate::common::bat;
use crate::common::loop_support;
use crate::common::stderr;

struct Campaign {
    _tmp: tempfile::TempDir,
    ledger: PathBuf,
    /// A wrapper script the trainer template runs (so a test can change
    /// the "training code" after the campaign).
    script: PathBuf,
}

const WRAPPER: &str = "exec \"$TOY\" \"$@\"\n";

/// A 3-round toy campaign committed with `bat run`. The trainer template
/// has `--reward-mode {reward_mode}` when `reward_mode` is set.
fn campaign(reward_mode: bool) -> Campaign {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().to_path_buf();
    let ledger = root.join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    assert!(bat()
        .arg("init")
        .arg(&ledger)
        .status()
        .expect("init")
        .success());
    let init_model = root.join("initial");
    assert!(Command::new(example("toy_trainer"))
        .arg("--init")
        .arg(&init_model)
        .status()
        .expect("toy init")
        .success());
    let script = root.join("train.sh");
    std::fs::write(
        &script,
        WRAPPER.replace("$TOY", &example("toy_trainer").to_string_lossy()),
    )
    .expect("script");
    let mut t = vec![
        serde_json::json!("sh"),
        serde_json::json!(script),
        serde_json::json!("{checkpoint}"),
        serde_json::json!("{dataset}"),
        serde_json::json!("{output}"),
        serde_json::json!("{health}"),
        serde_json::json!("{runtime_tool_format}"),
        serde_json::json!("{round_id}"),
        serde_json::json!("{target_stage}"),
    ];
    if reward_mode {
        t.push(serde_json::json!("--reward-mode"));
        t.push(serde_json::json!("{reward_mode}"));
    }
    let trainer = root.join("trainer.json");
    std::fs::write(&trainer, serde_json::to_vec(&t).expect("json")).expect("write");
    let evaluator = root.join("evaluator.json");
    std::fs::write(
        &evaluator,
        serde_json::to_vec(&serde_json::json!([
            example("toy_evaluator"),
            "{checkpoint}",
            "{request}",
            "{output}"
        ]))
        .expect("json"),
    )
    .expect("write");
    let src = source(&root, &Pack::default_pack());
    let out = bat()
        .arg("-C")
        .arg(&ledger)
        .arg("run")
        .arg("--source")
        .arg(&src)
        .arg("--initial-checkpoint")
        .arg(&init_model)
        .arg("--trainer")
        .arg(&trainer)
        .arg("--evaluator")
        .arg(&evaluator)
        .args([
            "--protocol-id",
            "toy-protocol",
            "--runtime-tool-format",
            "hermes",
            "--rounds",
            "3",
            "--batches",
            "2",
        ])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "bat run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Campaign {
        _tmp: tmp,
        ledger,
        script,
    }
}

fn in_ledger(c: &Campaign, args: &[&str]) -> Output {
    bat()
        .arg("-C")
        .arg(&c.ledger)
        .args(args)
        .output()
        .expect("bat")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// Round commits of a revision, oldest first: (id, metadata).
fn rounds_of(c: &Campaign, rev: &str) -> Vec<(String, Value)> {
    let log = json_of(&in_ledger(c, &["--json", "log", rev]));
    let mut v: Vec<(String, Value)> = log
        .as_array()
        .expect("log array")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .map(|e| {
            (
                e["id"].as_str().expect("id").to_string(),
                e["metadata"].clone(),
            )
        })
        .collect();
    v.reverse();
    v
}

#[test]
fn verify_reproduces_toy_rounds_within_tolerance_and_names_the_first_difference() {
    let c = campaign(false);
    let originals = rounds_of(&c, "main");
    assert_eq!(originals.len(), 3);

    // One round, then the whole chain.
    let r = json_of(&in_ledger(&c, &["--json", "replay", "r02", "--verify"]));
    assert_eq!(r["reproduced"], true);
    assert_eq!(r["branch"], Value::Null, "a verify commits nothing");
    let v = &r["rounds"][0]["verify"];
    assert_eq!(v["mode"], "tolerance", "external backends compare scores");
    assert_eq!(v["tolerance"], 0.02);
    assert_eq!(v["max_score_delta"], 0.0);
    assert_eq!(
        v["identical"], v["compared"],
        "the toy backends are deterministic"
    );
    assert!(v["compared"].as_u64().expect("count") >= 10);
    assert_eq!(r["rounds"][0]["original"], originals[1].0.as_str());

    let out = in_ledger(&c, &["replay", "r01..r03", "--verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("reproduced: 3 round(s)"), "{text}");
    assert!(text.contains("reproduced within tolerance 0.02"), "{text}");
    assert_eq!(rounds_of(&c, "main").len(), 3, "no commits were added");

    // The training code changes (it ignores the target and trains S2):
    // the verify fails and names the first differing artifact.
    std::fs::write(
        &c.script,
        format!(
            "exec \"{}\" \"$1\" \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" S2\n",
            example("toy_trainer").display()
        ),
    )
    .expect("script");
    let out = in_ledger(&c, &["replay", "r01", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("round r01 did not reproduce"), "{err}");
    assert!(err.contains("first differing artifact candidate"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("DIFFERS"), "{text}");
}

#[test]
fn terminal_reward_chain_replay_is_linked_at_equal_budget_and_compares() {
    let c = campaign(true);
    let originals = rounds_of(&c, "main");
    let r = json_of(&in_ledger(
        &c,
        &[
            "--json",
            "replay",
            "r01..r03",
            "--ablate",
            "reward=terminal",
        ],
    ));
    let branch = format!("replay/{}-reward-terminal", &originals[0].0[..12]);
    assert_eq!(r["branch"], branch.as_str());
    assert_eq!(r["ablation"], serde_json::json!(["reward=terminal"]));
    let rounds = r["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 3);
    for (x, (orig_id, orig_meta)) in rounds.iter().zip(&originals) {
        assert_eq!(x["original"], orig_id.as_str());
        assert_eq!(x["same_budget"], true);
        assert_eq!(x["compute"]["budget"], x["original_compute"]["budget"]);
        assert_eq!(
            x["compute"]["budget"]["trainer"]["steps"], 2,
            "the toy's declared budget is recorded"
        );
        assert_eq!(x["compute"]["measured"], x["original_compute"]["measured"]);
        assert!(x["compute"]["trainer_wall_seconds"].as_f64().is_some());
        assert_eq!(x["original_gate_status"], orig_meta["gate_status"]);
    }
    // Terminal reward trains every stage a little: a different candidate.
    assert_ne!(
        rounds[0]["scores"]["S1"], rounds[0]["original_scores"]["S1"],
        "the ablation changed training"
    );

    // The replay branch holds exactly the three linked replay commits.
    let replayed = rounds_of(&c, &branch);
    assert_eq!(
        replayed.len(),
        3,
        "an orphan chain: r01 was the first commit"
    );
    for ((_, m), (orig_id, orig)) in replayed.iter().zip(&originals) {
        assert_eq!(m["kind"], "bat_round");
        assert_eq!(m["replay_of"], orig_id.as_str());
        assert_eq!(m["replay_of_round_id"], orig["round_id"]);
        assert_eq!(m["ablation"], "reward=terminal");
        assert_eq!(m["round_id"], orig["round_id"]);
        assert_eq!(m["budget"], orig["budget"]);
    }
    let rj = in_ledger(&c, &["cat", &format!("{branch}:round.json")]);
    let rj: Value = serde_json::from_slice(&rj.stdout).expect("round.json");
    assert_eq!(rj["kind"], "replay");
    assert_eq!(rj["replay_of"], originals[2].0.as_str());
    assert_eq!(rj["ablation"]["reward"], "terminal");
    let prov = in_ledger(&c, &["cat", &format!("{branch}:provenance.json")]);
    let prov: Value = serde_json::from_slice(&prov.stdout).expect("provenance.json");
    assert!(prov["measured_by_bat"]["trainer_wall_seconds"]
        .as_f64()
        .is_some());
    // The original rounds are untouched.
    assert_eq!(rounds_of(&c, "main"), originals);
    // The ledger is consistent.
    assert!(in_ledger(&c, &["fsck"]).status.success());

    // compare: the arms side by side.
    let cmp = json_of(&in_ledger(&c, &["--json", "compare", "main", &branch]));
    assert_eq!(cmp["same_budget"], true);
    assert_eq!(cmp["b"]["ablation"], "reward=terminal");
    assert_eq!(cmp["a"]["ablation"], "");
    assert_eq!(
        cmp["a"]["base"], cmp["b"]["base"],
        "both arms start from the same checkpoint"
    );
    assert_eq!(cmp["a"]["rounds"].as_array().map(Vec::len), Some(3));
    assert_eq!(cmp["b"]["rounds"].as_array().map(Vec::len), Some(3));
    assert_eq!(cmp["a"]["compute"]["steps"], cmp["b"]["compute"]["steps"]);
    // The final checkpoint of arm A is its last promoted round's.
    let last_promoted = originals
        .iter()
        .rev()
        .find(|(_, m)| m["gate_status"] == "promote")
        .map(|(_, m)| m["round_id"].clone());
    assert_eq!(
        cmp["a"]["final_round"],
        last_promoted.unwrap_or(Value::Null)
    );
    if let Some((_, m)) = originals
        .iter()
        .rev()
        .find(|(_, m)| m["gate_status"] == "promote")
    {
        assert_eq!(cmp["a"]["final_scores"]["overall"], m["scores"]["overall"]);
    }
    let text = in_ledger(&c, &["compare", "main", &branch]);
    let text = String::from_utf8_lossy(&text.stdout);
    for needle in [
        "Overall",
        "agentic",
        "S5",
        "→",
        "reward=terminal",
        "identical in both arms",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }

    // The same replay again: its branch exists.
    let again = in_ledger(&c, &["replay", "r01..r03", "--ablate", "reward=terminal"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn fixed_target_and_gate_off_evolve_on_their_own_branch() {
    let c = campaign(false);
    let originals = rounds_of(&c, "main");
    let r = json_of(&in_ledger(
        &c,
        &[
            "--json",
            "replay",
            "r02..r03",
            "--ablate",
            "target=S5",
            "--ablate",
            "gate=off",
            "--branch",
            "arm/s5",
        ],
    ));
    assert_eq!(r["branch"], "arm/s5");
    for x in r["rounds"].as_array().expect("rounds") {
        assert_eq!(x["target_stage"], "S5");
        assert_eq!(x["inherited"], true, "gate=off inherits every candidate");
    }
    // r02's replay forks where r02 started: after r01.
    let arm = rounds_of(&c, "arm/s5");
    assert_eq!(arm.len(), 3);
    assert_eq!(arm[0].0, originals[0].0, "r01 is shared history");
    assert_eq!(arm[1].1["replay_of"], originals[1].0.as_str());
    assert_eq!(arm[1].1["ablation"], "target=S5,gate=off");
    assert_eq!(arm[2].1["target_stage"], "S5");
    // The second replayed round trained from the first one's candidate.
    assert_eq!(
        arm[2].1["trained_from_checkpoint_sha256"],
        arm[1].1["candidate_checkpoint_sha256"]
    );
}

#[test]
fn budget_changes_are_refused_unless_allowed() {
    let c = campaign(false);
    let out = in_ledger(&c, &["replay", "r01", "--ablate", "batches=3"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("changes the compute budget"), "{err}");
    assert!(err.contains("--allow-compute-change"), "{err}");
    let branches = in_ledger(&c, &["branch"]);
    assert!(
        !String::from_utf8_lossy(&branches.stdout).contains("replay/"),
        "nothing was recorded"
    );
    let r = json_of(&in_ledger(
        &c,
        &[
            "--json",
            "replay",
            "r01",
            "--ablate",
            "batches=3",
            "--allow-compute-change",
        ],
    ));
    let x = &r["rounds"][0];
    assert_eq!(x["same_budget"], false);
    assert_eq!(x["original_compute"]["budget"]["data"]["batches"], 2);
    assert_eq!(x["compute"]["budget"]["data"]["batches"], 3);
    let branch = r["branch"].as_str().expect("branch");
    assert!(branch.ends_with("-batches-3"), "{branch}");
    // Arms at other budgets are not comparable: exit 1 unless allowed.
    let out = in_ledger(&c, &["--json", "compare", "main", branch]);
    assert_eq!(out.status.code(), Some(1));
    let cmp = json_of(&in_ledger(
        &c,
        &[
            "--json",
            "compare",
            "main",
            branch,
            "--allow-difference",
            "budget",
        ],
    ));
    assert_eq!(cmp["same_budget"], false);
    assert_eq!(cmp["differences"][0]["field"], "budget");
}

#[test]
fn bad_revisions_keys_values_and_templates_are_refused() {
    let c = campaign(false);
    let cases: [(&[&str], i32, &str); 7] = [
        (&["replay", "nope"], 2, "nope is not a round commit"),
        (
            &["replay", "r01", "--ablate", "foo=1"],
            2,
            "unknown ablation key `foo`",
        ),
        (
            &["replay", "r01", "--ablate", "target=S9"],
            2,
            "target=S9 is not valid",
        ),
        (
            &["replay", "r01", "--ablate", "gate"],
            2,
            "is not KEY=VALUE",
        ),
        (
            &[
                "replay", "r01", "--ablate", "gate=off", "--ablate", "gate=off",
            ],
            2,
            "given twice",
        ),
        (&["replay", "r03..r01"], 2, "is not an ancestor"),
        // The recorded template has no {reward_mode}.
        (
            &["replay", "r01", "--ablate", "reward=terminal"],
            1,
            "has no {reward_mode} placeholder",
        ),
    ];
    for (args, code, needle) in cases {
        let out = in_ledger(&c, args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    // --verify takes no overrides (clap refuses the combination).
    let out = in_ledger(&c, &["replay", "r01", "--verify", "--ablate", "gate=off"]);
    assert_eq!(out.status.code(), Some(2));
    // Nothing was recorded by any of them.
    let branches = String::from_utf8_lossy(&in_ledger(&c, &["branch"]).stdout).into_owned();
    assert!(!branches.contains("replay/"), "{branches}");
}
