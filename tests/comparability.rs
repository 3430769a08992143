//! Comparability of arms (issue 30, part 6), one test per field: in one
//! ledger, toy campaigns (`toy_trainer`/`toy_evaluator`, the command
//! backend) run as independent arms that differ from `base` in exactly one
//! of protocol id, pack, task set, runtime tool format, evaluator
//! template, base checkpoint and budget. `bat compare base ARM` exits 1,
//! names the field in text and `--json`, and passes with
//! `--allow-difference FIELD` while still listing the difference. An arm
//! with the same pack content under another path is comparable (packs are
//! compared by digest), and `bat report` makes the same check.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::common::run::{example, Toy};
use crate::common::{bat, text, write_json};

/// The evaluator wrapper of the `tasks` arms: the same argv for both, its
/// script rewritten between them. The second renames one task.
const SAME_TASKS: &str = "\"$TOY\" \"$@\" || exit $?\n";
const OTHER_TASKS: &str = "\"$TOY\" \"$@\" || exit $?\nsed 's/\"toy-vqa\"/\"toy-vqa-b\"/' \"$3\" > \"$3.tmp\" && mv \"$3.tmp\" \"$3\"\n";

struct Ledger {
    toy: Toy,
    /// `bat pack show`: the default pack as a file.
    pack_copy: PathBuf,
}

/// One ledger for every test of this file, its arms run once.
fn ledger() -> &'static Ledger {
    static L: OnceLock<Ledger> = OnceLock::new();
    L.get_or_init(build)
}

fn build() -> Ledger {
    let toy = Toy::new();
    let root = toy.root.clone();
    // The default pack as a file, and an edited one (one inert member more).
    let shown = ok(&toy.ledger, &["pack", "show"]);
    let pack_copy = root.join("copy-of-default-pack.json");
    std::fs::write(&pack_copy, &shown.stdout).expect("write pack copy");
    let mut edited: Value = serde_json::from_slice(&shown.stdout).expect("pack JSON");
    edited["comparability_test_note"] = json!("an edited pack");
    let pack_edited = write_json(&root.join("edited-pack.json"), edited);
    // Another base checkpoint: the initial model with another config.
    let other_initial = root.join("initial-other");
    std::fs::create_dir_all(&other_initial).expect("mkdir");
    std::fs::copy(
        toy.initial.join("model.safetensors"),
        other_initial.join("model.safetensors"),
    )
    .expect("copy weights");
    std::fs::write(
        other_initial.join("config.json"),
        "{\"model_type\": \"bat-toy\", \"num_stages\": 5, \"variant\": \"other\"}\n",
    )
    .expect("write config");
    // Another evaluator template: the toy evaluator ignores a 4th argument.
    let evaluator_extra = write_json(
        &root.join("evaluator-extra.json"),
        json!([
            example("toy_evaluator"),
            "{checkpoint}",
            "{request}",
            "{output}",
            "extra"
        ]),
    );
    let script = root.join("tasks-evaluator.sh");
    let tasks_evaluator = write_json(
        &root.join("evaluator-tasks.json"),
        json!(["sh", script, "{checkpoint}", "{request}", "{output}"]),
    );
    let wrapper = |body: &str| {
        let head = format!("TOY='{}'\n", example("toy_evaluator").display());
        std::fs::write(&script, head + body).expect("write evaluator script");
    };
    let p = |p: &Path| p.to_string_lossy().into_owned();
    let arms: Vec<(&str, Vec<(&str, String)>)> = vec![
        ("base", vec![]),
        ("protocol", vec![("--protocol-id", "toy-protocol-2".into())]),
        ("pack", vec![("--pack", p(&pack_edited))]),
        ("pack-copy", vec![("--pack", p(&pack_copy))]),
        ("format", vec![("--runtime-tool-format", "qwen".into())]),
        ("evaluator", vec![("--evaluator", p(&evaluator_extra))]),
        (
            "base-checkpoint",
            vec![("--initial-checkpoint", p(&other_initial))],
        ),
        ("budget", vec![("--batches", "3".into())]),
    ];
    for (branch, overrides) in &arms {
        run_arm(&toy, branch, overrides);
    }
    wrapper(SAME_TASKS);
    run_arm(&toy, "tasks-one", &[("--evaluator", p(&tasks_evaluator))]);
    wrapper(OTHER_TASKS);
    run_arm(&toy, "tasks-two", &[("--evaluator", p(&tasks_evaluator))]);
    Ledger { toy, pack_copy }
}

