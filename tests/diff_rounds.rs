//! `bat diff` and `bat eval attach` on two round-like directories committed
//! with plain `bat commit DIR --meta META.json`, on two branches.
//!
//! The round views are generated with `bat source build` + `bat round
//! build`; the model files are real safetensors files; the evaluation,
//! gate and prescription documents are the contract's conformance fixtures
//! copied to `tests/data/diff/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Value};
use sha2::Digest as _;

use crate::common::utf8 as p;
use crate::common::{self, BatRunner};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/diff")
        .join(name)
}

fn fixture(name: &str) -> Value {
    let b = std::fs::read(data(name)).expect("fixture");
    serde_json::from_slice(&b).expect("fixture json")
}

struct Ledger {
    tmp: tempfile::TempDir,
}

impl Ledger {
    fn new() -> Ledger {
        let tmp = tempfile::tempdir().expect("tmp");
        let l = Ledger { tmp };
        l.ok(&["init"]);
        l
    }
    fn root(&self) -> &Path {
        self.tmp.path()
    }
    fn bat(&self) -> BatRunner {
        BatRunner::new(self.root().join("ledger"))
    }
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        self.bat().output(args)
    }
    fn ok(&self, args: &[&str]) -> String {
        std::fs::create_dir_all(self.root().join("ledger")).expect("mkdir");
        self.bat().ok(args)
    }
    fn json(&self, args: &[&str]) -> Value {
        self.bat().json(args)
    }
    fn fails(&self, args: &[&str], code: i32, needle: &str) {
        let out = self.cmd(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
}

fn bat_plain(args: &[&str]) {
    common::succeeded(common::bat().args(args).output().expect("spawn bat"));
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn write_safetensors(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.to_string(),
                TensorView::new(*d, s.clone(), b).expect("view"),
            )
        })
        .collect();
    let bytes = safetensors::serialize(views, None).expect("serialize");
    std::fs::write(path, bytes).expect("write");
}

fn write_json(path: &Path, v: &Value) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, serde_json::to_vec_pretty(v).expect("enc")).expect("write");
}

/// Base weights: 0..12 as a 3×4 F32 tensor.
fn base_w() -> Vec<f32> {
    (0..12).map(|i| i as f32).collect()
}

struct Round<'a> {
    id: &'a str,
    target: &'a str,
    weights: Vec<f32>,
    extra_tensor: bool,
    summary: &'a str,
    gate: &'a str,
    prescription: &'a str,
    identity: &'a str,
}

fn make_round(root: &Path, src: &Path, src_sha: &str, r: &Round<'_>) -> PathBuf {
    let dir = root.join(r.id);
    bat_plain(&[
        "round",
        "build",
        "--source",
        p(src),
        "--source-sha256",
        src_sha,
        "--round-id",
        r.id,
        "--target-stage",
        r.target,
        "--batches",
        "1",
        "--output-dir",
        p(&dir.join("data")),
    ]);
    std::fs::create_dir_all(dir.join("candidate")).expect("mkdir");
    std::fs::write(dir.join("candidate/config.json"), b"{\"hidden_size\": 8}\n").expect("cfg");
    let bias: Vec<u8> = [0x3f80u16, 0xc040]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let mut tensors = vec![
        ("b", Dtype::BF16, vec![2], bias),
        ("w", Dtype::F32, vec![3, 4], f32s(&r.weights)),
    ];
    if r.extra_tensor {
        tensors.push(("extra", Dtype::F32, vec![1], f32s(&[1.0])));
    }
    write_safetensors(&dir.join("candidate/model.safetensors"), &tensors);
    std::fs::create_dir_all(dir.join("candidate-eval")).expect("mkdir");
    std::fs::copy(data(r.summary), dir.join("candidate-eval/summary.json")).expect("copy");
    write_json(
        &dir.join("candidate-eval/checkpoint-binding.json"),
        &json!({"artifact_kind": "bat_gate_model_binding", "model_identity_sha256": r.identity}),
    );
    std::fs::copy(data(r.gate), dir.join("gate.json")).expect("copy");
    std::fs::copy(data(r.prescription), dir.join("prescription.json")).expect("copy");
    write_json(
        &dir.join("training-health.json"),
        &json!({"status": "passed"}),
    );
    let gate = fixture(r.gate);
    write_json(
        &root.join(format!("{}.meta.json", r.id)),
        &json!({"kind": "bat_round", "round_id": r.id, "target_stage": r.target,
                "gate_status": gate["status"]}),
    );
    dir
}

