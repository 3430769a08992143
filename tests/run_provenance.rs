//! Code provenance without git and replays that depend only on what is
//! recorded, from the user's side: `bat run` with toy templates whose
//! trainer is a script outside any git work tree (its BLAKE3 is recorded,
//! a later edit is reported by `bat replay --verify`), a template declaring
//! an environment variable (recorded; a replay without it refuses before any
//! child runs), and the ablation placeholders (`--require-ablations`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bat_contract::pack::Pack;
use serde_json::{json, Value};

use crate::common::bat;
use crate::common::loop_support::{example, source};

struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    ledger: PathBuf,
    /// The trainer's script: appends a line to `calls`, then runs the toy.
    script: PathBuf,
    calls: PathBuf,
    trainer: PathBuf,
    evaluator: PathBuf,
    init_model: PathBuf,
    src: PathBuf,
}

/// A ledger, a trainer script outside git that records its calls, and the
/// templates: the trainer's and the evaluator's (`*_extra` appended; the
/// evaluator's in object form declaring `evaluator_env` when non-empty).
fn setup(trainer_extra: &[&str], evaluator_extra: &[&str], evaluator_env: &[&str]) -> Setup {
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
    let calls = root.join("calls.txt");
    let script = root.join("train.sh");
    std::fs::write(
        &script,
        format!(
            "echo trainer >> '{}'\nexec '{}' \"$@\"\n",
            calls.display(),
            example("toy_trainer").display()
        ),
    )
    .expect("script");
    let mut t = vec![
        json!("sh"),
        json!(script),
        json!("{checkpoint}"),
        json!("{dataset}"),
        json!("{output}"),
        json!("{health}"),
        json!("{runtime_tool_format}"),
        json!("{round_id}"),
        json!("{target_stage}"),
    ];
    t.extend(trainer_extra.iter().map(|e| json!(e)));
    let trainer = root.join("trainer.json");
    std::fs::write(&trainer, serde_json::to_vec(&t).expect("json")).expect("write");
    let mut argv = json!([
        example("toy_evaluator"),
        "{checkpoint}",
        "{request}",
        "{output}"
    ]);
    if let Some(a) = argv.as_array_mut() {
        a.extend(evaluator_extra.iter().map(|e| json!(e)));
    }
    let e = if evaluator_env.is_empty() {
        argv
    } else {
        json!({"argv": argv, "env": evaluator_env})
    };
    let evaluator = root.join("evaluator.json");
    std::fs::write(&evaluator, serde_json::to_vec(&e).expect("json")).expect("write");
    let src = source(&root, &Pack::default_pack());
    Setup {
        _tmp: tmp,
        root,
        ledger,
        script,
        calls,
        trainer,
        evaluator,
        init_model,
        src,
    }
}

/// `bat -C LEDGER run` of one round with the setup's templates.
fn run(s: &Setup, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = bat();
    c.arg("-C")
        .arg(&s.ledger)
        .arg("run")
        .arg("--source")
        .arg(&s.src)
        .arg("--initial-checkpoint")
        .arg(&s.init_model)
        .arg("--trainer")
        .arg(&s.trainer)
        .arg("--evaluator")
        .arg(&s.evaluator)
        .arg("--work-dir")
        .arg(s.root.join("work"))
        .args([
            "--protocol-id",
            "toy-protocol",
            "--runtime-tool-format",
            "hermes",
            "--rounds",
            "1",
            "--batches",
            "2",
        ])
        .args(extra);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("bat run")
}

fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "failed: {err}");
    err
}

fn provenance(s: &Setup) -> Value {
    let out = bat()
        .arg("-C")
        .arg(&s.ledger)
        .args(["cat", "r01:provenance.json"])
        .output()
        .expect("bat cat");
    ok(&out);
    serde_json::from_slice(&out.stdout).expect("provenance.json")
}

fn calls(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count())
}

