//! `bat run` checks its argv templates before anything runs: unknown,
//! embedded and missing placeholders are named with the template file and
//! the argv position, malformed JSON with its line and column; nothing is
//! evaluated and no work dir is made. `{reward_mode}` reaches the trainer
//! substituted. A failure before the first commit does not suggest
//! `--resume`.

use run_support::*;

use crate::common::run as run_support;

/// Run with `trainer`/`evaluator` replaced, expecting a refusal (exit 2)
/// before anything ran; returns stderr.
fn refused(t: &Toy, trainer: &std::path::Path, evaluator: &std::path::Path) -> String {
    let mut args = t.run_args(trainer, evaluator, 1);
    let w = t.root.join("W");
    args.extend(["--work-dir".into(), w.to_string_lossy().into_owned()]);
    let out = t.run(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!w.exists(), "the work dir was made: {err}");
    assert!(
        !t.ledger.join(".bat/runs").exists(),
        "a run started (baseline evaluated?): {err}"
    );
    assert!(!err.contains("--resume"), "{err}");
    err
}

fn toy_trainer_with(t: &Toy, name: &str, args: &[&str]) -> std::path::PathBuf {
    let mut v = vec![serde_json::json!(example("toy_trainer"))];
    v.extend(args.iter().map(|s| serde_json::json!(s)));
    write_json(&t.root.join(name), serde_json::Value::Array(v))
}

#[test]
fn an_unknown_placeholder_is_named_with_file_and_position() {
    let t = Toy::new();
    let bad = toy_trainer_with(
        &t,
        "t-round.json",
        &[
            "{checkpoint}",
            "{dataset}",
            "{output}",
            "{health}",
            "{runtime_tool_format}",
            "{round}",
            "{target_stage}",
        ],
    );
    let err = refused(&t, &bad, &t.evaluator);
    assert!(err.contains(&bad.display().to_string()), "{err}");
    assert!(err.contains("argv[6] is {round}"), "{err}");
    assert!(err.contains("did you mean {round_id}?"), "{err}");

    // The evaluator's placeholders are checked too.
    let ev = write_json(
        &t.root.join("e-req.json"),
        serde_json::json!([
            example("toy_evaluator"),
            "{checkpoint}",
            "{req}",
            "{output}"
        ]),
    );
    let err = refused(&t, &t.trainer, &ev);
    assert!(err.contains("evaluator template"), "{err}");
    assert!(err.contains(&ev.display().to_string()), "{err}");
    assert!(err.contains("argv[2] is {req}"), "{err}");
    assert!(err.contains("did you mean {request}?"), "{err}");
}

#[test]
fn a_missing_or_embedded_placeholder_is_named() {
    let t = Toy::new();
    let no_output = toy_trainer_with(
        &t,
        "t-no-output.json",
        &[
            "{checkpoint}",
            "{dataset}",
            "out-dir",
            "{health}",
            "{runtime_tool_format}",
            "{round_id}",
            "{target_stage}",
        ],
    );
    let err = refused(&t, &no_output, &t.evaluator);
    assert!(err.contains(&no_output.display().to_string()), "{err}");
    assert!(
        err.contains("lacks the required placeholder {output}"),
        "{err}"
    );

    let embedded = toy_trainer_with(
        &t,
        "t-embedded.json",
        &[
            "{checkpoint}",
            "{dataset}",
            "--out={output}",
            "{health}",
            "{runtime_tool_format}",
            "{round_id}",
            "{target_stage}",
        ],
    );
    let err = refused(&t, &embedded, &t.evaluator);
    assert!(err.contains(&embedded.display().to_string()), "{err}");
    assert!(err.contains("argv[3]"), "{err}");
    assert!(err.contains("whole elements"), "{err}");
}

#[test]
fn malformed_template_json_reports_file_line_and_column() {
    let t = Toy::new();
    let bad = t.root.join("broken.json");
    std::fs::write(&bad, "[\"toy\",\n  \"{checkpoint}\",\n  }\n").unwrap();
    let err = refused(&t, &bad, &t.evaluator);
    assert!(err.contains("is not valid JSON"), "{err}");
    assert!(
        err.contains(&format!("{}:3:3", bad.display())),
        "file:line:column expected: {err}"
    );
    // Valid JSON of the wrong shape names the argv position.
    let shape = write_json(&t.root.join("shape.json"), serde_json::json!(["toy", 5]));
    let err = refused(&t, &shape, &t.evaluator);
    assert!(err.contains("argv[1] is 5, not a string"), "{err}");
}

#[test]
fn reward_mode_is_substituted_during_run() {
    let t = Toy::new();
    let mut a: Vec<&str> = TOY_TRAINER_ARGS.to_vec();
    a.extend(["--reward-mode", "{reward_mode}"]);
    let trainer = toy_trainer_with(&t, "t-reward.json", &a);
    let mut args = t.run_args(&trainer, &t.evaluator, 1);
    args.extend(["--reward-mode".into(), "terminal".into()]);
    let out = ok(t.run(&args));
    let err = stderr(&out);
    assert!(err.contains("--reward-mode terminal"), "{err}");
    assert!(!err.contains("{reward_mode}"), "{err}");
    let rounds = logged_rounds(&t.ledger);
    assert_eq!(rounds.len(), 1);
    let extra = &rounds[0]["loop"]["campaign"]["extra_placeholders"];
    assert_eq!(extra[0], serde_json::json!(["{reward_mode}", "terminal"]));
}

#[test]
fn a_failure_before_the_first_commit_does_not_suggest_resume() {
    let t = Toy::new();
    // The evaluator fails on the baseline: nothing is committed.
    let ev = write_json(
        &t.root.join("e-false.json"),
        serde_json::json!(["false", "{checkpoint}", "{request}", "{output}"]),
    );
    let args = t.run_args(&t.trainer, &ev, 1);
    let out = t.run(&args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the external evaluator exited with status 1"),
        "{err}"
    );
    assert!(err.contains("nothing to resume"), "{err}");
    assert!(!err.contains("bat run --resume"), "{err}");
    // And indeed there is nothing to resume.
    let out = t.run(&["run".into(), "--resume".into()]);
    assert!(stderr(&out).contains("nothing to resume"));
}