/// Two committed rounds: r01 (target S2, hold) on `main`, r02 (target S4,
/// promote, three weights changed, one tensor added) on `exp`.
fn setup() -> Ledger {
    let l = Ledger::new();
    let root = l.root().to_path_buf();
    bat_plain(&["source", "build", "--output-dir", p(&root.join("src"))]);
    let src = root.join("src/source.jsonl");
    let sha = hex::encode(sha2::Sha256::digest(std::fs::read(&src).expect("src")));
    let r1 = make_round(
        &root,
        &src,
        &sha,
        &Round {
            id: "r01",
            target: "S2",
            weights: base_w(),
            extra_tensor: false,
            summary: "baseline.summary.json",
            gate: "hold.gate.json",
            prescription: "hold.prescription.json",
            identity: &"a".repeat(64),
        },
    );
    let mut w2 = base_w();
    w2[1] += 1.0;
    w2[5] -= 2.0;
    w2[11] += 0.5;
    let r2 = make_round(
        &root,
        &src,
        &sha,
        &Round {
            id: "r02",
            target: "S4",
            weights: w2,
            extra_tensor: true,
            summary: "cand-promote.summary.json",
            gate: "promote.gate.json",
            prescription: "promote.prescription.json",
            identity: &"b".repeat(64),
        },
    );
    let m1 = root.join("r01.meta.json");
    let m2 = root.join("r02.meta.json");
    // The fixtures' summaries are not bound to these toy checkpoints, so
    // they are recorded as plain directories with round-shaped metadata.
    l.ok(&[
        "commit",
        "--plain",
        p(&r1),
        "-m",
        "round r01",
        "--meta",
        p(&m1),
    ]);
    l.ok(&[
        "commit",
        "--plain",
        p(&r2),
        "-m",
        "round r02",
        "--branch",
        "exp",
        "--meta",
        p(&m2),
    ]);
    l
}

