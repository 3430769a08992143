//! The toy trainer/evaluator campaign (real child processes writing real
//! safetensors checkpoints), failures, and resuming from the ledger.

use std::path::Path;

use bat::engine::evaluation::EvaluationError;
use bat::engine::resume::{find_last_round, prepare_resume};
use bat::engine::rounds::{prepare_fresh, run_loop, LoopError, RunOptions, Start};
use bat::round::campaign::Campaign;
use bat_contract::json;
use bat_contract::pack::Pack;
use bat_ledger::{Diagnostic, Ledger};
use loop_support::*;

use crate::common::loop_support;

/// target/<profile>/examples/<name>, building the examples if needed.
fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn trainer(extra: &[&str]) -> Vec<String> {
    let mut t = vec![example("toy_trainer").to_string_lossy().into_owned()];
    t.extend(s(&[
        "{checkpoint}",
        "{dataset}",
        "{output}",
        "{health}",
        "{runtime_tool_format}",
        "{round_id}",
        "{target_stage}",
    ]));
    t.extend(s(extra));
    t
}

fn evaluator(extra: &[&str]) -> Vec<String> {
    let mut t = vec![example("toy_evaluator").to_string_lossy().into_owned()];
    t.extend(s(&["{checkpoint}", "{request}", "{output}"]));
    t.extend(s(extra));
    t
}

struct Setup {
    tmp: tempfile::TempDir,
    campaign: Campaign,
    pack: Pack,
}

fn setup(trainer_extra: &[&str], evaluator_extra: &[&str], rounds: i64) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let pack = Pack::default_pack();
    let init = tmp.path().join("initial");
    let st = std::process::Command::new(example("toy_trainer"))
        .arg("--init")
        .arg(&init)
        .status()
        .unwrap();
    assert!(st.success());
    let src = source(tmp.path(), &pack);
    let campaign = Campaign {
        source: src,
        initial_checkpoint: init,
        work_dir: tmp.path().join("W"),
        trainer: trainer(trainer_extra),
        evaluator: evaluator(evaluator_extra),
        protocol_id: "toy-protocol".into(),
        runtime_tool_format: "hermes".into(),
        rounds,
        batches: 2,
        pack: None,
        branch: None,
        extra_placeholders: Vec::new(),
        seed: None,
    };
    Setup {
        tmp,
        campaign,
        pack,
    }
}

fn ledger(dir: &Path) -> Ledger {
    std::fs::create_dir_all(dir).unwrap();
    Ledger::init(dir).unwrap()
}

fn run(
    c: &Campaign,
    start: Start,
    pack: &Pack,
    rec: &mut Recorder,
    logs: &Path,
) -> Result<json::Value, LoopError> {
    run_loop(
        c,
        start,
        &RunOptions {
            pack,
            log_dir: Some(logs),
            run_id: "toy",
            prune_round_dirs: false,
        },
        &mut Collect::default(),
        rec,
    )
    .map(|outcome| outcome.document())
}

fn history(out: &json::Value) -> Vec<(String, String, String)> {
    out.get("history")
        .and_then(|h| h.as_array())
        .unwrap()
        .iter()
        .map(|h| {
            let f = |k: &str| h.get(k).and_then(|v| v.as_str()).unwrap().to_string();
            (f("round_id"), f("target_stage"), f("gate_status"))
        })
        .collect()
}

fn round_commits(l: &Ledger) -> Vec<String> {
    let mut id = l.resolve("HEAD").unwrap();
    let mut out = Vec::new();
    loop {
        let c = l.read_commit(&id).unwrap();
        if let Some(r) = c.metadata.get("round_id").and_then(|r| r.as_str()) {
            out.push(r.to_string());
        }
        match c.parents.first() {
            Some(p) => id = *p,
            None => break,
        }
    }
    out.reverse();
    out
}

const EXPECTED: [(&str, &str, &str); 3] = [
    ("r01", "S5", "promote"),
    ("r02", "S4", "promote"),
    ("r03", "S2", "hold"),
];

fn expected() -> Vec<(String, String, String)> {
    EXPECTED
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

#[test]
fn toy_campaign_trains_real_checkpoints_and_gates_them() {
    let st = setup(&[], &[], 3);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    rec.ledger = Some(ledger(&st.tmp.path().join("ledger")));
    let out = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("logs"),
    )
    .unwrap();
    let h = history(&out);
    assert_eq!(h, expected());
    for (rid, _, status) in &h {
        let root = c.work_dir.join(rid);
        let w = std::fs::read(root.join("candidate/model.safetensors")).unwrap();
        let t = safetensors::SafeTensors::deserialize(&w).unwrap();
        assert_eq!(t.tensor("skill").unwrap().shape(), &[5]);
        let gate = read_json(&root.join("gate.json"));
        assert_eq!(
            gate.get("status").and_then(|s| s.as_str()),
            Some(status.as_str())
        );
    }
    // Trainer output was streamed into the logs.
    let log = std::fs::read_to_string(st.tmp.path().join("logs/r01/trainer.stdout")).unwrap();
    assert!(log.contains("16 rows"), "{log}");
    assert_eq!(
        round_commits(rec.ledger.as_ref().unwrap()),
        ["r01", "r02", "r03"]
    );
}

