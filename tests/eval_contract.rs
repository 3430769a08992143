//! Evaluation-side contract tests: every eval/leakage/binding/protocol vector
//! (copied into tests/data/conformance) through the library and a selection
//! through the real binary, plus property tests of the gate and fsum.

use std::path::{Path, PathBuf};

use bat_contract::conformance::Options;
use bat_contract::eval_conformance::run_eval_families;
use bat_contract::gate::{
    evaluate_gate, select_target_scores, GateModel, REASON_LOWEST, REASON_REGRESSION,
};
use bat_contract::json::{self, Map, Value};
use bat_contract::numeric::{fmean, fsum, isclose, SumMode};
use bat_contract::pack::Pack;
use bat_contract::summary::{build_summary, StageModel};
use bat_ledger::Diagnostic;
use proptest::prelude::*;

use crate::common::bat_assert as bat;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformance")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

#[test]
fn every_evaluation_side_vector_passes_with_the_default_pack() {
    let pack = Pack::default_pack();
    let results = run_eval_families(
        &data(),
        &Options {
            pack: &pack,
            exact: false,
        },
    );
    let failed: Vec<_> = results.iter().filter(|r| !r.passed).collect();
    assert!(failed.is_empty(), "failed vectors: {failed:#?}");
    let count = |family: &str| results.iter().filter(|r| r.family == family).count();
    // 11 summaries + 10 alt-3.12 summaries + 10 summary errors + 11 gates +
    // 10 alt-3.12 gates + 2 gate errors; 11 leakage; 3 + 3 binding; 8 protocol.
    assert_eq!(count("eval"), 54);
    assert_eq!(count("leakage"), 11);
    assert_eq!(count("binding"), 6);
    assert_eq!(count("protocol"), 8);
}

#[test]
fn summary_error_codes_are_the_contracts() {
    let pack = Pack::default_pack();
    let cases = [
        ("status-not-complete", "evaluation_payload_invalid"),
        ("cells-empty", "evaluation_cells_missing"),
        ("cell-not-valid", "evaluation_cell_2_invalid"),
        ("cell-repeat-bool", "evaluation_cell_1_identity_invalid"),
        ("cell-duplicate", "evaluation_cell_duplicate"),
        ("task-bool", "task_score_invalid"),
        ("task-out-of-range", "task_score_invalid"),
        ("stage-missing", "stage_scores_invalid"),
        ("stage-nan-string", "S3_invalid"),
        ("agentic-mismatch", "evaluation_cell_1_agentic_mismatch"),
    ];
    for (name, code) in cases {
        let raw = read(&data().join(format!("eval/errors/{name}.raw.json")));
        let err = build_summary(&raw, "x", &pack, SumMode::Plain).expect_err(name);
        assert_eq!(err.code().as_deref(), Some(code), "{name}");
    }
}

#[test]
fn cli_summarize_writes_and_prints_the_reference_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("nested/s.json");
    let expected = read(&data().join("eval/summary/edge-coercions.summary.json"));
    let ck = json::sha256_hex(b"bat-conformance:edge-coercions");
    let assert = bat()
        .args(["eval", "summarize", "--raw"])
        .arg(data().join("eval/raw/edge-coercions.json"))
        .args(["--checkpoint-sha256", &ck, "--output"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(assert.get_output().stdout, expected);
    assert_eq!(read(&out), expected);
    // Identical content: fine again. Different content: refused, file kept.
    bat()
        .args(["eval", "summarize", "--raw"])
        .arg(data().join("eval/raw/edge-coercions.json"))
        .args(["--checkpoint-sha256", &ck, "--output"])
        .arg(&out)
        .assert()
        .success();
    let refused = bat()
        .args(["eval", "summarize", "--raw"])
        .arg(data().join("eval/raw/edge-coercions.json"))
        .args(["--checkpoint-sha256", "other", "--output"])
        .arg(&out)
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
    assert!(stderr.contains("refusing to overwrite"), "{stderr}");
    assert_eq!(read(&out), expected);
}

#[test]
fn cli_summarize_error_exits_1_with_the_code() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let summarize = || {
        let mut c = bat();
        c.args(["eval", "summarize", "--raw"])
            .arg(data().join("eval/errors/cell-not-valid.raw.json"))
            .args(["--checkpoint-sha256", "0", "--output"])
            .arg(tmp.path().join("s.json"));
        c
    };
    let a = summarize().assert().code(1);
    assert_eq!(
        String::from_utf8_lossy(&a.get_output().stderr),
        "error: evaluation cell 2 is not a valid evaluation cell: field `valid` is false; \
         allowed: true (code evaluation_cell_2_invalid)\n"
    );
    assert!(!tmp.path().join("s.json").exists());
    // Programs read the reference's code from the --json error.
    let a = summarize().arg("--json").assert().code(1);
    let e: serde_json::Value =
        serde_json::from_slice(&a.get_output().stderr).expect("a JSON error");
    assert_eq!(e["code"], "evaluation_cell_2_invalid");
    assert_eq!(
        e["error"],
        "evaluation cell 2 is not a valid evaluation cell: field `valid` is false; \
         allowed: true (code evaluation_cell_2_invalid)"
    );
    assert_eq!(e["kind"], "failure");
}