/// Counts of extra_info members over a train.jsonl, computed here
/// independently of bat.
fn counts(train: &Path, key: &str) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for line in std::fs::read_to_string(train).expect("train").lines() {
        let v: Value = serde_json::from_str(line).expect("row");
        let k = v["extra_info"][key].as_str().expect("str").to_string();
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn diff_sections_have_exact_values() {
    let l = setup();
    let d = l.json(&["diff", "main", "exp"]);
    let root = l.root();

    // curriculum
    let c = &d["curriculum"];
    assert_eq!(c["a"]["target_stage"], "S2");
    assert_eq!(c["b"]["target_stage"], "S4");
    assert_eq!(c["a"]["round_id"], "r01");
    assert_eq!(c["target_changed"], true);
    let (ph, pp) = (
        fixture("hold.prescription.json"),
        fixture("promote.prescription.json"),
    );
    assert_eq!(c["a"]["prescription"]["target_stage"], ph["target_stage"]);
    assert_eq!(c["b"]["prescription"]["target_stage"], pp["target_stage"]);
    assert_eq!(c["a"]["prescription"]["reason"], "lowest_candidate_stage");
    assert_eq!(c["a"]["prescription"]["promotion_status"], "hold");
    assert_eq!(c["b"]["prescription"]["promotion_status"], "promote");

    // mixture
    let m = &d["mixture"];
    assert_eq!(m["a"]["rows"], 8);
    assert_eq!(m["b"]["rows"], 8);
    for (key, field) in [
        ("by_pool", "source_pool"),
        ("by_stage", "target_stage"),
        ("by_track", "track"),
        ("by_outcome", "outcome_bucket"),
    ] {
        let ca = counts(&root.join("r01/data/train.jsonl"), field);
        let cb = counts(&root.join("r02/data/train.jsonl"), field);
        assert_eq!(m["a"][key], json!(ca), "{key}");
        assert_eq!(m["b"][key], json!(cb), "{key}");
        for (k, t) in m["delta"][key].as_object().expect("obj") {
            let x = ca.get(k).copied().unwrap_or(0);
            let y = cb.get(k).copied().unwrap_or(0);
            assert_eq!(t["delta"], y - x, "{key}.{k}");
        }
    }
    assert_eq!(
        m["a"]["by_pool"],
        json!({"e2e": 2, "s_mix": 2, "s_target": 4})
    );
    assert_eq!(
        m["a"]["by_stage"]["S2"].as_i64().map(|n| n >= 4),
        Some(true)
    );
    assert_eq!(
        m["b"]["by_stage"]["S4"].as_i64().map(|n| n >= 4),
        Some(true)
    );
    let ids = |r: &str| -> std::collections::BTreeSet<String> {
        std::fs::read_to_string(root.join(r).join("data/train.jsonl"))
            .expect("train")
            .lines()
            .map(|line| {
                let v: Value = serde_json::from_str(line).expect("row");
                v["extra_info"]["source_state_id"]
                    .as_str()
                    .expect("id")
                    .to_string()
            })
            .collect()
    };
    let (ia, ib) = (ids("r01"), ids("r02"));
    let want_in: Vec<&String> = ib.difference(&ia).collect();
    let want_out: Vec<&String> = ia.difference(&ib).collect();
    assert_eq!(m["source_rows"]["in"], json!(want_in));
    assert_eq!(m["source_rows"]["out"], json!(want_out));
    assert_eq!(m["source_rows"]["in_count"], want_in.len());
    assert_eq!(m["digests"]["train_changed"], true);
    assert_eq!(m["digests"]["source_changed"], false);
    let man: Value =
        serde_json::from_slice(&std::fs::read(root.join("r02/data/manifest.json")).expect("m"))
            .expect("manifest");
    assert_eq!(m["digests"]["b"]["train_sha256"], man["train"]["sha256"]);

    // reward: same pack, so every stage both rounds train has the same
    // contract; stages only one round trains are added/removed.
    let r = &d["reward"];
    let by = r["by_stage"].as_object().expect("by_stage");
    assert!(!by.is_empty());
    for (stage, x) in by {
        let (a, b) = (
            x["a"].as_array().expect("a").len(),
            x["b"].as_array().expect("b").len(),
        );
        let want = match (a, b) {
            (0, _) => "added",
            (_, 0) => "removed",
            _ => "unchanged",
        };
        assert_eq!(x["status"], want, "{stage}");
    }
    assert_eq!(r["task_definition_version_changed"], false);

    // checkpoint
    let k = &d["checkpoint"];
    assert_eq!(k["a"]["identity"], "a".repeat(64));
    assert_eq!(k["b"]["identity"], "b".repeat(64));
    assert_eq!(k["identity_changed"], true);
    let files = k["files"].as_array().expect("files");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["path"], "config.json");
    assert_eq!(files[0]["status"], "unchanged");
    assert_eq!(files[1]["path"], "model.safetensors");
    assert_eq!(files[1]["status"], "changed");
    let t = files[1]["tensors"].as_array().expect("tensors");
    let names: Vec<&str> = t.iter().map(|x| x["name"].as_str().expect("n")).collect();
    assert_eq!(names, ["b", "extra", "w"]);
    assert_eq!(t[0]["status"], "unchanged");
    assert_eq!(t[1]["status"], "added");
    assert_eq!(t[2]["status"], "changed");
    assert_eq!(t[2]["elements"], 12);
    assert_eq!(t[2]["changed_elements"], 3);
    assert_eq!(f(&t[2]["changed_fraction"]), 0.25);
    assert_eq!(f(&t[2]["max_abs_delta"]), 2.0);
    assert_eq!(f(&t[2]["l2_delta"]), 5.25f64.sqrt());

    // eval: signed deltas B − A from the fixtures' numbers.
    let (sa, sb) = (
        fixture("baseline.summary.json"),
        fixture("cand-promote.summary.json"),
    );
    let e = &d["eval"];
    assert_eq!(e["source"]["a"], "candidate-eval/summary.json");
    for k in ["overall", "task", "agentic"] {
        let x = &e["means"][k];
        assert_eq!(f(&x["a"]), f(&sa["means"][k]));
        assert_eq!(f(&x["b"]), f(&sb["means"][k]));
        assert_eq!(
            f(&x["delta"]),
            f(&sb["means"][k]) - f(&sa["means"][k]),
            "{k}"
        );
    }
    for s in ["S1", "S2", "S3", "S4", "S5"] {
        let want = f(&sb["stage_scores"][s]) - f(&sa["stage_scores"][s]);
        assert_eq!(f(&e["stages"][s]["delta"]), want, "{s}");
    }
    let tracks = sb["track_scores"].as_object().expect("tracks");
    assert_eq!(e["tracks"].as_object().expect("t").len(), tracks.len());
    for (tr, v) in tracks {
        assert_eq!(
            f(&e["tracks"][tr]["delta"]),
            f(v) - f(&sa["track_scores"][tr]),
            "{tr}"
        );
    }

    // gate: only per_track_regression flips (false in hold, true in promote).
    let g = &d["gate"];
    assert_eq!(g["a"]["status"], "hold");
    assert_eq!(g["b"]["status"], "promote");
    assert_eq!(g["decision_changed"], true);
    assert_eq!(
        g["flipped"],
        json!([{"check": "per_track_regression", "a": false, "b": true}])
    );
    assert_eq!(g["checks"]["paired_cells"]["flipped"], false);

    // audit: none yet.
    assert_eq!(d["audit"], json!({"a": null, "b": null}));

    // The same diff reversed flips the signs.
    let rev = l.json(&["diff", "exp", "main", "--section", "eval"]);
    assert_eq!(
        f(&rev["eval"]["means"]["overall"]["delta"]),
        f(&sa["means"]["overall"]) - f(&sb["means"]["overall"])
    );
}

