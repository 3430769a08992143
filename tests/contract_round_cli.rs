//! CLI journeys for `bat pack`, `bat source build`, `bat round build|verify`:
//! outputs byte for byte, immutable writes, and the spec's error codes.

use std::path::{Path, PathBuf};

use bat_contract::json::{self, Map, Value};
use bat_contract::pack::{Pack, DEFAULT_PACK_JSON};

use crate::common::bat;
use crate::common::utf8 as p;

fn stdout_of(args: &[&str]) -> String {
    let out = bat().args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// Run, expect failure with `code` (exit status) and `needle` in stderr.
/// A needle `error: CODE` names the reference's error code: the message
/// is a sentence, so the code is checked where programs read it, in the
/// `--json` error object.
fn fails(args: &[&str], code: i32, needle: &str) {
    let out = bat().args(args).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    let Some(reference) = needle
        .strip_prefix("error: ")
        .filter(|c| bat_ledger::reads_as_code(c))
    else {
        assert!(
            err.contains(needle),
            "{args:?}: stderr {err:?} lacks {needle:?}"
        );
        return;
    };
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(
        !err.contains(reference),
        "{args:?}: a code as message: {err}"
    );
    let out = bat().arg("--json").args(args).output().expect("runs");
    assert_eq!(out.status.code(), Some(code), "{args:?} --json");
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    let e: serde_json::Value = serde_json::from_str(last).expect(last);
    assert_eq!(e["code"], reference, "{args:?}: {e}");
}

struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    source: PathBuf,
    sha: String,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    let src_dir = root.join("src");
    let printed = stdout_of(&["source", "build", "--output-dir", p(&src_dir)]);
    let manifest = std::fs::read_to_string(src_dir.join("manifest.json")).expect("manifest");
    assert_eq!(printed, manifest, "stdout is the manifest PJ");
    let source = src_dir.join("source.jsonl");
    let sha = json::sha256_hex(&std::fs::read(&source).expect("source"));
    Fixture {
        _tmp: tmp,
        root,
        source,
        sha,
    }
}

#[test]
fn pack_show_prints_the_default_pack() {
    let out = stdout_of(&["pack", "show"]);
    let want = json::pretty_json_file(&json::parse(DEFAULT_PACK_JSON).expect("pack"));
    assert_eq!(out, want);
    assert!(out.contains("\"automedbench-lite\""));
    assert_eq!(
        stdout_of(&["pack", "check", "contract/src/default_pack.json"]).trim_end(),
        "contract/src/default_pack.json: valid pack"
    );
}

fn edited_pack(dir: &Path, name: &str, edit: impl FnOnce(&mut Map)) -> PathBuf {
    let mut v = json::parse(DEFAULT_PACK_JSON).expect("pack");
    if let Value::Object(m) = &mut v {
        edit(m);
    }
    let path = dir.join(name);
    std::fs::write(&path, json::pretty_json_file(&v)).expect("write pack");
    path
}

fn obj<'a>(m: &'a mut Map, key: &str) -> &'a mut Map {
    match m.get_mut(key) {
        Some(Value::Object(o)) => o,
        _ => panic!("{key} is an object"),
    }
}