/// `bat run` of one toy round on a new branch, flags overridden.
fn run_arm(toy: &Toy, branch: &str, overrides: &[(&str, String)]) {
    let trainer = &toy.trainer;
    let mut flags: Vec<(&str, String)> = vec![
        ("--source", toy.source.to_string_lossy().into_owned()),
        (
            "--initial-checkpoint",
            toy.initial.to_string_lossy().into_owned(),
        ),
        ("--trainer", trainer.to_string_lossy().into_owned()),
        ("--evaluator", toy.evaluator.to_string_lossy().into_owned()),
        ("--protocol-id", "toy-protocol".into()),
        ("--runtime-tool-format", "hermes".into()),
        ("--rounds", "1".into()),
        ("--batches", "2".into()),
        ("--branch", branch.into()),
    ];
    for (k, v) in overrides {
        match flags.iter_mut().find(|(f, _)| f == k) {
            Some(slot) => slot.1 = v.clone(),
            None => flags.push((k, v.clone())),
        }
    }
    let mut args = vec!["run".to_string(), "--new".to_string()];
    for (k, v) in flags {
        args.push(k.to_string());
        args.push(v);
    }
    ok(&toy.ledger, &args);
}

fn bat_out<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> Output {
    bat()
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("spawn bat")
}

fn ok<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> Output {
    let out = bat_out(dir, args);
    assert!(
        out.status.success(),
        "bat failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

fn fields(v: &Value) -> Vec<(String, bool)> {
    v["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .map(|d| {
            (
                d["field"].as_str().expect("field").to_string(),
                d["allowed"].as_bool().expect("allowed"),
            )
        })
        .collect()
}

/// `bat compare base ARM` differs in `field` only: exit 1 and the field
/// named (text and JSON); allowed, exit 0 and still listed.
fn differs_only_in(arm: &str, field: &str, base: &str) {
    let dir = &ledger().toy.ledger;
    let compare = |extra: &[&str], json: bool| {
        let mut args: Vec<&str> = if json { vec!["--json"] } else { vec![] };
        args.extend(["compare", base, arm, "--resamples", "200"]);
        args.extend(extra);
        bat_out(dir, &args)
    };
    let out = compare(&[], false);
    let t = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{t}{}", text(&out.stderr));
    assert!(t.contains("NOT COMPARABLE"), "{t}");
    assert!(t.contains(&format!("  {field} differs\n")), "{t}");
    let out = compare(&[], true);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("compare --json");
    assert_eq!(v["comparable"], false);
    assert_eq!(
        fields(&v),
        [(field.to_string(), false)],
        "{}",
        v["differences"]
    );
    let values = v["differences"][0]["values"].to_string();
    assert!(values.contains(base) && values.contains(arm), "{values}");
    // Allowed: exit 0, and the output keeps naming the difference.
    let allow = ["--allow-difference", field];
    let out = compare(&allow, false);
    let t = text(&out.stdout);
    assert!(out.status.success(), "{t}{}", text(&out.stderr));
    assert!(
        t.contains("comparable only with allowed differences")
            && t.contains(&format!("  {field} differs (allowed)\n")),
        "{t}"
    );
    let out = compare(&allow, true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("compare --json");
    assert_eq!(v["comparable"], true);
    assert_eq!(fields(&v), [(field.to_string(), true)]);
}

#[test]
fn a_protocol_difference_is_named() {
    differs_only_in("protocol", "protocol", "base");
}

#[test]
fn a_pack_difference_is_named_by_digest() {
    differs_only_in("pack", "pack", "base");
    let out = bat_out(&ledger().toy.ledger, &["--json", "compare", "base", "pack"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("compare --json");
    let values = v["differences"][0]["values"].to_string();
    assert!(values.contains("blake3 "), "{values}");
}

#[test]
fn a_task_set_difference_is_named() {
    // The two arms share the evaluator template; its script differs.
    differs_only_in("tasks-two", "tasks", "tasks-one");
}

#[test]
fn a_runtime_tool_format_difference_is_named() {
    differs_only_in("format", "runtime-tool-format", "base");
}

#[test]
fn an_evaluator_template_difference_is_named() {
    differs_only_in("evaluator", "evaluator", "base");
}

#[test]
fn a_base_checkpoint_difference_is_named() {
    differs_only_in("base-checkpoint", "base-checkpoint", "base");
}

#[test]
fn a_budget_difference_is_named() {
    differs_only_in("budget", "budget", "base");
}

#[test]
fn the_same_pack_under_another_path_is_comparable() {
    let l = ledger();
    // The round records the digest of the pack it ran with: that of
    // `bat pack show`'s bytes, for the embedded pack and its copy alike.
    let want = blake3::hash(&std::fs::read(&l.pack_copy).expect("pack copy")).to_hex();
    for branch in ["base", "pack-copy"] {
        let out = ok(&l.toy.ledger, &["--json", "log", "-n", "1", branch]);
        let v: Value = serde_json::from_slice(&out.stdout).expect("log JSON");
        assert_eq!(
            v[0]["metadata"]["loop"]["pack_blake3"],
            want.as_str(),
            "{branch}"
        );
    }
    let out = ok(
        &l.toy.ledger,
        &["compare", "base", "pack-copy", "--resamples", "200"],
    );
    let t = text(&out.stdout);
    assert!(
        t.contains("comparable: the arms share protocol, pack, tasks"),
        "{t}"
    );
    let out = ok(
        &l.toy.ledger,
        &[
            "--json",
            "compare",
            "base",
            "pack-copy",
            "--resamples",
            "200",
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("compare --json");
    assert_eq!(v["comparable"], true);
    assert_eq!(v["differences"], json!([]));
}

#[test]
fn report_makes_the_same_check() {
    let l = ledger();
    let html = l.toy.root.join("report-budget.html");
    let html_s = html.to_string_lossy().into_owned();
    let args = ["report", "base", "budget", "--no-drift", "-o", &html_s];
    let out = bat_out(&l.toy.ledger, &args);
    let t = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{t}{}", text(&out.stderr));
    assert!(
        t.contains("NOT COMPARABLE") && t.contains("  budget differs\n"),
        "{t}"
    );
    let page = std::fs::read_to_string(&html).expect("the page is written anyway");
    assert!(
        page.contains("NOT COMPARABLE") && page.contains("<code>budget</code> differs"),
        "the page names the difference"
    );
    let mut json_args = vec!["--json"];
    json_args.extend(args);
    let out = bat_out(&l.toy.ledger, &json_args);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("report --json");
    assert_eq!(v["comparable"], false);
    assert_eq!(fields(&v), [("budget".to_string(), false)]);
    // Allowed: exit 0, still listed.
    let mut allowed = args.to_vec();
    allowed.extend(["--allow-difference", "budget"]);
    let out = ok(&l.toy.ledger, &allowed);
    let t = text(&out.stdout);
    assert!(t.contains("  budget differs (allowed)\n"), "{t}");
    // With no arms named every branch is shown: the differences are listed
    // with how to name groups, but an overview does not fail.
    let out = bat_out(&l.toy.ledger, &["report", "--no-drift", "-o", &html_s]);
    let t = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(
        t.contains("with no arms named, every branch is an arm")
            && t.contains("  budget differs\n")
            && !t.contains("NOT COMPARABLE"),
        "{t}"
    );
    // Comparable arms: exit 0, nothing listed.
    let out = ok(
        &l.toy.ledger,
        &["report", "base", "pack-copy", "--no-drift", "-o", &html_s],
    );
    assert!(!text(&out.stdout).contains("differs"));
}