#[test]
fn a_script_outside_git_is_digested_and_its_change_reported_by_verify() {
    let s = setup(&["--reward-mode", "{reward_mode}"], &[], &[]);
    let err = ok(&run(&s, &[], &[]));
    let script = s.script.display().to_string();
    assert!(
        err.contains("warning: code not under version control") && err.contains(&script),
        "{err}"
    );
    // The trainer lacks {seed}: warned, not refused.
    assert!(err.contains("lacks {seed}"), "{err}");
    let prov = provenance(&s);
    let files = prov["code_files"].as_array().expect("code_files");
    let entry = files
        .iter()
        .find(|f| f["path"] == script.as_str())
        .unwrap_or_else(|| panic!("{script} not in {files:?}"));
    let bytes = std::fs::read(&s.script).expect("script");
    assert_eq!(entry["role"], "trainer");
    assert_eq!(entry["argv_index"], 1);
    assert_eq!(entry["blake3"], blake3::hash(&bytes).to_hex().as_str());
    assert_eq!(entry["bytes"], bytes.len());
    // argv[0] `sh` was resolved on PATH by bat and digested too.
    assert!(
        files
            .iter()
            .any(|f| f["argv_index"] == 0 && f["named"] == "sh" && f["blake3"].is_string()),
        "{files:?}"
    );
    // Unchanged code: nothing reported.
    let out = bat()
        .arg("-C")
        .arg(&s.ledger)
        .args(["replay", "r01", "--verify"])
        .output()
        .expect("replay");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("since r01 was recorded"), "{err}");
    std::fs::write(&s.script, [&bytes[..], b"# edited\n"].concat()).expect("edit");
    let out = bat()
        .arg("-C")
        .arg(&s.ledger)
        .args(["replay", "r01", "--verify"])
        .output()
        .expect("replay");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "warning: code trainer argv[1] {script} changed since r01 was recorded"
        )),
        "{err}"
    );
    assert!(
        err.contains("the verdict comes from the replayed artifacts"),
        "{err}"
    );
}

#[test]
fn a_declared_variable_is_recorded_and_a_replay_without_it_refuses_before_any_child() {
    let s = setup(
        &["--reward-mode", "{reward_mode}", "--seed", "{seed}"],
        &["--seed", "{seed}"],
        &["BAT_TEST_DECLARED", "BAT_TEST_API_KEY"],
    );
    // Unset: refused before anything runs.
    let out = run(&s, &[], &[("BAT_TEST_DECLARED", "v1")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("BAT_TEST_API_KEY") && err.contains("not set"),
        "{err}"
    );
    assert_eq!(calls(&s.calls), 0, "a child ran");
    let err = ok(&run(
        &s,
        &[],
        &[("BAT_TEST_DECLARED", "v1"), ("BAT_TEST_API_KEY", "hunter2")],
    ));
    assert!(!err.contains("lacks {"), "{err}");
    let prov = provenance(&s);
    let env = prov["environment"].as_array().expect("environment");
    let get = |n: &str| {
        env.iter()
            .find(|e| e["name"] == n)
            .unwrap_or_else(|| panic!("{n} not in {env:?}"))
            .clone()
    };
    assert_eq!(get("BAT_TEST_DECLARED")["value"], "v1");
    assert_eq!(get("BAT_TEST_DECLARED")["role"], "evaluator");
    let key = get("BAT_TEST_API_KEY");
    assert!(key["value"].is_null(), "{key}");
    assert_eq!(key["blake3"], blake3::hash(b"hunter2").to_hex().as_str());
    let before = calls(&s.calls);
    assert_eq!(before, 1);
    let out = bat()
        .arg("-C")
        .arg(&s.ledger)
        .args(["replay", "r01", "--verify"])
        .env("BAT_TEST_API_KEY", "hunter2")
        .env_remove("BAT_TEST_DECLARED")
        .output()
        .expect("replay");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("round r01 declares the environment variable BAT_TEST_DECLARED"),
        "{err}"
    );
    assert_eq!(calls(&s.calls), before, "a child ran before the refusal");
}

#[test]
fn require_ablations_refuses_a_trainer_without_reward_mode_before_anything_runs() {
    let s = setup(&["--seed", "{seed}"], &["--seed", "{seed}"], &[]);
    let out = run(&s, &["--require-ablations"], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lacks {reward_mode}") && err.contains("--ablate reward=terminal"),
        "{err}"
    );
    assert_eq!(calls(&s.calls), 0);
    assert!(!s.root.join("work").exists(), "the work dir was created");
}
