//! Arms and seeds of `bat run` (issue 30, parts 1–2): `--new` starts an
//! independent arm as a root commit; every branch conflict is refused
//! before any child runs (the trainer and evaluator here are real child
//! processes that append a line to a file on every call), with a hint whose
//! command works; `{seed}` reaches both templates, is recorded and shown;
//! `--seeds` runs one arm per seed and `--resume --seeds` finishes them.

use std::path::{Path, PathBuf};

use run_support::*;

use crate::common::run as run_support;

/// A toy campaign whose trainer and evaluator record every call (with the
/// `{seed}` they received) in `calls.log` before running the toy programs.
struct Recorded {
    toy: Toy,
    calls: PathBuf,
    trainer: PathBuf,
    evaluator: PathBuf,
}

impl Recorded {
    fn new() -> Recorded {
        let toy = Toy::new();
        let calls = toy.root.join("calls.log");
        let wrapper = |name: &str, program: &Path| {
            let sh = toy.root.join(format!("{name}.sh"));
            std::fs::write(
                &sh,
                format!(
                    "echo \"{name} seed=$1\" >> '{}'\nshift\nexec '{}' \"$@\"\n",
                    calls.display(),
                    program.display()
                ),
            )
            .unwrap();
            sh
        };
        let t_sh = wrapper("trainer", &example("toy_trainer"));
        let e_sh = wrapper("evaluator", &example("toy_evaluator"));
        let mut t = vec![
            serde_json::json!("sh"),
            serde_json::json!(t_sh),
            serde_json::json!("{seed}"),
        ];
        t.extend(TOY_TRAINER_ARGS.iter().map(|s| serde_json::json!(s)));
        let trainer = write_json(&toy.root.join("rec-trainer.json"), t.into());
        let evaluator = write_json(
            &toy.root.join("rec-evaluator.json"),
            serde_json::json!([
                "sh",
                e_sh,
                "{seed}",
                "{checkpoint}",
                "{request}",
                "{output}"
            ]),
        );
        Recorded {
            toy,
            calls,
            trainer,
            evaluator,
        }
    }

    /// Campaign arguments (1 round) plus `extra`.
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut a = self.toy.run_args(&self.trainer, &self.evaluator, 1);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    fn run(&self, extra: &[&str]) -> std::process::Output {
        self.toy.run(&self.args(extra))
    }