#[test]
fn cli_gate_reproduces_files_and_stdout() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (case, cand, health) in [
        ("hold-late-stage", "cand-late-stage", None),
        (
            "health-not-object",
            "cand-promote",
            Some("gate/health-not-object/training-health.json"),
        ),
    ] {
        let (g, p) = (
            tmp.path().join(format!("{case}-g.json")),
            tmp.path().join(format!("{case}-p.json")),
        );
        let mut cmd = bat();
        cmd.arg("gate")
            .arg("--baseline")
            .arg(data().join("eval/summary/baseline.summary.json"));
        cmd.arg("--candidate")
            .arg(data().join(format!("eval/summary/{cand}.summary.json")));
        if let Some(h) = health {
            cmd.arg("--training-health")
                .arg(data().join("eval").join(h));
        }
        let a = cmd
            .arg("--gate-output")
            .arg(&g)
            .arg("--prescription-output")
            .arg(&p)
            .assert()
            .success();
        let dir = data().join("eval/gate").join(case);
        assert_eq!(
            a.get_output().stdout,
            read(&dir.join("stdout.json")),
            "{case}"
        );
        assert_eq!(read(&g), read(&dir.join("gate.json")), "{case}");
        assert_eq!(read(&p), read(&dir.join("prescription.json")), "{case}");
    }
    let a = bat()
        .arg("gate")
        .arg("--baseline")
        .arg(data().join("eval/errors/checkpoint-length.baseline.json"))
        .arg("--candidate")
        .arg(data().join("eval/summary/baseline.summary.json"))
        .arg("--gate-output")
        .arg(tmp.path().join("x.json"))
        .arg("--prescription-output")
        .arg(tmp.path().join("y.json"))
        .assert()
        .code(1);
    assert_eq!(
        String::from_utf8_lossy(&a.get_output().stderr),
        "error: an evaluation summary does not bind the checkpoint it evaluated: field \
         `checkpoint_sha256` is \"abc\"; allowed: the evaluated checkpoint's sha256, 64 hex \
         characters (code eval_checkpoint_binding_invalid)\n"
    );
}

#[test]
fn cli_firewall_stdout_and_exit_codes() {
    let l = data().join("leakage");
    let a = bat()
        .args(["firewall", "scan"])
        .arg(l.join("inputs/machine-path.jsonl"))
        .assert()
        .code(1);
    assert_eq!(
        a.get_output().stdout,
        read(&l.join("expected/machine-path.json"))
    );
    let a = bat()
        .args(["firewall", "scan"])
        .arg(l.join("inputs/markers.jsonl"))
        .arg("--heldout-markers")
        .arg(l.join("inputs/markers.json"))
        .assert()
        .code(1);
    assert_eq!(
        a.get_output().stdout,
        read(&l.join("expected/markers-with-file.json"))
    );
    let a = bat()
        .args(["firewall", "scan"])
        .arg(l.join("inputs/clean.jsonl"))
        .assert()
        .success();
    assert_eq!(a.get_output().stdout, read(&l.join("expected/clean.json")));
    let a = bat()
        .args(["firewall", "scan"])
        .arg(l.join("inputs/clean.jsonl"))
        .arg("--heldout-markers")
        .arg(l.join("inputs/markers-invalid.json"))
        .assert()
        .code(1);
    assert!(a.get_output().stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&a.get_output().stderr),
        "error: the held-out markers file is not a JSON array of strings of at least 4 characters\n"
    );
}

