//! `bat run` as a process: output streams, errors, the conformance case
//! committed round by round, and kill -9 + `--resume`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bat_contract::pack::Pack;
use loop_support::*;

use crate::common::bat;
use crate::common::loop_support;
use crate::common::write_json;

/// A ledger in `dir/ledger` and a written template file.
fn init(dir: &Path) -> PathBuf {
    let l = dir.join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    let out = bat().arg("init").arg(&l).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    l
}

struct Toy {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    ledger: PathBuf,
    args: Vec<String>,
}

/// A toy campaign's arguments (ledger, templates, initial model, source).
fn toy(trainer_extra: &[&str], rounds: u32) -> Toy {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let ledger = init(&root);
    let init_model = root.join("initial");
    assert!(Command::new(example("toy_trainer"))
        .arg("--init")
        .arg(&init_model)
        .status()
        .unwrap()
        .success());
    let mut t = vec![
        serde_json::json!(example("toy_trainer")),
        serde_json::json!("{checkpoint}"),
        serde_json::json!("{dataset}"),
        serde_json::json!("{output}"),
        serde_json::json!("{health}"),
        serde_json::json!("{runtime_tool_format}"),
        serde_json::json!("{round_id}"),
        serde_json::json!("{target_stage}"),
    ];
    t.extend(trainer_extra.iter().map(|s| serde_json::json!(s)));
    let trainer = write_json(&root.join("trainer.json"), serde_json::Value::Array(t));
    let evaluator = write_json(
        &root.join("evaluator.json"),
        serde_json::json!([
            example("toy_evaluator"),
            "{checkpoint}",
            "{request}",
            "{output}"
        ]),
    );
    let src = source(&root, &Pack::default_pack());
    let args: Vec<String> = [
        "run",
        "--source",
        &src.to_string_lossy(),
        "--initial-checkpoint",
        &init_model.to_string_lossy(),
        "--trainer",
        &trainer.to_string_lossy(),
        "--evaluator",
        &evaluator.to_string_lossy(),
        "--protocol-id",
        "toy-protocol",
        "--runtime-tool-format",
        "hermes",
        "--rounds",
        &rounds.to_string(),
        "--batches",
        "2",
        "--work-dir",
        &root.join("W").to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Toy {
        _tmp: tmp,
        root,
        ledger,
        args,
    }
}

fn run_in(ledger: &Path, args: &[String]) -> Output {
    bat().arg("-C").arg(ledger).args(args).output().unwrap()
}

/// The metadata of every round commit in `bat log --json`, newest first.
fn logged_rounds(ledger: &Path) -> Vec<serde_json::Value> {
    let out = bat()
        .arg("-C")
        .arg(ledger)
        .args(["--json", "log"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // `bat log --json` is an array of commits; round commits carry their
    // record in `metadata` (the indexed `fields` repeat some of it).
    v.as_array()
        .expect("log --json prints an array")
        .iter()
        .filter_map(|c| c.get("metadata"))
        .filter(|m| m.get("kind").and_then(|k| k.as_str()) == Some("bat_round"))
        .cloned()
        .collect()
}

fn fsck_ok(ledger: &Path) {
    let out = bat()
        .arg("-C")
        .arg(ledger)
        .args(["--json", "fsck"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn usage_and_template_errors_refuse_before_running_anything() {
    let t = toy(&[], 1);
    // Missing campaign arguments.
    let out = run_in(&t.ledger, &["run".into(), "--rounds".into(), "2".into()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing required argument"));
    // A template that is not an array of non-empty strings.
    let bad = write_json(&t.root.join("bad.json"), serde_json::json!(["ok", ""]));
    let mut args = t.args.clone();
    let i = args.iter().position(|a| a == "--trainer").unwrap();
    args[i + 1] = bad.to_string_lossy().into_owned();
    let out = run_in(&t.ledger, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: command template ") && err.contains("argv[1] is an empty string"),
        "{err}"
    );
    assert!(!t.root.join("W").exists());
    // Bad loop size.
    let mut args = t.args.clone();
    let i = args.iter().position(|a| a == "--rounds").unwrap();
    args[i + 1] = "0".into();
    let out = run_in(&t.ledger, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "error: the loop size is not valid: rounds and batches must each be at least 1"
        ),
        "{err}"
    );
    // --resume takes the campaign from the ledger, not from arguments.
    let mut args = t.args.clone();
    args.push("--resume".into());
    let out = run_in(&t.ledger, &args);
    assert_eq!(out.status.code(), Some(2));
    assert!(!t.root.join("W").exists());
    // Nothing to resume in a fresh ledger.
    let out = run_in(&t.ledger, &["run".into(), "--resume".into()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to resume"));
}

#[test]
fn a_failing_trainer_is_reported_and_its_output_streamed_to_stderr() {
    let t = toy(&["--fail-on", "r01"], 2);
    let mut args = vec!["--json".to_string()];
    args.extend(t.args.clone());
    let out = run_in(&t.ledger, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "stdout stays for the result only");
    assert!(
        err.contains("toy_trainer: r01: simulated training failure"),
        "{err}"
    );
    assert!(err.contains("toy_evaluator: wrote 7 cells"), "{err}");
    // With --json the error is one JSON object on stderr's last line: the
    // sentence for people, the reference's code for programs.
    let last = err.lines().last().expect("an error line");
    let e: serde_json::Value = serde_json::from_str(last).expect(last);
    assert_eq!(e["error"], "the trainer exited with status 2 in round r01");
    assert_eq!(e["code"], "trainer_failed:r01:2");
    assert_eq!(e["kind"], "failure");
    assert_eq!(e["exit_code"], 1);
    assert!(e["hints"].as_array().is_some_and(|h| !h.is_empty()), "{e}");
    // The baseline evaluation is in the work dir exactly as the reference's.
    let mut names = files(&t.root.join("W/baseline-eval"));
    names.sort();
    assert_eq!(
        names,
        [
            "checkpoint-binding.json",
            "eval-request.json",
            "raw-evaluation.json",
            "receipt.json",
            "summary.json"
        ]
    );
    // Logs are in the ledger's run area, not in the work dir.
    let runs = t.ledger.join(".bat/runs");
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = std::fs::read_to_string(run.join("logs/r01/trainer.stderr")).unwrap();
    assert!(log.contains("simulated training failure"));
    fsck_ok(&t.ledger);
}

#[test]
fn conformance_case_through_the_cli_commits_each_round() {
    let tmp = tempfile::tempdir().unwrap();
    let ledger = init(tmp.path());
    let fx = fixtures(tmp.path());
    let src = source(tmp.path(), &Pack::default_pack());
    let work = tmp.path().join("W");
    // The fixture trainer copies `candidates/<round>`: run from the fixtures.
    let out = bat()
        .current_dir(&fx)
        .arg("-C")
        .arg(&ledger)
        .arg("--json")
        .args(["run", "--source"])
        .arg(&src)
        .args(["--initial-checkpoint", "initial"])
        .args(["--trainer", "trainer-command.json"])
        .args(["--evaluator", "evaluator-command.json"])
        .args(["--protocol-id", "bat-conformance-protocol"])
        .args(["--runtime-tool-format", "hermes"])
        .args(["--rounds", "3", "--batches", "1", "--work-dir"])
        .arg(&work)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.stdout,
        std::fs::read(data().join("expected-stdout.json")).unwrap()
    );
    let expected = data().join("expected-work-dir");
    for f in files(&expected) {
        assert_eq!(
            std::fs::read(work.join(&f)).unwrap(),
            std::fs::read(expected.join(&f)).unwrap(),
            "{f}"
        );
    }
    let rounds = logged_rounds(&ledger);
    let mut ids: Vec<(String, String)> = rounds
        .iter()
        .map(|r| {
            assert!(r
                .get("loop")
                .is_some_and(|l| l.get("history_entry").is_some()));
            (
                r["round_id"].as_str().unwrap().to_string(),
                r["gate_status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            ("r01".to_string(), "promote".to_string()),
            ("r02".into(), "hold".into()),
            ("r03".into(), "promote".into())
        ]
    );
    fsck_ok(&ledger);
}

#[test]
fn kill_9_mid_round_then_resume_commits_each_round_exactly_once() {
    let t = toy(&["--sleep-on", "r02:3"], 3);
    let mut child = bat()
        .arg("-C")
        .arg(&t.ledger)
        .args(&t.args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until round 2's trainer is running (its data is materialized).
    let marker = t.root.join("W/r02/data/manifest.json");
    let start = Instant::now();
    while !marker.is_file() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "r02 never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "bat run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let st = Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let _ = child.wait();
    // Let the orphaned trainer finish its sleep before resuming.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(logged_rounds(&t.ledger).len(), 1, "only r01 was committed");
    let out = run_in(
        &t.ledger,
        &["--json".into(), "run".into(), "--resume".into()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "complete");
    assert_eq!(result["history"].as_array().unwrap().len(), 3);
    let mut ids: Vec<String> = logged_rounds(&t.ledger)
        .iter()
        .map(|r| r["round_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["r01", "r02", "r03"]);
    fsck_ok(&t.ledger);
    // Resuming again runs nothing and commits nothing.
    let again = run_in(
        &t.ledger,
        &["--json".into(), "run".into(), "--resume".into()],
    );
    assert!(again.status.success());
    assert_eq!(again.stdout, out.stdout);
    assert_eq!(logged_rounds(&t.ledger).len(), 3);
}

/// Retention on a campaign with held rounds (issue 17): `gc --keep
/// promoted,last=2` drops the candidates of held rounds outside the last
/// two, keeps the promoted one readable, and history stays whole.
#[test]
fn gc_keep_prunes_held_candidates_and_keeps_the_promoted_one() {
    let t = toy(&[], 5);
    let out = run_in(&t.ledger, &t.args);
    assert!(out.status.success(), "{out:?}");
    let json = |args: &[&str]| -> serde_json::Value {
        let out = bat()
            .arg("-C")
            .arg(&t.ledger)
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let rounds = logged_rounds(&t.ledger);
    let status = |rid: &str| -> String {
        rounds.iter().find(|r| r["round_id"] == rid).unwrap()["gate_status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(rounds.len(), 5);
    // Held rounds outside the last two (r04, r05): the toy campaign holds
    // r03 (and r05).
    let held: Vec<&str> = ["r01", "r02", "r03"]
        .into_iter()
        .filter(|r| status(r) == "hold")
        .collect();
    assert!(
        !held.is_empty(),
        "the toy campaign holds a round before r04"
    );
    let promoted_tip = json(&["log", "refs/promoted/main", "-n", "1"])[0]["metadata"]["round_id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = json(&["stats"]);
    let rep = json(&["gc", "--keep", "promoted,last=2"]);
    let pruned: Vec<String> = rep["retention"]["pruned_rounds"]
        .as_array()
        .map(|a| a.iter().map(|r| r.to_string()).collect())
        .unwrap_or_default();
    assert!(
        rep["pruned_files"].as_u64().unwrap() > 0,
        "held candidates are pruned: {rep}"
    );
    let after = json(&["stats"]);
    assert!(
        after["pack_bytes"].as_u64().unwrap() < before["pack_bytes"].as_u64().unwrap(),
        "{before} -> {after}"
    );
    // The held round's candidate is gone and says so; the promoted and the
    // last rounds' candidates read back.
    let cat = |rid: &str| {
        bat()
            .arg("-C")
            .arg(&t.ledger)
            .args(["cat", &format!("{rid}:candidate/model.safetensors")])
            .output()
            .unwrap()
    };
    for rid in &held {
        let o = cat(rid);
        assert!(!o.status.success(), "{rid} kept; pruned: {pruned:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("pruned"), "{err}");
    }
    for rid in [promoted_tip.as_str(), "r04", "r05"] {
        let o = cat(rid);
        assert!(o.status.success(), "{rid}: {o:?}");
    }
    assert_eq!(logged_rounds(&t.ledger).len(), 5);
    fsck_ok(&t.ledger);
}