#[test]
fn a_failing_trainer_stops_the_loop_and_keeps_completed_rounds() {
    let st = setup(&["--fail-on", "r02"], &[], 3);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("logs"),
    )
    .unwrap_err();
    assert_eq!(e.code().as_deref(), Some("trainer_failed:r02:2"));
    assert_eq!(
        e.to_string(),
        "the trainer exited with status 2 in round r02"
    );
    assert_eq!(rec.rounds.len(), 1);
    assert_eq!(rec.rounds[0].0, "r01");
}

#[test]
fn missing_artifacts_and_invalid_health_are_clear_errors() {
    let st = setup(&["--no-output-on", "r01"], &[], 2);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("logs"),
    )
    .unwrap_err();
    assert_eq!(e.code().as_deref(), Some("trainer_artifacts_missing:r01"));
    assert!(e.to_string().contains("round r01"), "{e}");
    assert!(rec.rounds.is_empty());

    let st = setup(&["--bad-health-on", "r02"], &[], 2);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("logs"),
    )
    .unwrap_err();
    assert!(
        matches!(e, LoopError::HealthInvalid { ref round_id, .. } if round_id == "r02"),
        "{e}"
    );
    assert_eq!(rec.rounds.len(), 1);
}

#[test]
fn evaluator_failures_carry_the_contract_codes() {
    let st = setup(&[], &["--fail"], 1);
    let c = prepare_fresh(&st.campaign).unwrap();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut Recorder::new(),
        &st.tmp.path().join("l"),
    )
    .unwrap_err();
    assert!(matches!(
        e,
        LoopError::Evaluation {
            source: EvaluationError::Failed { rc: 3 },
            ..
        }
    ));
    assert_eq!(e.code().as_deref(), Some("external_evaluator_failed:3"));
    assert!(
        e.to_string()
            .starts_with("the external evaluator exited with status 3"),
        "{e}"
    );

    // An evaluator template without {request}.
    let mut st = setup(&[], &[], 1);
    st.campaign.evaluator.retain(|a| a != "{request}");
    let c = prepare_fresh(&st.campaign).unwrap();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut Recorder::new(),
        &st.tmp.path().join("l"),
    )
    .unwrap_err();
    assert_eq!(
        e.code().as_deref(),
        Some("evaluator_command_placeholders_missing"),
        "{e}"
    );

    // An evaluator that succeeds without writing anything.
    let mut st = setup(&[], &[], 1);
    st.campaign.evaluator = s(&["sh", "-c", "true", "{checkpoint}", "{request}", "{output}"]);
    let c = prepare_fresh(&st.campaign).unwrap();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut Recorder::new(),
        &st.tmp.path().join("l"),
    )
    .unwrap_err();
    assert_eq!(
        e.code().as_deref(),
        Some("external_evaluator_output_missing"),
        "{e}"
    );
}

#[test]
fn argument_and_template_errors() {
    let mut st = setup(&[], &[], 0);
    assert_eq!(
        prepare_fresh(&st.campaign).unwrap_err().code().as_deref(),
        Some("loop_size_invalid")
    );
    st.campaign.rounds = 1;
    st.campaign.batches = 0;
    assert_eq!(
        prepare_fresh(&st.campaign).unwrap_err().code().as_deref(),
        Some("loop_size_invalid")
    );
    st.campaign.batches = 1;
    st.campaign.runtime_tool_format = "Not Valid!".into();
    assert_eq!(
        prepare_fresh(&st.campaign).unwrap_err().code().as_deref(),
        Some("runtime_tool_format_invalid")
    );
    st.campaign.runtime_tool_format = "hermes".into();
    // The work dir must not exist.
    std::fs::create_dir_all(&st.campaign.work_dir).unwrap();
    assert!(matches!(
        prepare_fresh(&st.campaign),
        Err(LoopError::Exists { .. })
    ));
    std::fs::remove_dir(&st.campaign.work_dir).unwrap();
    // A trainer template without {health}.
    st.campaign.trainer.retain(|a| a != "{health}");
    let c = prepare_fresh(&st.campaign).unwrap();
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut Recorder::new(),
        &st.tmp.path().join("l"),
    )
    .unwrap_err();
    assert_eq!(
        e.code().as_deref(),
        Some("trainer_command_placeholders_missing")
    );
}

#[test]
fn a_refused_commit_stops_before_the_next_round() {
    let st = setup(&[], &[], 3);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    rec.refuse = Some("r02".into());
    let e = run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("l"),
    )
    .unwrap_err();
    assert!(
        matches!(e, LoopError::Commit { ref round_id, .. } if round_id == "r02"),
        "{e}"
    );
    assert_eq!(rec.rounds.len(), 1);
    assert!(!c.work_dir.join("r03").exists());
}