#[test]
fn firewall_rejects_non_utf8_input_without_output() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let f = tmp.path().join("bad.jsonl");
    std::fs::write(&f, b"{\"a\": 1}\n\xff\n").expect("write");
    let a = bat().args(["firewall", "scan"]).arg(&f).assert().code(1);
    assert!(a.get_output().stdout.is_empty());
}

#[test]
fn cli_bind_writes_the_reference_binding_and_stdout_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("b.json");
    let a = bat()
        .arg("bind")
        .arg("--model-path")
        .arg(data().join("binding/models/single"))
        .args([
            "--experiment-name",
            "bat-conformance",
            "--gate-step",
            "50",
            "--arm",
            "baseline",
            "--output",
        ])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(
        read(&out),
        read(&data().join("binding/expected/single-baseline.binding.json"))
    );
    let line = format!(
        "{{\"model_identity_sha256\": \"7bec70ba7cb1bab99aaf2e8664278aaccc886ff3363035ffb6135019047cde60\", \"output\": \"{}\"}}\n",
        out.display()
    );
    assert_eq!(String::from_utf8_lossy(&a.get_output().stdout), line);
    // A different arm is a different document: refused.
    let a = bat()
        .arg("bind")
        .arg("--model-path")
        .arg(data().join("binding/models/single"))
        .args([
            "--experiment-name",
            "bat-conformance",
            "--gate-step",
            "50",
            "--arm",
            "candidate",
            "--output",
        ])
        .arg(&out)
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&a.get_output().stderr)
        .contains("gate model binding differs from requested model"));
    bat()
        .arg("bind")
        .arg("--model-path")
        .arg(data().join("binding/models/single"))
        .args([
            "--experiment-name",
            "x",
            "--gate-step",
            "-1",
            "--arm",
            "candidate",
            "--output",
        ])
        .arg(tmp.path().join("n.json"))
        .assert()
        .code(2);
    let a = bat()
        .arg("bind")
        .arg("--model-path")
        .arg(data().join("binding/models/error-no-weights"))
        .args([
            "--experiment-name",
            "x",
            "--gate-step",
            "0",
            "--arm",
            "candidate",
            "--output",
        ])
        .arg(tmp.path().join("n.json"))
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&a.get_output().stderr)
        .starts_with("error: model weights are missing or incomplete: /"));
}

#[test]
fn binding_rejects_symlinks_and_escaping_shards() {
    use bat_contract::binding::{build_binding, Arm, BindingError};
    let tmp = tempfile::tempdir().expect("tempdir");
    let m = tmp.path().join("m");
    std::fs::create_dir_all(m.join("sub")).expect("mkdir");
    std::fs::write(m.join("config.json"), b"{}").expect("write");
    std::fs::write(m.join("model.safetensors"), b"x").expect("write");
    std::fs::write(tmp.path().join("outside.safetensors"), b"x").expect("write");
    build_binding(&m, "e", 0, Arm::Baseline).expect("plain folder binds");
    std::os::unix::fs::symlink(m.join("config.json"), m.join("sub/link")).expect("symlink");
    let e = build_binding(&m, "e", 0, Arm::Baseline).expect_err("symlink inside");
    assert!(matches!(e, BindingError::SymlinkInExport { .. }), "{e}");
    std::fs::remove_file(m.join("sub/link")).expect("rm");
    std::fs::write(
        m.join("model.safetensors.index.json"),
        br#"{"weight_map": {"a": "../outside.safetensors"}}"#,
    )
    .expect("write");
    let e = build_binding(&m, "e", 0, Arm::Baseline).expect_err("escaping shard");
    assert!(matches!(e, BindingError::WeightEscapes { .. }), "{e}");
    std::fs::write(
        m.join("model.safetensors.index.json"),
        br#"{"weight_map": {}}"#,
    )
    .expect("write");
    let e = build_binding(&m, "e", 0, Arm::Baseline).expect_err("empty map");
    assert!(matches!(e, BindingError::IndexMalformed { .. }), "{e}");
    let link = tmp.path().join("mlink");
    std::os::unix::fs::symlink(&m, &link).expect("symlink");
    let e = build_binding(&link, "e", 0, Arm::Baseline).expect_err("model path symlink");
    assert!(matches!(e, BindingError::PathIsSymlink { .. }), "{e}");
}

