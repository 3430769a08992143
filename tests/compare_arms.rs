//! `bat compare` with arm groups, as a process on one simulator ledger:
//! four seeds of the BaT arm (`bat/s0..3`), four of the terminal-reward
//! arm (`terminal/s0..3`), four more BaT seeds (`more/s4..7`), and one arm
//! run at another budget (`wide/s0`).
//! Globs and comma lists resolve to their branches; BaT is ahead of the
//! terminal reward; two groups of BaT seeds are not distinguishable under
//! the default scheme; every score has its intervals per round and per
//! pair; the
//! same flags print the same bytes; a budget difference exits 1 unless
//! allowed; and the text is an insta snapshot.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{self, bat_in, succeeded, text};

const ROUNDS: &str = "3";
const BATCHES: &str = "2";

/// One ledger for every test of this file (the temp dir is leaked on
/// purpose; it goes with /tmp).
fn ledger() -> &'static Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp").keep().join("ledger");
        std::fs::create_dir_all(&dir).expect("mkdir");
        succeeded(common::bat().arg("init").arg(&dir).output().expect("init"));
        let run = |branch: &str, seed: &str, mode: &str, batches: &str| {
            succeeded(
                bat_in(&dir)
                    .args([
                        "run",
                        "--backend",
                        "sim",
                        "--rounds",
                        ROUNDS,
                        "--batches",
                        batches,
                        "--seed",
                        seed,
                        "--reward-mode",
                        mode,
                        "--branch",
                        branch,
                    ])
                    .output()
                    .expect("run"),
            );
        };
        for s in ["0", "1", "2", "3"] {
            run(&format!("bat/s{s}"), s, "stage", BATCHES);
        }
        for s in ["0", "1", "2", "3"] {
            run(&format!("terminal/s{s}"), s, "terminal", BATCHES);
        }
        // Four more seeds of the BaT method, for same-method comparisons.
        for s in ["4", "5", "6", "7"] {
            run(&format!("more/s{s}"), s, "stage", BATCHES);
        }
        run("wide/s0", "0", "stage", "3");
        dir
    })
}

fn compare(args: &[&str]) -> std::process::Output {
    bat_in(ledger())
        .arg("compare")
        .args(args)
        .output()
        .expect("spawn bat compare")
}

fn compare_json(args: &[&str]) -> Value {
    compare_json_in(ledger(), args)
}

