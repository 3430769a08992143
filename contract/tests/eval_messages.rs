//! Every validation code of the evaluation schema comes with a message that
//! says where and what: a bad raw evaluation is built for each code (one
//! good cell, then the broken one at index 1) and the message must name the
//! cell, the field, the value found and the allowed range; `code()` keeps
//! the contract's code for conformance.

use bat_contract::gate::{evaluate_gate, hold_reasons, GateError, GateModel};
use bat_contract::json::{self, Value};
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::summary::{build_summary, SummaryError};
use bat_error::Diagnostic;

const CK: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn cell(task: &str) -> serde_json::Value {
    serde_json::json!({
        "track": "T1", "task_id": task, "repeat": 0, "valid": true,
        "task_score": 0.5,
        "stages": {"S1": 0.5, "S2": 0.5, "S3": 0.5, "S4": 0.5, "S5": 0.5},
    })
}

fn raw(cells: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"schema_version": 1, "status": "complete", "cells": cells})
}

/// A raw evaluation whose second cell is the first changed by `edit`.
fn second_cell(edit: impl FnOnce(&mut serde_json::Value)) -> serde_json::Value {
    let mut bad = cell("task-b");
    edit(&mut bad);
    raw(vec![cell("task-a"), bad])
}

fn summarize(doc: &serde_json::Value) -> Result<Value, SummaryError> {
    let bytes = serde_json::to_vec(doc).expect("encode the test evaluation");
    build_summary(&bytes, CK, &Pack::default_pack(), SumMode::Plain)
}

/// The refusal of `doc`: its code must be `code`, and its message must
/// contain every one of `words`.
fn refused(doc: &serde_json::Value, code: &str, words: &[&str]) {
    let e = summarize(doc).expect_err("the evaluation must be refused");
    assert_eq!(e.code().as_deref(), Some(code), "{e}");
    let message = e.to_string();
    for w in words {
        assert!(
            message.contains(w),
            "{code}: {w:?} missing from {message:?}"
        );
    }
    assert!(
        message.contains(&format!("(code {code})")),
        "the message names its code: {message}"
    );
}

#[test]
fn a_good_evaluation_still_summarizes() {
    let s = summarize(&raw(vec![cell("task-a"), cell("task-b")])).expect("valid");
    assert_eq!(s.get("cell_count"), Some(&Value::Int(2)));
}

#[test]
fn payload_and_cell_list_errors_name_the_field_and_value() {
    let mut doc = raw(vec![cell("a")]);
    doc["status"] = "running".into();
    refused(
        &doc,
        "evaluation_payload_invalid",
        &["field `status`", "\"running\"", "\"complete\""],
    );
    let mut doc = raw(vec![cell("a")]);
    doc["schema_version"] = 2.into();
    refused(
        &doc,
        "evaluation_payload_invalid",
        &["field `schema_version`", "is 2", "allowed: 1"],
    );
    refused(
        &serde_json::json!([1, 2]),
        "evaluation_payload_invalid",
        &["[1,2]", "a JSON object"],
    );
    refused(
        &raw(vec![]),
        "evaluation_cells_missing",
        &["field `cells`", "is []", "non-empty list"],
    );
}

#[test]
fn a_cell_that_is_not_valid_names_its_index_and_valid_flag() {
    refused(
        &second_cell(|c| c["valid"] = false.into()),
        "evaluation_cell_1_invalid",
        &["cell 1", "field `valid`", "is false", "allowed: true"],
    );
    refused(
        &raw(vec![cell("a"), cell("b"), serde_json::json!("oops")]),
        "evaluation_cell_2_invalid",
        &["cell 2", "\"oops\"", "an object"],
    );
}