#[test]
fn cli_conformance_table_and_json() {
    let a = bat().arg("conformance").arg(data()).assert().success();
    let out = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(out.ends_with("79 passed, 0 failed\n"), "{out}");
    let a = bat()
        .arg("--json")
        .arg("conformance")
        .arg(data())
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&a.get_output().stdout).expect("json");
    assert_eq!(v["passed"], 79);
    assert_eq!(v["failed"], 0);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(79));
}

#[test]
fn cli_conformance_fails_on_a_broken_vector() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("protocol");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("runtime-protocol-binding.json"),
        br#"{"vectors": [{"input": "hermes", "error": "runtime_tool_format_invalid"}]}"#,
    )
    .expect("write");
    let a = bat().arg("conformance").arg(tmp.path()).assert().code(1);
    assert!(String::from_utf8_lossy(&a.get_output().stdout).ends_with("0 passed, 1 failed\n"));
}

// ---------------------------------------------------------------------------
// Property tests

const TRACKS: [&str; 3] = ["alpha", "beta", "gamma"];

fn raw_eval(cells: &[(usize, Vec<f64>, f64)]) -> Vec<u8> {
    let cells: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, (t, stages, task))| {
            let mut s = Map::new();
            for (k, x) in ["S1", "S2", "S3", "S4", "S5"].iter().zip(stages) {
                s.insert(*k, Value::Float(*x));
            }
            Value::Object(
                Map::new()
                    .with("valid", true)
                    .with("track", TRACKS[*t % 3])
                    .with("task_id", format!("task-{i}"))
                    .with("repeat", 0)
                    .with("task_score", *task)
                    .with("stages", s),
            )
        })
        .collect();
    let doc = Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("status", "complete")
            .with("cells", cells),
    );
    json::pretty_json_file(&doc).into_bytes()
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![(0u32..=20).prop_map(|k| f64::from(k) / 20.0), 0.0..=1.0f64]
}