fn compare_json_in(dir: &Path, args: &[&str]) -> Value {
    let out = bat_in(dir)
        .args(["--json", "compare"])
        .args(args)
        .output()
        .expect("spawn bat compare");
    assert!(
        out.status.success(),
        "bat compare {args:?} failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("compare --json")
}

fn overall(pair: &Value) -> &Value {
    &pair["scores"][0]
}

#[test]
fn bat_is_ahead_of_the_terminal_reward_across_seeds() {
    let v = compare_json(&["bat/s0,bat/s1,bat/s2,bat/s3", "terminal/*"]);
    let members: Vec<&str> = v["arms"][1]["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        members,
        ["terminal/s0", "terminal/s1", "terminal/s2", "terminal/s3"]
    );
    assert_eq!(v["arms"][1]["label"], "terminal");
    assert_eq!(v["bootstrap"]["resamples"], 10000);
    assert_eq!(v["bootstrap"]["scheme"], "runs");
    assert_eq!(v["comparable"], true, "{}", v["differences"]);
    let p = overall(&v["pairs"][0]);
    assert_eq!(p["score"], "overall");
    eprintln!(
        "bat − terminal overall: {} [{}, {}], P(bat>terminal) {} [{}, {}]",
        p["difference"]["point"],
        p["difference"]["lo"],
        p["difference"]["hi"],
        p["improvement"]["point"],
        p["improvement"]["lo"],
        p["improvement"]["hi"]
    );
    assert_eq!(p["verdict"], "a_ahead", "{p}");
    assert_eq!(
        v["pairs"][0]["verdict"],
        "bat/s0,bat/s1,bat/s2,bat/s3 ahead"
    );
    let lo = p["difference"]["lo"].as_f64().expect("lo");
    assert!(lo > 0.0, "{p}");
    // Every score of the final checkpoint is there, with its interval
    // around the point.
    for s in v["arms"][0]["scores"].as_array().expect("scores") {
        let (lo, pt, hi) = (
            s["mean"]["lo"].as_f64().expect("lo"),
            s["mean"]["point"].as_f64().expect("point"),
            s["mean"]["hi"].as_f64().expect("hi"),
        );
        assert!(lo <= pt && pt <= hi, "{s}");
    }
    let names: Vec<&str> = v["arms"][0]["scores"]
        .as_array()
        .expect("scores")
        .iter()
        .filter_map(|s| s["score"].as_str())
        .collect();
    for want in ["overall", "task", "agentic", "S1", "S5"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert!(names.iter().any(|n| n.starts_with("track:")), "{names:?}");
    // Per round, always in --json.
    assert_eq!(v["arms"][0]["rounds"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["pairs"][0]["rounds"].as_array().map(Vec::len), Some(3));
}

/// The Overall difference of the first pair: (point, lo, hi, verdict).
fn overall_difference(v: &Value) -> (f64, f64, f64, String) {
    let p = overall(&v["pairs"][0]);
    let d = &p["difference"];
    (
        d["point"].as_f64().expect("point"),
        d["lo"].as_f64().expect("lo"),
        d["hi"].as_f64().expect("hi"),
        p["verdict"].as_str().expect("verdict").to_string(),
    )
}

#[test]
fn two_groups_of_bat_seeds_are_not_distinguishable() {
    // Four seeds of the BaT method against four other seeds of it, under
    // the DEFAULT scheme: each (track, task) draws seeds first, then each
    // drawn seed's repeats, so the repeats of one seed do not count as
    // independent runs. Each seed starts from its own initial policy
    // (the simulator's seed is also its initial policy's): allowed.
    let allow = ["--allow-difference", "base-checkpoint"];
    let v = compare_json(&["bat/*", "more/*", allow[0], allow[1]]);
    assert_eq!(v["bootstrap"]["scheme"], "runs");
    let (point, lo, hi, verdict) = overall_difference(&v);
    eprintln!(
        "bat s0..s3 − s4..s7 overall (default scheme): {point:+.4} [{lo:+.4}, {hi:+.4}] {verdict}"
    );
    assert_eq!(verdict, "not_distinguishable");
    assert_eq!(v["pairs"][0]["verdict"], "not distinguishable");
    // Interleaved seeds too.
    let v = compare_json(&[
        "bat/s0,bat/s2,more/s4,more/s6",
        "bat/s1,bat/s3,more/s5,more/s7",
        allow[0],
        allow[1],
    ]);
    let (point, lo, hi, verdict) = overall_difference(&v);
    eprintln!("bat s0,2,4,6 − s1,3,5,7 overall (default scheme): {point:+.4} [{lo:+.4}, {hi:+.4}] {verdict}");
    assert_eq!(verdict, "not_distinguishable");
    // One seed against one: not distinguishable either.
    let v = compare_json(&["bat/s0", "bat/s1", allow[0], allow[1]]);
    assert_eq!(v["differences"][0]["field"], "base-checkpoint");
    assert_eq!(overall_difference(&v).3, "not_distinguishable");
    // Two against two, with s2 (whose initial policy starts lowest) on one
    // side: the default scheme tells them apart — two seeds cannot show
    // how much seeds vary (docs/experiments.md gives the figures); the
    // tasks scheme does not.
    let v = compare_json(&["bat/s0,bat/s1", "bat/s2,bat/s3", allow[0], allow[1]]);
    let (point, lo, hi, verdict) = overall_difference(&v);
    eprintln!(
        "bat s0,s1 − s2,s3 overall (default scheme): {point:+.4} [{lo:+.4}, {hi:+.4}] {verdict}"
    );
    let t = compare_json(&[
        "bat/s0,bat/s1",
        "bat/s2,bat/s3",
        "--resample",
        "tasks",
        allow[0],
        allow[1],
    ]);
    assert_eq!(t["bootstrap"]["scheme"], "tasks");
    let (tp, tlo, thi, tv) = overall_difference(&t);
    eprintln!("bat s0,s1 − s2,s3 overall (tasks scheme): {tp:+.4} [{tlo:+.4}, {thi:+.4}] {tv}");
    assert_eq!(tv, "not_distinguishable");
    assert!(thi - tlo > hi - lo, "resampling tasks too is wider");
}

#[test]
fn every_score_has_intervals_per_round_and_per_pair() {
    let v = compare_json(&["bat/*", "terminal/*", "--resamples", "2000"]);
    let finals: Vec<String> = v["arms"][0]["scores"]
        .as_array()
        .expect("scores")
        .iter()
        .map(|s| s["score"].as_str().expect("name").to_string())
        .collect();
    let inside = |e: &Value| {
        let (lo, pt, hi) = (
            e["lo"].as_f64().expect("lo"),
            e["point"].as_f64().expect("point"),
            e["hi"].as_f64().expect("hi"),
        );
        lo <= pt + 1e-12 && pt <= hi + 1e-12
    };
    for arm in v["arms"].as_array().expect("arms") {
        for r in arm["rounds"].as_array().expect("rounds") {
            let names: Vec<&str> = r["scores"]
                .as_array()
                .expect("round scores")
                .iter()
                .filter_map(|s| s["score"].as_str())
                .collect();
            assert_eq!(names, finals, "every score at every round");
            for s in r["scores"].as_array().expect("round scores") {
                assert!(inside(&s["mean"]), "{s}");
            }
            assert_eq!(r["overall"], r["scores"][0]["mean"]);
        }
    }
    for p in v["pairs"][0]["scores"].as_array().expect("pair scores") {
        // P(A>B) has its interval for every score, not only overall.
        assert!(inside(&p["improvement"]), "{p}");
        assert!(inside(&p["difference"]), "{p}");
    }
    // The per-round text table shows the score asked for.
    let out = compare(&["bat/*", "terminal/*", "--score", "S3", "--resamples", "300"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains("per round: S3 of the checkpoint after the round"),
        "{t}"
    );
    let out = compare(&["bat/*", "terminal/*", "--score", "S9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("one of: overall"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_same_flags_print_the_same_bytes_and_are_echoed() {
    let args = [
        "bat/*",
        "terminal/*",
        "--resamples",
        "700",
        "--bootstrap-seed",
        "9",
        "--resample",
        "tasks",
    ];
    let (a, b) = (compare(&args), compare(&args));
    assert!(a.status.success(), "{}", text(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let t = text(&a.stdout);
    assert!(t.contains("700 resamples, seed 9, scheme tasks"), "{t}");
    let other = compare(&[
        "bat/*",
        "terminal/*",
        "--resamples",
        "700",
        "--bootstrap-seed",
        "10",
        "--resample",
        "tasks",
    ]);
    assert_ne!(a.stdout, other.stdout, "another seed draws other resamples");
}

#[test]
fn a_budget_difference_exits_1_unless_allowed() {
    let out = compare(&["bat/s0", "wide/s0"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains("NOT COMPARABLE") && t.contains("budget differs"),
        "{t}"
    );
    // The two-arm round table is still there.
    assert!(t.contains("base → final"), "{t}");
    let out = compare(&["bat/s0", "wide/s0", "--allow-difference", "budget"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("budget differs (allowed)"), "{t}");
    let v = compare_json(&["bat/s0", "wide/s0", "--allow-difference", "budget"]);
    assert_eq!(v["differences"][0]["field"], "budget");
    assert_eq!(v["differences"][0]["allowed"], true);
    assert_eq!(v["same_budget"], false, "the two-arm fields stay");
    let out = compare(&["bat/s0", "wide/s0", "--allow-difference", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_glob_that_matches_nothing_names_it_and_lists_branches() {
    let out = compare(&["grpo/*", "bat/*"]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(
        e.contains("grpo/*") && e.contains("bat/s0") && e.contains("terminal/s2"),
        "{e}"
    );
}

#[test]
fn compare_text_snapshot() {
    let out = compare(&["bat/*", "terminal/*", "--per-round", "--resamples", "1000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    insta::assert_snapshot!("compare_arms_text", text(&out.stdout));
}

/// `bat revert rNN --branch B` undoes B's round rNN whatever HEAD is (every
/// seed has its own rNN), and `compare` then takes that member's final
/// checkpoint from the round promoted before it; the other members keep
/// theirs.
#[test]
fn a_reverted_promotion_is_not_the_final_checkpoint() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("ledger");
    std::fs::create_dir_all(&dir).expect("mkdir");
    succeeded(common::bat().arg("init").arg(&dir).output().expect("init"));
    for (branch, seed, mode) in [
        ("a/s0", "0", "stage"),
        ("a/s1", "1", "stage"),
        ("b/s0", "0", "terminal"),
        ("b/s1", "1", "terminal"),
    ] {
        succeeded(
            bat_in(&dir)
                .args(["run", "--backend", "sim", "--rounds", ROUNDS])
                .args(["--batches", BATCHES, "--seed", seed, "--reward-mode", mode])
                .args(["--branch", branch])
                .output()
                .expect("run"),
        );
    }
    // Newest first.
    let promoted: Vec<String> = common::run::logged_rounds_on(&dir, Some("a/s1"))
        .iter()
        .filter(|r| r["gate_status"] == "promote")
        .map(|r| r["round_id"].as_str().expect("round id").to_string())
        .collect();
    assert!(!promoted.is_empty(), "a/s1 promoted no round");
    let before = compare_json_in(&dir, &["a/*", "b/*"]);
    assert_eq!(before["arms"][0]["final_rounds"][1], promoted[0].as_str());

    succeeded(
        bat_in(&dir)
            .args(["revert", &promoted[0], "--branch", "a/s1"])
            .output()
            .expect("revert"),
    );
    let after = compare_json_in(&dir, &["a/*", "b/*"]);
    let previous = promoted
        .get(1)
        .map_or(Value::Null, |r| Value::from(r.as_str()));
    assert_eq!(after["arms"][0]["final_rounds"][1], previous);
    assert_eq!(
        after["arms"][0]["final_rounds"][0],
        before["arms"][0]["final_rounds"][0]
    );
    assert_eq!(after["arms"][1], before["arms"][1]);
}