    /// The recorded calls, and the file emptied.
    fn take_calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.calls).unwrap_or_default();
        let _ = std::fs::remove_file(&self.calls);
        text.lines().map(str::to_string).collect()
    }

    /// Expect a refusal before any child ran; returns stderr.
    fn refused(&self, extra: &[&str], says: &str) -> String {
        let out = self.run(extra);
        let err = stderr(&out);
        assert!(!out.status.success(), "{extra:?} must be refused: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(err.contains("hint: "), "{extra:?} gives a hint: {err}");
        assert_eq!(
            self.take_calls(),
            Vec::<String>::new(),
            "{extra:?}: no child ran"
        );
        assert!(!err.contains("evaluating"), "{err}");
        err
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = ok(bat()
            .arg("-C")
            .arg(&self.toy.ledger)
            .arg("--json")
            .args(args)
            .output()
            .unwrap());
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `bat log --json REV`, newest first.
    fn log(&self, rev: &str) -> Vec<serde_json::Value> {
        self.json(&["log", rev]).as_array().unwrap().clone()
    }
}

/// Every recorded call carries `seed`.
fn assert_seed(calls: &[String], seed: u64) {
    assert!(!calls.is_empty());
    for c in calls {
        assert!(c.ends_with(&format!(" seed={seed}")), "{calls:?}");
    }
    assert!(calls.iter().any(|c| c.starts_with("trainer ")), "{calls:?}");
    assert!(
        calls.iter().any(|c| c.starts_with("evaluator ")),
        "{calls:?}"
    );
}

#[test]
fn every_branch_conflict_is_refused_before_any_child_runs_with_a_hint_that_works() {
    let r = Recorded::new();
    ok(r.run(&["--seed", "5"]));
    assert_seed(&r.take_calls(), 5);
    // The seed is recorded with the round and shown.
    let main = r.log("main");
    assert_eq!(main[0]["metadata"]["loop"]["campaign"]["seed"], 5);
    let show = String::from_utf8(
        ok(bat()
            .arg("-C")
            .arg(&r.toy.ledger)
            .args(["show", "main"])
            .output()
            .unwrap())
        .stdout,
    )
    .unwrap();
    assert!(show.contains("\nseed      5\n"), "{show}");

    // The branch already holds rounds and --resume is not given.
    let err = r.refused(&["--seed", "5"], "branch main already holds rounds");
    assert!(err.contains("`bat run --resume --branch main`"), "{err}");
    assert!(err.contains("`bat run --branch main-2 --new`"), "{err}");
    // Following the hint: an independent arm on main-2, a root commit.
    ok(r.run(&["--seed", "5", "--branch", "main-2", "--new"]));
    assert_seed(&r.take_calls(), 5);
    let arm = r.log("main-2");
    assert_eq!(arm.len(), 1, "only the arm's own round: {arm:?}");
    assert_eq!(arm[0]["parents"], serde_json::json!([]), "{arm:?}");
    // Its baseline is the same object as main's (shared by content).
    let baseline = |rev: &str| {
        let show = r.json(&["show", rev]);
        show["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "baseline-summary.json")
            .map(|f| f["id"].clone())
            .expect("a round holds baseline-summary.json")
    };
    assert_eq!(baseline("main"), baseline("main-2"));
    // The other hint: resuming the finished campaign runs nothing and works.
    ok(r.toy.run(&[
        "run".into(),
        "--resume".into(),
        "--branch".into(),
        "main".into(),
    ]));
    assert_eq!(r.take_calls(), Vec::<String>::new());

    // A new branch would fork from HEAD (main), which holds rounds.
    let err = r.refused(&["--branch", "other"], "would start from HEAD (main)");
    assert!(err.contains("`bat run --branch other --new`"), "{err}");
    assert!(!r.json(&["branch"]).to_string().contains("\"other\""));
    ok(r.run(&["--branch", "other", "--new"]));
    assert_seed(&r.take_calls(), 0);

    // --new on a branch that exists.
    let err = r.refused(
        &["--branch", "other", "--new"],
        "branch other already exists",
    );
    assert!(err.contains("--branch other-2 --new"), "{err}");
    // --new with --resume.
    let out = r.toy.run(&[
        "run".into(),
        "--resume".into(),
        "--new".into(),
        "--branch".into(),
        "other".into(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be used together"),
        "{}",
        stderr(&out)
    );
    assert_eq!(r.take_calls(), Vec::<String>::new());

    // --seeds whose second branch exists: refused before the first arm.
    ok(r.run(&["--branch", "exp/s1", "--new", "--seed", "1"]));
    r.take_calls();
    r.refused(
        &["--branch", "exp", "--seeds", "0..2"],
        "exp/s1 already exists",
    );
    let branches = r.json(&["branch"]).to_string();
    assert!(!branches.contains("exp/s0"), "{branches}");
    ok(bat()
        .arg("-C")
        .arg(&r.toy.ledger)
        .arg("fsck")
        .output()
        .unwrap());
}

#[test]
fn seeds_run_one_root_arm_per_seed_and_resume_finishes_the_unfinished() {
    let r = Recorded::new();
    let out = ok(r.toy.run(&{
        let mut a = vec!["--json".to_string()];
        a.extend(r.args(&["--branch", "exp", "--seeds", "0,3"]));
        a
    }));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arms = v["arms"].as_array().unwrap();
    assert_eq!(arms.len(), 2, "{v}");
    let calls = r.take_calls();
    for (arm, seed) in arms.iter().zip([0u64, 3]) {
        let branch = format!("exp/s{seed}");
        assert_eq!(arm["seed"], seed);
        assert_eq!(arm["branch"], branch.as_str());
        let log = r.log(&branch);
        assert_eq!(arm["head"], log[0]["id"], "{v}");
        assert_eq!(log.len(), 1);
        assert_eq!(log[0]["parents"], serde_json::json!([]));
        assert_eq!(log[0]["metadata"]["loop"]["campaign"]["seed"], seed);
        let n = calls
            .iter()
            .filter(|c| c.ends_with(&format!(" seed={seed}")))
            .count();
        // Baseline and candidate evaluations and one training.
        assert_eq!(n, 3, "{calls:?}");
    }
    // Both finished: a resume runs nothing.
    let resume = |extra: &[&str]| {
        let mut a: Vec<String> = [
            "--json", "run", "--resume", "--branch", "exp", "--seeds", "0,3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        let out = ok(r.toy.run(&a));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let v = resume(&[]);
    for arm in v["arms"].as_array().unwrap() {
        assert_eq!(arm["status"], "already complete", "{v}");
    }
    assert_eq!(r.take_calls(), Vec::<String>::new());
    // Extended to 2 rounds: each seed arm runs one more round, its own seed.
    let v = resume(&["--rounds", "2"]);
    let calls = r.take_calls();
    for seed in [0u64, 3] {
        let log = r.log(&format!("exp/s{seed}"));
        assert_eq!(log.len(), 2, "{v}");
        assert_eq!(log[0]["metadata"]["loop"]["campaign"]["seed"], seed);
        assert!(calls.contains(&format!("trainer seed={seed}")), "{calls:?}");
    }
    // A seed that never started is named, with the command that starts it.
    let out = r.toy.run(&[
        "run".into(),
        "--resume".into(),
        "--branch".into(),
        "exp".into(),
        "--seeds".into(),
        "0..2".into(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("seed 1 has no round on branch exp/s1"),
        "{err}"
    );
    assert!(err.contains("bat run --branch exp --seeds 1"), "{err}");
    ok(r.run(&["--branch", "exp", "--seeds", "1"]));
    assert_seed(&r.take_calls(), 1);
    // --seeds without --branch, and a bad list.
    let out = r.run(&["--seeds", "0..2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = r.run(&["--branch", "x", "--seeds", "2..2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is empty"), "{}", stderr(&out));
    assert_eq!(r.take_calls(), Vec::<String>::new());
}

/// A simulator campaign of `rounds` rounds with `extra` arguments.
fn sim(l: &Path, rounds: u32, extra: &[&str]) -> std::process::Output {
    bat()
        .arg("-C")
        .arg(l)
        .args(["run", "--backend", "sim", "--batches", "2"])
        .args(["--rounds", &rounds.to_string()])
        .args(extra)
        .output()
        .unwrap()
}

fn json_of(l: &Path, args: &[&str]) -> serde_json::Value {
    let out = ok(bat()
        .arg("-C")
        .arg(l)
        .arg("--json")
        .args(args)
        .output()
        .unwrap());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn replay_substitutes_the_recorded_seed_and_seeds_make_one_replay_branch_each() {
    let tmp = tempfile::tempdir().unwrap();
    let l = tmp.path().join("ledger");
    ok(bat().arg("init").arg(&l).output().unwrap());
    ok(sim(&l, 2, &["--seed", "3", "--branch", "a", "--new"]));
    // A verify re-runs seed 3 and reproduces bit for bit.
    let v = json_of(&l, &["replay", "a~1..a", "--verify"]);
    assert_eq!(v["reproduced"], true, "{v}");
    // seed=4 is a fixed-compute ablation recorded on the replay branch.
    let v = json_of(
        &l,
        &["replay", "a", "--ablate", "seed=4", "--branch", "a-seed4"],
    );
    assert_eq!(v["rounds"][0]["same_budget"], true, "{v}");
    let log = json_of(&l, &["log", "a-seed4", "-n", "1"]);
    assert_eq!(log[0]["metadata"]["loop"]["campaign"]["seed"], 4, "{log}");
    // One replay branch per seed, at the same compute.
    let v = json_of(
        &l,
        &[
            "replay",
            "a~1..a",
            "--ablate",
            "reward=terminal",
            "--seeds",
            "0..2",
            "--branch",
            "t",
        ],
    );
    let arms = v["arms"].as_array().unwrap();
    assert_eq!(arms.len(), 2, "{v}");
    for (arm, seed) in arms.iter().zip([0u64, 1]) {
        let branch = format!("t/s{seed}");
        assert_eq!(arm["branch"], branch.as_str(), "{v}");
        let log = json_of(&l, &["log", &branch]);
        assert_eq!(arm["head"], log[0]["id"], "{v}");
        let rounds: Vec<_> = log
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["metadata"]["kind"] == "bat_round")
            .collect();
        assert_eq!(rounds.len(), 2, "{log}");
        for c in rounds {
            assert_eq!(c["metadata"]["loop"]["campaign"]["seed"], seed, "{c}");
        }
        for r in arm["report"]["rounds"].as_array().unwrap() {
            assert_eq!(r["same_budget"], true, "{arm}");
        }
    }
    // The seed branches exist now: a second run is refused before it starts.
    let out = bat()
        .arg("-C")
        .arg(&l)
        .args(["replay", "a~1..a", "--seeds", "1..3", "--branch", "t"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("t/s1"), "{}", stderr(&out));
    assert!(json_of(&l, &["branch"]).to_string().contains("t/s1"));
    assert!(!json_of(&l, &["branch"]).to_string().contains("t/s2"));
}