fn cell() -> impl Strategy<Value = (usize, Vec<f64>, f64)> {
    (0usize..3, prop::collection::vec(score(), 5), score())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn identical_candidate_promotes_with_healthy_training(cells in prop::collection::vec(cell(), 1..12)) {
        let pack = Pack::default_pack();
        let model = GateModel::from_pack(&pack).expect("pack");
        let ck = "a".repeat(64);
        let s = build_summary(&raw_eval(&cells), &ck, &pack, SumMode::Plain).expect("valid raw");
        let g = evaluate_gate(&s, &s, true, &model).expect("gate");
        prop_assert!(g.promoted);
        prop_assert_eq!(g.selection_reason, REASON_LOWEST);
        let stages = s.get("stage_scores").and_then(Value::as_object).expect("stages");
        let c: Vec<f64> = ["S1", "S2", "S3", "S4", "S5"].iter()
            .map(|k| match stages.get(k) { Some(Value::Float(x)) => *x, _ => f64::NAN }).collect();
        let min = c.iter().copied().fold(f64::INFINITY, f64::min);
        let first = c.iter().position(|x| isclose(*x, min, 1e-12)).expect("some stage");
        prop_assert_eq!(g.target_stage, format!("S{}", first + 1));
        // An unhealthy run holds but prescribes the same lowest stage.
        let h = evaluate_gate(&s, &s, false, &model).expect("gate");
        prop_assert!(!h.promoted);
        prop_assert_eq!(h.selection_reason, REASON_LOWEST);
    }

    #[test]
    fn gate_decision_invariants(
        base in prop::collection::vec(cell(), 1..10),
        deltas in prop::collection::vec((prop::collection::vec(-0.3..0.3f64, 5), -0.3..0.3f64), 10),
        healthy in any::<bool>(),
    ) {
        let pack = Pack::default_pack();
        let model = GateModel::from_pack(&pack).expect("pack");
        let cand: Vec<_> = base.iter().zip(&deltas).map(|((t, s, task), (ds, dt))| {
            (*t, s.iter().zip(ds).map(|(x, d)| (x + d).clamp(0.0, 1.0)).collect(), (task + dt).clamp(0.0, 1.0))
        }).collect();
        let (bk, ck) = ("b".repeat(64), "c".repeat(64));
        let b = build_summary(&raw_eval(&base), &bk, &pack, SumMode::Plain).expect("valid");
        let c = build_summary(&raw_eval(&cand), &ck, &pack, SumMode::Plain).expect("valid");
        let g = evaluate_gate(&b, &c, healthy, &model).expect("gate");
        let checks = g.gate.get("checks").and_then(Value::as_object).expect("checks");
        prop_assert_eq!(checks.len(), 7);
        let all = checks.iter().all(|(_, v)| v.is_true());
        prop_assert_eq!(g.promoted, all);
        prop_assert_eq!(checks.get("training_health").map(Value::is_true), Some(healthy));
        let start = g.prescription.get("starting_checkpoint_sha256").and_then(Value::as_str).expect("start");
        prop_assert_eq!(start, if g.promoted { ck.as_str() } else { bk.as_str() });
        let status = g.gate.get("status").and_then(Value::as_str).expect("status");
        prop_assert_eq!(status, if g.promoted { "promote" } else { "hold" });
        // The prescription echoes the candidate's stage scores verbatim.
        prop_assert_eq!(g.prescription.get("aggregate_stage_scores"), c.get("stage_scores"));
        if g.promoted {
            prop_assert_eq!(g.selection_reason, REASON_LOWEST);
        }
        let od = match g.gate.get("deltas").and_then(|d| d.get("overall_drop")) { Some(Value::Float(x)) => *x, _ => f64::NAN };
        prop_assert_eq!(checks.get("catastrophic_forgetting").map(Value::is_true), Some(od < 0.2));
        prop_assert_eq!(checks.get("overall_noninferiority").map(Value::is_true), Some(od <= 0.01));
    }

    #[test]
    fn select_target_tie_rules(
        b in prop::collection::vec(score(), 5),
        c in prop::collection::vec(score(), 5),
        promoted in any::<bool>(),
    ) {
        let pack = Pack::default_pack();
        let sm = StageModel::from_pack(&pack).expect("pack");
        let (stage, reason) = select_target_scores(&b, &c, promoted, &sm);
        let i: usize = stage[1..].parse::<usize>().expect("S<n>") - 1;
        let reg: Vec<f64> = b.iter().zip(&c).map(|(x, y)| x - y).collect();
        let positive = reg.iter().any(|r| *r > 0.0);
        if !promoted && positive {
            prop_assert_eq!(reason, REASON_REGRESSION);
            let max = reg.iter().copied().filter(|r| *r > 0.0).fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(isclose(reg[i], max, 1e-12));
            prop_assert!(reg[..i].iter().all(|r| !isclose(*r, max, 1e-12)));
        } else {
            prop_assert_eq!(reason, REASON_LOWEST);
            let min = c.iter().copied().fold(f64::INFINITY, f64::min);
            prop_assert!(isclose(c[i], min, 1e-12));
            prop_assert!(c[..i].iter().all(|x| !isclose(*x, min, 1e-12)));
        }
    }

    #[test]
    fn fsum_is_the_correctly_rounded_exact_sum(
        terms in prop::collection::vec((-(1i64 << 52)..(1i64 << 52), 0u32..=40), 0..40)
    ) {
        // x = m · 2^-e is exact in binary64; the exact total scaled by 2^40
        // is an integer well inside i128, and i128 → f64 rounds half-even.
        let xs: Vec<f64> = terms.iter().map(|(m, e)| *m as f64 / f64::from(2u32).powi(*e as i32)).collect();
        let exact: i128 = terms.iter().map(|(m, e)| i128::from(*m) << (40 - e)).sum();
        let expected = exact as f64 / 2f64.powi(40);
        prop_assert_eq!(fsum(&xs).expect("finite"), expected);
        if !xs.is_empty() {
            prop_assert_eq!(fmean(&xs), Some(expected / xs.len() as f64));
        }
    }

    #[test]
    fn isclose_is_symmetric_and_reflexive(a in -1e3..1e3f64, b in -1e3..1e3f64, tol in 0.0..1e-6f64) {
        prop_assert_eq!(isclose(a, b, tol), isclose(b, a, tol));
        prop_assert!(isclose(a, a, 0.0));
    }
}