#[test]
fn pack_check_reports_precise_problems() {
    let tmp = tempfile::tempdir().expect("tempdir");
    type Edit = Box<dyn FnOnce(&mut Map)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "unknown-stage",
            Box::new(|m| obj(m, "stage_weights").insert("S6", Value::Float(0.0))),
            "stage_weights.S6: unknown stage \"S6\"",
        ),
        (
            "weights",
            Box::new(|m| obj(m, "stage_weights").insert("S5", Value::Float(0.2))),
            "stage_weights: weights sum to 1.1, not 1",
        ),
        (
            "placeholder",
            Box::new(|m| {
                if let Some(Value::Array(t)) = obj(m, "prompt").get_mut("user_template") {
                    t[0] = Value::Str("Id {state}".into());
                }
            }),
            "prompt.user_template[0]: placeholder {state} is not known to the renderer",
        ),
        (
            "no-task",
            Box::new(|m| drop(obj(m, "tasks").remove("vqa"))),
            "tasks: track \"vqa\" has no task definition",
        ),
        (
            "missing-key",
            Box::new(|m| drop(m.remove("reward_version"))),
            "reward_version: missing key",
        ),
        (
            "wrong-type",
            Box::new(|m| m.insert("tracks", Value::Str("vqa".into()))),
            "tracks: must be a list of strings",
        ),
        (
            "prose-marker",
            Box::new(|m| {
                obj(m, "prompt").insert("system", Value::Str("<PROSE: system prompt>".into()))
            }),
            "prompt.system: still carries a <PROSE: ...> placeholder",
        ),
    ];
    for (name, edit, needle) in cases {
        let path = edited_pack(tmp.path(), &format!("{name}.json"), edit);
        let out = bat()
            .args(["pack", "check", p(&path)])
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(1), "{name}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(needle), "{name}: {text}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("is invalid: "),
            "{name}"
        );
        // The library agrees.
        assert!(!Pack::load(&path).expect("loads").check().is_empty());
    }
}

#[test]
fn source_build_is_immutable() {
    let f = fixture();
    let dir = f.source.parent().expect("dir");
    // Same bytes again: a no-op that succeeds.
    stdout_of(&["source", "build", "--output-dir", p(dir)]);
    std::fs::write(&f.source, b"tampered\n").expect("tamper");
    let canon = std::fs::canonicalize(&f.source).expect("canon");
    fails(
        &["source", "build", "--output-dir", p(dir)],
        1,
        &format!("refusing to overwrite: {}", canon.display()),
    );
    assert_eq!(
        std::fs::read(&f.source).expect("read"),
        b"tampered\n",
        "the refused file is untouched"
    );
}

#[test]
fn round_build_then_verify() {
    let f = fixture();
    let out = f.root.join("r01");
    let args = [
        "round",
        "build",
        "--source",
        p(&f.source),
        "--source-sha256",
        &f.sha,
        "--round-id",
        "r01",
        "--target-stage",
        "S3",
        "--batches",
        "2",
        "--output-dir",
        p(&out),
    ];
    let printed = stdout_of(&args);
    let manifest = std::fs::read_to_string(out.join("manifest.json")).expect("manifest");
    assert_eq!(printed, manifest);
    let m = json::parse(&manifest).expect("manifest json");
    assert_eq!(m.get("rows"), Some(&Value::Int(16)));
    let train = std::fs::read(out.join("train.jsonl")).expect("train");
    assert_eq!(
        m.get("train")
            .and_then(|t| t.get("sha256"))
            .and_then(Value::as_str),
        Some(json::sha256_hex(&train).as_str())
    );
    assert!(train.ends_with(b"\n") && train.iter().filter(|c| **c == b'\n').count() == 16);
    // Identical rebuild: no-op.
    assert_eq!(stdout_of(&args), printed);
    // Different content into the same folder: refused.
    let mut other = args.to_vec();
    other.extend(["--seed", "other"]);
    fails(&other, 1, "refusing to overwrite:");

    let verified = stdout_of(&[
        "round",
        "verify",
        "--train",
        p(&out.join("train.jsonl")),
        "--manifest",
        p(&out.join("manifest.json")),
    ]);
    let v = json::parse(&verified).expect("json");
    assert_eq!(v.get("status").and_then(Value::as_str), Some("passed"));
    assert_eq!(verified, json::pretty_json_file(&v));

    // A tampered train file is caught by its digest…
    let tampered = f.root.join("tampered.jsonl");
    let mut bytes = train.clone();
    let pos = bytes
        .windows(4)
        .position(|w| w == b"\"S3\"")
        .expect("a stage");
    bytes[pos + 2] = b'4';
    std::fs::write(&tampered, &bytes).expect("write");
    fails(
        &[
            "round",
            "verify",
            "--train",
            p(&tampered),
            "--manifest",
            p(&out.join("manifest.json")),
        ],
        1,
        "error: train_digest_mismatch",
    );
    // …and, with a manifest that matches it, by the content checks.
    let mut m2 = m.clone();
    if let Value::Object(mm) = &mut m2 {
        mm.insert(
            "train",
            Value::Object(
                Map::new()
                    .with("file", "train.jsonl")
                    .with("sha256", json::sha256_hex(&bytes)),
            ),
        );
    }
    let m2p = f.root.join("m2.json");
    std::fs::write(&m2p, json::pretty_json_file(&m2)).expect("write");
    let out2 = bat()
        .args([
            "round",
            "verify",
            "--train",
            p(&tampered),
            "--manifest",
            p(&m2p),
        ])
        .output()
        .expect("runs");
    assert_eq!(out2.status.code(), Some(1));
    // A pack file that cannot be read is reported, not defaulted.
    fails(
        &[
            "round",
            "verify",
            "--train",
            p(&out.join("train.jsonl")),
            "--manifest",
            p(&out.join("manifest.json")),
            "--pack",
            "/nonexistent/pack.json",
        ],
        1,
        "cannot read pack",
    );
}