#[test]
fn identity_errors_name_the_identity_field() {
    refused(
        &second_cell(|c| c["track"] = "".into()),
        "evaluation_cell_1_identity_invalid",
        &["cell 1", "field `track`", "is \"\"", "non-empty string"],
    );
    refused(
        &second_cell(|c| c["task_id"] = 7.into()),
        "evaluation_cell_1_identity_invalid",
        &["cell 1", "field `task_id`", "is 7", "non-empty string"],
    );
    refused(
        &second_cell(|c| c["repeat"] = (-1).into()),
        "evaluation_cell_1_identity_invalid",
        &["cell 1", "field `repeat`", "is -1", "integer >= 0"],
    );
    refused(
        &second_cell(|c| {
            c.as_object_mut().expect("cell").remove("repeat");
        }),
        "evaluation_cell_1_identity_invalid",
        &["cell 1", "field `repeat`", "is missing"],
    );
}

#[test]
fn a_duplicate_cell_names_both_indices_and_the_identity() {
    refused(
        &raw(vec![cell("a"), cell("b"), cell("a")]),
        "evaluation_cell_duplicate",
        &[
            "cell 2",
            "already given by cell 0",
            "\"T1\"",
            "\"a\"",
            "once",
        ],
    );
}

#[test]
fn score_errors_name_cell_field_value_and_range() {
    refused(
        &second_cell(|c| c["task_score"] = 1.5.into()),
        "task_score_invalid",
        &["cell 1", "field `task_score`", "is 1.5", "[0, 1]"],
    );
    refused(
        &second_cell(|c| c["task_score"] = true.into()),
        "task_score_invalid",
        &["cell 1", "field `task_score`", "is true", "not a boolean"],
    );
    refused(
        &second_cell(|c| {
            c.as_object_mut().expect("cell").remove("task_score");
        }),
        "task_score_invalid",
        &["cell 1", "field `task_score`", "missing"],
    );
    refused(
        &second_cell(|c| c["stages"]["S3"] = (-0.25).into()),
        "S3_invalid",
        &["cell 1", "field `stages.S3`", "is -0.25", "[0, 1]"],
    );
    refused(
        &second_cell(|c| c["agentic_score"] = "high".into()),
        "agentic_score_invalid",
        &["cell 1", "field `agentic_score`", "\"high\"", "[0, 1]"],
    );
}

#[test]
fn stage_map_errors_name_the_missing_and_unexpected_stages() {
    refused(
        &second_cell(|c| {
            let stages = c["stages"].as_object_mut().expect("stages");
            stages.remove("S5");
            stages.insert("E2E".into(), 0.5.into());
        }),
        "stage_scores_invalid",
        &[
            "cell 1",
            "field `stages`",
            "missing S5",
            "unexpected E2E",
            "S1, S2, S3, S4, S5",
        ],
    );
    refused(
        &second_cell(|c| c["stages"] = serde_json::json!([0.5])),
        "stage_scores_invalid",
        &["cell 1", "field `stages`", "is [0.5]", "an object"],
    );
}

#[test]
fn an_agentic_mismatch_names_the_declared_and_computed_scores() {
    refused(
        &second_cell(|c| c["agentic_score"] = 0.9.into()),
        "evaluation_cell_1_agentic_mismatch",
        &["cell 1", "field `agentic_score`", "is 0.9", "0.5", "1e-8"],
    );
}

/// A summary of the good evaluation, as JSON text to edit.
fn good_summary() -> serde_json::Value {
    let s = summarize(&raw(vec![cell("task-a"), cell("task-b")])).expect("valid");
    serde_json::from_str(&json::canonical_json(&s).expect("encode")).expect("JSON")
}

fn gate_refused(candidate: &serde_json::Value, code: &str, words: &[&str]) {
    let model = GateModel::from_pack(&Pack::default_pack()).expect("pack");
    let to_value = |v: &serde_json::Value| json::from_serde(v).expect("convert");
    let e: GateError = evaluate_gate(
        &to_value(&good_summary()),
        &to_value(candidate),
        true,
        &model,
    )
    .expect_err("the gate must refuse");
    assert_eq!(e.code().as_deref(), Some(code), "{e}");
    let message = e.to_string();
    for w in words {
        assert!(
            message.contains(w),
            "{code}: {w:?} missing from {message:?}"
        );
    }
}