#[test]
fn sections_filter_and_text_output() {
    let l = setup();
    let d = l.json(&[
        "diff",
        "main",
        "exp",
        "--section",
        "gate",
        "--section",
        "checkpoint",
    ]);
    let keys: Vec<&String> = d.as_object().expect("obj").keys().collect();
    assert_eq!(keys, ["a", "b", "checkpoint", "gate"]);
    l.fails(
        &["diff", "main", "exp", "--section", "weights"],
        2,
        "unknown section",
    );
    let text = l.ok(&["diff", "main", "exp"]);
    for needle in [
        "[curriculum]",
        "round r01 target S2",
        "[mixture]",
        "[reward]",
        "[checkpoint]",
        "changed 0.2500 of 12 elements, max|Δ| 2.0000",
        "[eval]",
        "flipped per_track_regression: false -> true",
        "decision hold -> promote",
        "a: no audits",
    ] {
        assert!(text.contains(needle), "text lacks {needle:?}:\n{text}");
    }
}

#[test]
fn diff_of_plain_commits_reports_absent() {
    let l = Ledger::new();
    let d1 = l.root().join("plain1");
    std::fs::create_dir_all(&d1).expect("mkdir");
    std::fs::write(d1.join("notes.txt"), b"x").expect("w");
    l.ok(&["commit", p(&d1), "-m", "one"]);
    std::fs::write(d1.join("notes.txt"), b"y").expect("w");
    l.ok(&["commit", p(&d1), "-m", "two"]);
    let d = l.json(&["diff", "HEAD~1", "HEAD"]);
    assert_eq!(d["mixture"]["a"], "absent");
    assert_eq!(d["mixture"]["source_rows"], "absent");
    assert_eq!(d["gate"]["a"], "absent");
    assert_eq!(d["gate"]["flipped"], "absent");
    assert_eq!(d["checkpoint"]["files"], "absent");
    assert_eq!(d["curriculum"]["a"]["prescription"], "absent");
    assert_eq!(d["eval"]["source"]["b"], "absent");
    assert_eq!(d["eval"]["means"]["overall"]["delta"], Value::Null);
    l.ok(&["diff", "HEAD~1", "HEAD"]);
}