#[test]
fn round_build_error_codes() {
    let f = fixture();
    let o = f.root.join("out");
    let base = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "round",
            "build",
            "--source",
            p(&f.source),
            "--round-id",
            "r01",
            "--output-dir",
            p(&o),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str], code: i32, needle: &str| {
        let args = base(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&refs, code, needle);
    };
    let sha = f.sha.as_str();
    run(
        &["--source-sha256", &"0".repeat(64), "--target-stage", "S3"],
        1,
        "error: source_digest_mismatch",
    );
    run(
        &[
            "--source-sha256",
            sha,
            "--target-stage",
            "S3",
            "--batches",
            "0",
        ],
        1,
        "error: round_arguments_invalid",
    );
    run(
        &[
            "--source-sha256",
            sha,
            "--target-stage",
            "S3",
            "--batches",
            "-3",
        ],
        1,
        "error: round_arguments_invalid",
    );
    run(&["--source-sha256", sha], 1, "error: target_stage_required");
    run(
        &["--source-sha256", sha, "--target-stage", "S9"],
        2,
        "invalid choice",
    );
    run(
        &["--source-sha256", sha, "--target-stage", "E2E"],
        2,
        "invalid choice",
    );
    let presc = |name: &str, body: &str| {
        let path = f.root.join(name);
        std::fs::write(&path, body).expect("write");
        path.to_str().expect("utf8").to_string()
    };
    let list = presc("list.json", "[\"S4\"]");
    run(
        &["--source-sha256", sha, "--prescription", &list],
        1,
        "error: prescription_invalid",
    );
    let s4 = presc(
        "s4.json",
        "{\"target_stage\": \"S4\", \"artifact_kind\": \"bat_round_prescription\"}",
    );
    run(
        &[
            "--source-sha256",
            sha,
            "--prescription",
            &s4,
            "--target-stage",
            "S3",
        ],
        1,
        "error: target_disagrees_with_prescription",
    );
    let e2e = presc("e2e.json", "{\"target_stage\": \"E2E\"}");
    run(
        &["--source-sha256", sha, "--prescription", &e2e],
        1,
        "error: target_stage_required",
    );
    // A blank round id (after the target is settled).
    let args = [
        "round",
        "build",
        "--source",
        p(&f.source),
        "--round-id",
        "  ",
        "--output-dir",
        p(&o),
        "--source-sha256",
        sha,
        "--prescription",
        &s4,
    ];
    fails(&args, 1, "error: round_arguments_invalid");
    // A corrupted source row.
    let bad = f.root.join("bad.jsonl");
    let mut text = std::fs::read_to_string(&f.source).expect("source");
    text = text.replacen("\"schema_version\":1", "\"schema_version\":2", 1);
    std::fs::write(&bad, &text).expect("write");
    let bad_sha = json::sha256_hex(text.as_bytes());
    let args = [
        "round",
        "build",
        "--source",
        p(&bad),
        "--source-sha256",
        &bad_sha,
        "--round-id",
        "r01",
        "--target-stage",
        "S3",
        "--output-dir",
        p(&o),
    ];
    fails(&args, 1, "error: source_row_digest_invalid");
    assert!(
        !o.join("train.jsonl").exists(),
        "nothing written on failure"
    );
}