/// Interrupt at r02, then resume from the ledger (optionally after losing
/// the whole work dir): every round is recorded exactly once and the result
/// equals an uninterrupted campaign's.
fn resume_case(lose_work_dir: bool) {
    let st = setup(&["--fail-on", "r02"], &[], 3);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    rec.ledger = Some(ledger(&st.tmp.path().join("ledger")));
    let logs = st.tmp.path().join("logs");
    run(&c, Start::Fresh, &st.pack, &mut rec, &logs).unwrap_err();
    assert!(c.work_dir.join("r02/data/train.jsonl").is_file());
    if lose_work_dir {
        std::fs::remove_dir_all(&c.work_dir).unwrap();
    }
    let l = rec.ledger.take().unwrap();
    let last = find_last_round(&l, "HEAD").unwrap().unwrap();
    let mut point = prepare_resume(&l, &last, &st.tmp.path().join("restore")).unwrap();
    assert_eq!(point.state.completed_rounds, 1);
    assert!(
        !c.work_dir.join("r02").exists(),
        "the unfinished round is removed"
    );
    if lose_work_dir {
        // r01 promoted: the work dir is rebuilt from the ledger.
        assert_eq!(
            point.state.current_checkpoint,
            c.work_dir.join("r01/candidate")
        );
        assert!(c.work_dir.join("r01/gate.json").is_file());
        assert!(c.work_dir.join("baseline-eval/summary.json").is_file());
    }
    assert_eq!(point.campaign, c);
    // The user fixed the trainer.
    point.campaign.trainer = trainer(&[]);
    rec.ledger = Some(l);
    let out = run(
        &point.campaign,
        Start::Resume(point.state),
        &st.pack,
        &mut rec,
        &logs,
    )
    .unwrap();
    assert_eq!(history(&out), expected());
    assert_eq!(
        round_commits(rec.ledger.as_ref().unwrap()),
        ["r01", "r02", "r03"]
    );
    let report = rec
        .ledger
        .as_ref()
        .unwrap()
        .fsck(
            &bat_ledger::NoProgress,
            &std::sync::atomic::AtomicBool::new(false),
        )
        .unwrap();
    assert!(report.ok());
    // Resuming a finished campaign runs nothing and reports the same result.
    let l = rec.ledger.take().unwrap();
    let last = find_last_round(&l, "HEAD").unwrap().unwrap();
    let point = prepare_resume(&l, &last, &st.tmp.path().join("restore2")).unwrap();
    let mut rec2 = Recorder::new();
    let again = run(
        &point.campaign,
        Start::Resume(point.state),
        &st.pack,
        &mut rec2,
        &logs,
    )
    .unwrap();
    assert_eq!(json::pretty_json_file(&again), json::pretty_json_file(&out));
    assert!(rec2.rounds.is_empty());
}

#[test]
fn resume_continues_after_the_last_committed_round() {
    resume_case(false);
}

#[test]
fn resume_restores_the_checkpoint_from_the_ledger_when_the_work_dir_is_gone() {
    resume_case(true);
}

#[test]
fn resume_checks_the_promoted_candidate_out_when_it_was_removed() {
    let st = setup(&["--fail-on", "r02"], &[], 2);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    rec.ledger = Some(ledger(&st.tmp.path().join("ledger")));
    run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("logs"),
    )
    .unwrap_err();
    std::fs::remove_dir_all(c.work_dir.join("r01/candidate")).unwrap();
    let l = rec.ledger.take().unwrap();
    let last = find_last_round(&l, "HEAD").unwrap().unwrap();
    let restore = st.tmp.path().join("restore");
    let point = prepare_resume(&l, &last, &restore).unwrap();
    assert_eq!(
        point.state.current_checkpoint,
        restore.join("r01/candidate")
    );
}

#[test]
fn resume_refuses_a_changed_initial_checkpoint() {
    // r01 promotes; metadata claiming the initial folder has r01's identity
    // must be refused rather than trained from.
    let st = setup(&[], &[], 1);
    let c = prepare_fresh(&st.campaign).unwrap();
    let mut rec = Recorder::new();
    rec.ledger = Some(ledger(&st.tmp.path().join("ledger")));
    run(
        &c,
        Start::Fresh,
        &st.pack,
        &mut rec,
        &st.tmp.path().join("logs"),
    )
    .unwrap();
    let l = rec.ledger.take().unwrap();
    let last = find_last_round(&l, "HEAD").unwrap().unwrap();
    let mut meta = last.loop_meta.clone();
    meta.current_checkpoint.round_id = None;
    meta.current_checkpoint.path = c.initial_checkpoint.to_string_lossy().into_owned();
    assert!(!meta.current_checkpoint.sha256.is_empty());
    let tampered = bat::engine::resume::RecordedRound {
        commit: last.commit,
        loop_meta: meta,
    };
    // The initial folder no longer has the recorded identity (r01's).
    let e = prepare_resume(&l, &tampered, &st.tmp.path().join("r")).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot restore the checkpoint of initial"),
        "{e}"
    );
}