/// Model folders built on the fly; the identities were computed by the
/// reference binder (CPython 3.11.7) on the same files.
#[test]
fn binding_identity_matches_reference_on_generated_folders() {
    use bat_contract::binding::model_identity;
    fn mk(root: &Path, rel: &str, data: &[u8]) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, data).expect("write");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let m1 = tmp.path().join("m1");
    mk(&m1, "config.json", br#"{"model_type":"x"}"#);
    mk(&m1, "pytorch_model-1.bin", b"ab");
    mk(&m1, "pytorch_model.bin", b"c");
    for (rel, data) in [
        ("Z.txt", &b"z"[..]),
        ("a.txt", b"a"),
        ("sub/dir/deep.txt", b"d"),
        ("sub.txt", b"s"),
        ("日本/ü.txt", b"u"),
        (".git/x", b"g"),
    ] {
        mk(&m1, rel, data);
    }
    let m2 = tmp.path().join("m2");
    mk(&m2, "config.json", b"{}");
    mk(&m2, "w-1.bin", &[b'1'; 10]);
    mk(&m2, "w-2.bin", &[b'2'; 5]);
    mk(
        &m2,
        "pytorch_model.bin.index.json",
        br#"{"weight_map": {"a": "w-2.bin", "b": "w-1.bin", "c": "w-2.bin"}, "metadata": {}}"#,
    );
    mk(&m2, "model.safetensors", b"ignored-because-index");
    let m3 = tmp.path().join("m3");
    mk(&m3, "config.json", b"{}");
    mk(&m3, "model-b.safetensors", b"x");
    mk(&m3, "model-a.safetensors", b"y");
    mk(&m3, "pytorch_model.bin", b"z");
    mk(&m3, "empty.txt", b"");
    for (m, want) in [
        (
            &m1,
            "6a7fdc4d3abee4c972b912bf9204ac06860f5a36991b8b54509e720f48d59d93",
        ),
        (
            &m2,
            "fb448c1e76232afe0735b286b0d1fe410684c935f79525ca83c78efdd2637ffd",
        ),
        (
            &m3,
            "685d5006a7fc99c1ae39e0a6b603b00669c47cfe1150567ead5b6cd7ba777689",
        ),
    ] {
        let id = model_identity(m).unwrap_or_else(|e| panic!("{}: {e}", m.display()));
        assert_eq!(id.model_identity_sha256, want, "{}", m.display());
    }
}

