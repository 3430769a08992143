//! The BaT reward in Rust (`bat reward score`) and in Python
//! (`examples/backends/bat_reward.py`, what VeRL and TRL load) give
//! byte-identical payloads for the same rollouts, error codes included.
//! The rollouts are real: `reward_cases.py` executes correct and empty
//! completions in the sandbox for every track × stage, then breaks the
//! evidence one way per error code.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::python as python_common;

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every error the scorer can give with the default pack. Not reachable
/// with it: `target_stage_unsupported` (an unknown stage already fails as
/// `stage_invalid`), `stage_rubric_empty` and `task_contract_not_stable_json`
/// (the pack has no empty rubric and no non-finite number).
const CODES: [&str; 21] = [
    "extra_info_invalid",
    "target_stage_invalid",
    "stage_invalid",
    "reward_contract_mismatch",
    "sandbox_evidence_missing",
    "agentic_summary_digest_invalid",
    "sandbox_evidence_digest_invalid",
    "sandbox_summary_binding_invalid",
    "state_id_invalid",
    "source_state_id_invalid",
    "track_unsupported",
    "view_index_invalid",
    "task_definition_version_unsupported",
    "sandbox_contract_missing",
    "sandbox_contract_mismatch",
    "summary_contract_mismatch",
    "artifact_evidence_missing",
    "stage_evidence_missing",
    "stage_rubric_evidence_mismatch",
    "task_score_invalid",
    "agentic_summary_invalid",
];

#[test]
fn rust_and_python_payloads_are_identical_for_both_reward_modes() {
    let Some(py) = python_common::python() else {
        return;
    };
    let dir = python_common::backends_dir();
    let tmp = tempfile::tempdir().expect("tmp");
    let cases = tmp.path().join("cases.jsonl");
    run(Command::new(&py)
        .arg(dir.join("reward_cases.py"))
        .arg(&cases));
    let lines = std::fs::read_to_string(&cases)
        .expect("cases")
        .lines()
        .count();
    assert!(lines > 500, "only {lines} cases");

    let mut seen_errors = BTreeSet::new();
    let mut scores = BTreeSet::new();
    for mode in ["stage", "terminal"] {
        let rust = run(crate::common::bat()
            .args(["reward", "score", "--mode", mode])
            .arg(&cases));
        let python = run(Command::new(&py)
            .arg(dir.join("bat_reward.py"))
            .args(["score", "--mode", mode])
            .arg(&cases));
        let rust = String::from_utf8(rust).expect("utf8");
        let python = String::from_utf8(python).expect("utf8");
        assert_eq!(rust.lines().count(), lines, "one payload per case");
        for (i, (r, p)) in rust.lines().zip(python.lines()).enumerate() {
            assert_eq!(r, p, "{mode} case {i} differs");
        }
        assert_eq!(rust, python);
        for line in rust.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("payload json");
            if let Some(e) = v["error"].as_str() {
                seen_errors.insert(e.to_string());
            }
            scores.insert(format!("{mode}:{}", v["score"]));
        }
    }
    for code in CODES {
        assert!(seen_errors.contains(code), "no case gives {code}");
    }
    // Full, partial and zero rewards all occur, in both modes.
    for want in [
        "stage:1.0",
        "stage:0.0",
        "stage:0.5",
        "terminal:1.0",
        "terminal:0.0",
    ] {
        assert!(scores.contains(want), "no {want} payload in {scores:?}");
    }
}

#[test]
fn unknown_reward_modes_are_refused_with_usage_exit() {
    let out = crate::common::bat()
        .args(["reward", "score", "--mode", "shaped", "-"])
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown reward mode"));
}