#[test]
fn summary_acceptance_errors_name_the_field_and_value() {
    let mut s = good_summary();
    s["status"] = "draft".into();
    gate_refused(
        &s,
        "eval_summary_invalid",
        &["field `status`", "\"draft\"", "\"valid\""],
    );
    let mut s = good_summary();
    s["means"]["task"] = "x".into();
    gate_refused(
        &s,
        "eval_means_invalid",
        &["field `means.task`", "\"x\"", "finite number"],
    );
    let mut s = good_summary();
    s["stage_scores"]["S2"] = 2.into();
    gate_refused(
        &s,
        "S2_invalid",
        &["field `stage_scores.S2`", "is 2", "[0, 1]"],
    );
    let mut s = good_summary();
    s["checkpoint_sha256"] = "abc".into();
    gate_refused(
        &s,
        "eval_checkpoint_binding_invalid",
        &["field `checkpoint_sha256`", "\"abc\"", "64 hex"],
    );
    let mut s = good_summary();
    s["track_scores"] = serde_json::json!({});
    gate_refused(
        &s,
        "eval_pairing_evidence_invalid",
        &["field `track_scores`", "is {}", "non-empty"],
    );
    let mut s = good_summary();
    s["track_scores"]["T1"] = "bad".into();
    gate_refused(
        &s,
        "eval_track_scores_invalid",
        &["field `track_scores.T1`", "\"bad\"", "finite number"],
    );
}

#[test]
fn a_held_gate_says_which_check_failed_and_by_how_much() {
    let model = GateModel::from_pack(&Pack::default_pack()).expect("pack");
    let to_value = |v: &serde_json::Value| json::from_serde(v).expect("convert");
    let base = good_summary();
    let mut worse = cell("task-b");
    worse["task_score"] = 0.1.into();
    let cand = summarize(&raw(vec![cell("task-a"), worse])).expect("valid");
    let out = evaluate_gate(&to_value(&base), &cand, true, &model).expect("gate");
    assert!(!out.promoted);
    let reasons = hold_reasons(&out.gate);
    let text = reasons.join("; ");
    assert!(text.contains("task score dropped 0.2000"), "{text}");
    assert!(text.contains("allowed at most"), "{text}");
    // A promoted gate has nothing to say.
    let same = evaluate_gate(&to_value(&base), &to_value(&base), true, &model).expect("gate");
    assert!(same.promoted);
    assert!(hold_reasons(&same.gate).is_empty());
    // Failed health is named too.
    let out = evaluate_gate(&to_value(&base), &to_value(&base), false, &model).expect("gate");
    let text = hold_reasons(&out.gate).join("; ");
    assert!(text.contains("training health"), "{text}");
}

#[test]
fn paired_mismatches_name_the_cell_or_track_that_differs() {
    let model = GateModel::from_pack(&Pack::default_pack()).expect("pack");
    let to_value = |v: &serde_json::Value| json::from_serde(v).expect("convert");
    let other = summarize(&raw(vec![cell("task-a"), cell("task-c")])).expect("valid");
    let e = evaluate_gate(&to_value(&good_summary()), &other, true, &model)
        .expect_err("different cells");
    assert_eq!(e.code().as_deref(), Some("paired_cells_mismatch"));
    let message = e.to_string();
    for w in [
        "the baseline's cell 1",
        "\"task-b\"",
        "repeat 0",
        "same (track, task_id, repeat)",
    ] {
        assert!(message.contains(w), "{w:?} missing from {message:?}");
    }
    let mut t2 = cell("task-b");
    t2["track"] = "T2".into();
    let other = summarize(&raw(vec![cell("task-a"), t2])).expect("valid");
    let e = evaluate_gate(&to_value(&good_summary()), &other, true, &model)
        .expect_err("different cells and tracks");
    // The cells differ first (T1/task-b is not in the candidate).
    assert_eq!(e.code().as_deref(), Some("paired_cells_mismatch"), "{e}");
}