#[test]
fn audit_attach_shows_gap_and_never_moves_branches() {
    let l = setup();
    let before_exp = l.json(&["log", "exp", "-n", "1"])[0]["id"].clone();
    let before_main = l.json(&["log", "main", "-n", "1"])[0]["id"].clone();
    let audit = data("cand-track-drop.summary.json");
    let out = l.json(&[
        "eval",
        "attach",
        "exp",
        "--summary",
        p(&audit),
        "--role",
        "audit",
        "--protocol-id",
        "audit-p1",
        // The fixture summaries are not bound to these toy checkpoints.
        "--allow-mismatch",
        "--reason",
        "fixture summary",
    ]);
    let exp_id = before_exp.as_str().expect("id");
    assert_eq!(out["audits"], before_exp);
    assert_eq!(out["tag"], format!("refs/tags/audits/{exp_id}/audit-p1"));

    // No branch moved; no staging branch is left.
    assert_eq!(l.json(&["log", "exp", "-n", "1"])[0]["id"], before_exp);
    assert_eq!(l.json(&["log", "main", "-n", "1"])[0]["id"], before_main);
    let branches = l.ok(&["branch"]);
    assert!(!branches.contains("staging"), "{branches}");

    // The audit commit: parent REV, REV's files plus the audit summary.
    let show = l.json(&["show", out["audit_commit"].as_str().expect("id")]);
    assert_eq!(show["parents"], json!([before_exp]));
    assert_eq!(show["metadata"]["kind"], "bat_audit");
    assert_eq!(show["metadata"]["protocol_id"], "audit-p1");
    let paths: Vec<&str> = show["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|x| x["path"].as_str().expect("p"))
        .collect();
    assert!(paths.contains(&"audit/audit-p1/summary.json"));
    assert!(paths.contains(&"gate.json"));

    // diff shows the gap = audit − gating on side b only.
    let d = l.json(&["diff", "main", "exp", "--section", "audit"]);
    assert_eq!(d["audit"]["a"], Value::Null);
    let gating = fixture("cand-promote.summary.json");
    let aud = fixture("cand-track-drop.summary.json");
    let g = &d["audit"]["b"];
    assert_eq!(g["gating_source"], "candidate-eval/summary.json");
    assert_eq!(g["audits"][0]["protocol_id"], "audit-p1");
    for k in ["overall", "task", "agentic"] {
        assert_eq!(
            f(&g["audits"][0]["gap"][k]),
            f(&aud["means"][k]) - f(&gating["means"][k]),
            "{k}"
        );
    }
    assert_eq!(
        f(&g["audits"][0]["gap"]["stages"]["S3"]),
        f(&aud["stage_scores"]["S3"]) - f(&gating["stage_scores"]["S3"])
    );

    // `bat log` carries the same gap: an `audit` member in --json and the
    // audit-gap column in the round table.
    let overall_gap = f(&aud["means"]["overall"]) - f(&gating["means"]["overall"]);
    let log = l.json(&["log", "exp", "-n", "1"]);
    assert_eq!(log[0]["audit"]["audits"], 1);
    assert_eq!(log[0]["audit"]["protocol_id"], "audit-p1");
    assert_eq!(f(&log[0]["audit"]["overall_gap"]), overall_gap);
    let main_log = l.json(&["log", "main", "-n", "1"]);
    assert!(
        main_log[0].get("audit").is_none(),
        "main's round has no audit"
    );
    let table = l.ok(&["log", "exp", "-n", "1"]);
    assert!(table.contains("audit-gap"), "{table}");
    assert!(table.contains(&format!("{overall_gap:+.3}")), "{table}");

    // The gate and target of the round are what they were.
    let d2 = l.json(&[
        "diff",
        "main",
        "exp",
        "--section",
        "gate",
        "--section",
        "curriculum",
    ]);
    assert_eq!(d2["gate"]["b"]["status"], "promote");
    assert_eq!(
        d2["curriculum"]["b"]["prescription"]["target_stage"],
        fixture("promote.prescription.json")["target_stage"]
    );

    // Library integration point for `bat log`.
    let ledger = bat_ledger::Ledger::discover(&l.root().join("ledger")).expect("open");
    let exp = ledger.resolve("exp").expect("exp");
    let cell = bat::inspect::audit::audit_column(&ledger, &exp)
        .expect("column")
        .expect("has audits");
    let want = f(&aud["means"]["overall"]) - f(&gating["means"]["overall"]);
    assert_eq!(cell.overall_gap, Some(want));
    assert_eq!(cell.text, format!("{want:+.3}"));
    assert_eq!(cell.audits, 1);
    let trend = bat::inspect::audit::audit_trend(&ledger, exp, None).expect("trend");
    assert_eq!(trend.len(), 1);
    assert_eq!(trend[0].commit, exp);
    assert_eq!(trend[0].round_id.as_deref(), Some("r02"));
    assert_eq!(trend[0].overall_gap["audit-p1"], Some(want));
    let main = ledger.resolve("main").expect("main");
    assert!(bat::inspect::audit::audit_column(&ledger, &main)
        .expect("column")
        .is_none());
    drop(ledger);

    // Audits are immutable; bad requests are refused without writing.
    l.fails(
        &[
            "eval",
            "attach",
            "exp",
            "--summary",
            p(&audit),
            "--role",
            "audit",
            "--protocol-id",
            "audit-p1",
        ],
        2,
        "already recorded",
    );
    l.fails(
        &[
            "eval",
            "attach",
            "exp",
            "--summary",
            p(&audit),
            "--role",
            "gating",
            "--protocol-id",
            "p2",
        ],
        2,
        "only \"audit\"",
    );
    l.fails(
        &[
            "eval",
            "attach",
            "exp",
            "--summary",
            p(&audit),
            "--role",
            "audit",
            "--protocol-id",
            "a/b",
        ],
        2,
        "protocol id",
    );
    let bad = l.root().join("bad.json");
    let mut v = aud.clone();
    v["stage_scores"].as_object_mut().expect("obj").remove("S5");
    write_json(&bad, &v);
    l.fails(
        &[
            "eval",
            "attach",
            "exp",
            "--summary",
            p(&bad),
            "--role",
            "audit",
            "--protocol-id",
            "p3",
        ],
        2,
        "stage_scores",
    );
    std::fs::write(&bad, b"{\"artifact_kind\": \"bat_eval_summary\", \"status\": \"valid\", \"means\": {\"overall\": NaN, \"task\": 0.5, \"agentic\": 0.5}}").expect("w");
    l.fails(
        &[
            "eval",
            "attach",
            "exp",
            "--summary",
            p(&bad),
            "--role",
            "audit",
            "--protocol-id",
            "p4",
        ],
        2,
        "means.overall",
    );
    let tags = l.ok(&["tag"]);
    assert_eq!(tags.matches("audits/").count(), 1, "{tags}");
    l.ok(&["fsck"]);

    // The tag keeps the audit alive through gc.
    l.ok(&["gc"]);
    l.ok(&["fsck"]);
    let after = l.json(&["diff", "main", "exp", "--section", "audit"]);
    assert_eq!(after["audit"], d["audit"]);

    // The same protocol on another round: the trend spans both, newest
    // first, and each side of the diff now has its gap.
    l.ok(&[
        "eval",
        "attach",
        "main",
        "--summary",
        p(&audit),
        "--role",
        "audit",
        "--protocol-id",
        "audit-p1",
        "--allow-mismatch",
        "--reason",
        "fixture summary",
    ]);
    let ledger = bat_ledger::Ledger::discover(&l.root().join("ledger")).expect("open");
    let trend = bat::inspect::audit::audit_trend(&ledger, exp, None).expect("trend");
    let rounds: Vec<Option<&str>> = trend.iter().map(|t| t.round_id.as_deref()).collect();
    assert_eq!(rounds, [Some("r02"), Some("r01")]);
    let base = fixture("baseline.summary.json");
    assert_eq!(
        trend[1].overall_gap["audit-p1"],
        Some(f(&aud["means"]["overall"]) - f(&base["means"]["overall"]))
    );
    drop(ledger);
    let both = l.json(&["diff", "main", "exp", "--section", "audit"]);
    assert_eq!(
        both["audit"]["a"]["gating_source"],
        "candidate-eval/summary.json"
    );
    assert_eq!(both["audit"]["b"], d["audit"]["b"]);
}

#[test]
fn large_files_stream_through_scratch_files() {
    let l = setup();
    let scratch = l.root().join("scratch");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    let ledger = bat_ledger::Ledger::discover(&l.root().join("ledger")).expect("open");
    let (a, b) = (
        ledger.resolve("main").expect("main"),
        ledger.resolve("exp").expect("exp"),
    );
    let opts = |limit: u64| bat::inspect::diff::DiffOptions {
        sections: vec![bat::inspect::diff::Section::Checkpoint],
        scratch_dir: Some(scratch.clone()),
        memory_limit: limit,
        decode: true,
    };
    // Limit 0: every side goes through an unnamed scratch file; the result
    // equals the in-memory one, and no file is left behind.
    let disk = bat::inspect::diff::diff_commits(&ledger, a, b, &opts(0), &bat::Ctx::quiet())
        .expect("diff");
    let mem = bat::inspect::diff::diff_commits(&ledger, a, b, &opts(u64::MAX), &bat::Ctx::quiet())
        .expect("diff");
    assert_eq!(disk, mem);
    let w = &disk["checkpoint"]["files"][1]["tensors"][2];
    assert_eq!(w["name"], "w");
    assert_eq!(w["changed_elements"], 3);
    assert_eq!(
        std::fs::read_dir(&scratch).expect("ls").count(),
        0,
        "scratch files are unnamed"
    );
    // A scratch folder that does not exist is a clear error.
    let mut bad = opts(0);
    bad.scratch_dir = Some(l.root().join("missing"));
    let e = bat::inspect::diff::diff_commits(&ledger, a, b, &bad, &bat::Ctx::quiet())
        .expect_err("no scratch dir");
    assert!(
        e.to_string()
            .contains("scratch file for candidate/model.safetensors"),
        "{e}"
    );
}