#[test]
fn round_start_and_admission_receipt() {
    use bat_contract::protocol::{admission_receipt, validate_round_start, StartError};
    let model = data().join("binding/models/single");
    let id = "7bec70ba7cb1bab99aaf2e8664278aaccc886ff3363035ffb6135019047cde60";
    let presc = |ck: &str, with_opt: bool| {
        let mut m = Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_round_prescription")
            .with("target_stage", "S3")
            .with("starting_checkpoint_sha256", ck);
        if with_opt {
            m.insert(
                "optimizer",
                Value::Object(Map::new().with("steps", 50).with("learning_rate", 2.5e-7)),
            );
        }
        Value::Object(m)
    };
    let start = validate_round_start(&presc(id, true), &model, None).expect("matching checkpoint");
    assert_eq!(start.target_stage, Value::Str("S3".into()));
    // An override equal under Python equality (50 == 50.0) passes; another fails.
    let same = json::parse(r#"{"learning_rate": 2.5e-07, "steps": 50.0}"#).expect("json");
    validate_round_start(&presc(id, true), &model, Some(&same)).expect("equal optimizer");
    let other = json::parse(r#"{"learning_rate": 2.5e-07, "steps": 51}"#).expect("json");
    let e =
        validate_round_start(&presc(id, true), &model, Some(&other)).expect_err("override differs");
    assert_eq!(e.code().as_deref(), Some("round_optimizer_mismatch"));
    let e = validate_round_start(&presc(&"0".repeat(64), true), &model, None)
        .expect_err("other checkpoint");
    assert_eq!(
        e.code().as_deref(),
        Some("round_checkpoint_inheritance_mismatch")
    );
    let e = validate_round_start(&presc(id, false), &model, None).expect_err("no optimizer");
    assert_eq!(e.code().as_deref(), Some("round_optimizer_missing"));
    let e =
        validate_round_start(&Value::Array(vec![]), &model, None).expect_err("not a prescription");
    assert!(matches!(e, StartError::PrescriptionInvalid));

    let manifest =
        json::parse(r#"{"artifact_kind": "bat_three_pool_round", "target_stage": "S3"}"#)
            .expect("json");
    let r = admission_receipt(&start, "t", &manifest, "m", "p", " Hermes ").expect("receipt");
    assert_eq!(
        r.get("artifact_kind").and_then(Value::as_str),
        Some("bat_round_start_contract")
    );
    assert_eq!(r.get("checkpoint_sha256").and_then(Value::as_str), Some(id));
    assert_eq!(
        r.get("runtime_protocol")
            .and_then(|p| p.get("binding_sha256"))
            .and_then(Value::as_str),
        Some("1cf8954ae2761fc573d4f7961b32a0eac1de24fa89ff3550f4f520f5b8a9ffe5")
    );
    let s4 = json::parse(r#"{"target_stage": "S4"}"#).expect("json");
    let e = admission_receipt(&start, "t", &s4, "m", "p", "hermes").expect_err("target differs");
    assert_eq!(
        e.code().as_deref(),
        Some("dataset_target_disagrees_with_prescription")
    );
    let e = admission_receipt(&start, "t", &manifest, "m", "p", "bad format!")
        .expect_err("bad protocol");
    assert_eq!(e.code().as_deref(), Some("runtime_tool_format_invalid"));
}

#[test]
fn cli_cpython312_sum_reproduces_the_informational_vectors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("s.json");
    let a = bat()
        .args(["eval", "summarize", "--cpython312-sum", "--raw"])
        .arg(data().join("eval/raw/baseline.json"))
        .args([
            "--checkpoint-sha256",
            &json::sha256_hex(b"bat-conformance:baseline"),
            "--output",
        ])
        .arg(&out)
        .assert()
        .success();
    let want = read(&data().join("eval/alt-cpython312/summary/baseline.summary.json"));
    assert_eq!(a.get_output().stdout, want);
    // And it really differs from the canonical 3.11 bytes.
    assert_ne!(
        want,
        read(&data().join("eval/summary/baseline.summary.json"))
    );
}

#[test]
fn gate_thresholds_and_optimizer_come_from_the_pack() {
    let mut v = json::parse(bat_contract::pack::DEFAULT_PACK_JSON).expect("pack json");
    if let Value::Object(m) = &mut v {
        let mut th = m
            .get("gate_thresholds")
            .and_then(Value::as_object)
            .cloned()
            .expect("thresholds");
        th.insert("maximum_late_stage_drop", Value::Float(0.5));
        m.insert("gate_thresholds", Value::Object(th));
        let mut opt = m
            .get("prescription_optimizer")
            .and_then(Value::as_object)
            .cloned()
            .expect("optimizer");
        opt.insert("steps", Value::Int(7));
        m.insert("prescription_optimizer", Value::Object(opt));
    }
    let pack = Pack::parse(&json::pretty_json(&v), "test").expect("pack");
    let model = GateModel::from_pack(&pack).expect("gate model");
    let load = |n: &str| {
        json::parse_bytes(&read(
            &data().join(format!("eval/summary/{n}.summary.json")),
        ))
        .expect("json")
    };
    // hold-late-stage holds with the reference's 0.03, promotes with 0.5.
    let g = evaluate_gate(&load("baseline"), &load("cand-late-stage"), true, &model).expect("gate");
    assert!(g.promoted);
    assert_eq!(
        g.gate
            .get("thresholds")
            .and_then(|t| t.get("maximum_late_stage_drop")),
        Some(&Value::Float(0.5))
    );
    assert_eq!(
        g.prescription.get("optimizer").and_then(|o| o.get("steps")),
        Some(&Value::Int(7))
    );
    let reference = GateModel::from_pack(&Pack::default_pack()).expect("default");
    assert!(
        !evaluate_gate(
            &load("baseline"),
            &load("cand-late-stage"),
            true,
            &reference
        )
        .expect("gate")
        .promoted
    );
}
