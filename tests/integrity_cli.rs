//! Integrity at every door, through the real binary: `eval attach` checks
//! the summary's checkpoint identity against the round (override with a
//! recorded reason), `replay --verify --strict` fails on a difference that
//! plain `--verify` tolerates, a bundle of `main` keeps `refs/promoted/main`
//! through a clone, re-committing an earlier round says "already
//! committed", and a directory that is almost a round gets a hint.

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output};

use bat_contract::pack::Pack;
use loop_support::example;
use round_common::*;
use serde_json::Value;

use crate::common::loop_support;
use crate::common::round as round_common;
use crate::common::stderr;
use crate::common::utf8 as p;

fn run(ledger: &Path, args: &[&str]) -> Output {
    bat(ledger).args(args).output().expect("bat runs")
}

fn ok_json(ledger: &Path, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = run(ledger, &a);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// The campaign of `round_common` with r01..r03 committed on `main`;
/// returns the commit ids.
fn committed(root: &Path) -> (Campaign, Vec<String>) {
    let c = build_campaign(root);
    let mut ids = Vec::new();
    for r in ["r01", "r02", "r03"] {
        let v = ok_json(
            &c.ledger,
            &[
                "commit",
                "--no-code-repo",
                c.round(r).to_str().expect("utf8"),
            ],
        );
        ids.push(v["commit"].as_str().expect("commit id").to_string());
    }
    (c, ids)
}

#[test]
fn eval_attach_refuses_another_rounds_checkpoint_and_records_an_override() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (c, ids) = committed(tmp.path());
    let own = c.round("r01").join("candidate-eval/summary.json");
    let foreign = c.round("r03").join("candidate-eval/summary.json");
    let attach = |rev: &str, summary: &Path, proto: &str, extra: &[&str]| {
        let mut a = vec![
            "eval",
            "attach",
            rev,
            "--summary",
            p(summary),
            "--role",
            "audit",
            "--protocol-id",
            proto,
        ];
        a.extend_from_slice(extra);
        run(&c.ledger, &a)
    };

    // r03's evaluation attached to r01: refused, naming both identities
    // and the round the summary belongs to; nothing is recorded.
    let out = attach("r01", &foreign, "p-foreign", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the summary evaluated checkpoint"), "{err}");
    assert!(err.contains(&ids[2]), "names r03's commit: {err}");
    assert!(err.contains("--allow-mismatch"), "{err}");
    let tags = run(&c.ledger, &["tag"]);
    assert!(
        !String::from_utf8_lossy(&tags.stdout).contains("audits/"),
        "a refused audit left a tag"
    );

    // The override needs a reason (clap refuses it alone).
    let out = attach("r01", &foreign, "p-foreign", &["--allow-mismatch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // With a reason it is recorded, and the reason is in the metadata.
    let out = attach(
        "r01",
        &foreign,
        "p-foreign",
        &[
            "--allow-mismatch",
            "--reason",
            "cross-round audit on purpose",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("mismatch accepted: cross-round audit on purpose"),
        "{text}"
    );
    let tag = format!("audits/{}/p-foreign", ids[0]);
    let show = ok_json(&c.ledger, &["show", &tag]);
    let check = &show["metadata"]["checkpoint_check"];
    assert_eq!(check["status"], "mismatch_allowed");
    assert_eq!(check["reason"], "cross-round audit on purpose");
    assert_ne!(
        check["summary_checkpoint_sha256"],
        check["round_checkpoint_sha256"]
    );

    // The round's own evaluation matches and needs no override.
    let out = attach("r01", &own, "p-own", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let show = ok_json(&c.ledger, &["show", &format!("audits/{}/p-own", ids[0])]);
    assert_eq!(show["metadata"]["checkpoint_check"]["status"], "match");
}

#[test]
fn bundle_of_main_keeps_the_promoted_ref_through_a_clone() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (c, ids) = committed(tmp.path());
    // r03 promoted: refs/promoted/main is r03; main is r03 too, so move
    // main on with a plain commit to tell the refs apart.
    let extra = tmp.path().join("notes");
    std::fs::create_dir_all(&extra).expect("mkdir");
    std::fs::write(extra.join("n.txt"), b"after r03").expect("write");
    run(&c.ledger, &["commit", p(&extra), "-m", "notes"]);
    let promoted = ok_json(&c.ledger, &["show", "refs/promoted/main"]);
    assert_eq!(promoted["id"], ids[2].as_str());

    let bundle = tmp.path().join("main.bundle");
    let out = ok_json(&c.ledger, &["bundle", "create", p(&bundle), "main"]);
    let refs: Vec<&str> = out["summary"]["refs"]
        .as_array()
        .expect("refs")
        .iter()
        .filter_map(|r| r[0].as_str().or(r["name"].as_str()))
        .collect();
    assert!(refs.contains(&"refs/promoted/main"), "{out}");
    let v = run(tmp.path(), &["bundle", "verify", p(&bundle)]);
    assert!(v.status.success(), "{}", stderr(&v));

    let dest = tmp.path().join("restored");
    let out = run(tmp.path(), &["clone", p(&bundle), p(&dest)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let back = ok_json(&dest, &["show", "refs/promoted/main"]);
    assert_eq!(back["id"], ids[2].as_str());
    // The clone's promoted round is the one the next round starts from.
    let log = ok_json(&dest, &["log", "main", "-n", "1"]);
    assert_ne!(log[0]["id"], back["id"]);

    // A fetch from the bundle keeps it below the remote's namespace, which
    // is no remote-tracking branch.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    assert!(run(&other, &["init"]).status.success());
    assert!(run(&other, &["remote", "add", "b", p(&bundle)])
        .status
        .success());
    let f = run(&other, &["fetch", "b"]);
    assert!(f.status.success(), "{}", stderr(&f));
    let fetched = ok_json(&other, &["show", "refs/remotes/b/promoted/main"]);
    assert_eq!(fetched["id"], ids[2].as_str());
    let r = run(&other, &["branch", "-r"]);
    let r = String::from_utf8_lossy(&r.stdout);
    assert!(r.contains("b/main"), "{r}");
    assert!(!r.contains("promoted"), "{r}");
}

#[test]
fn recommitting_an_earlier_round_says_already_committed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (c, ids) = committed(tmp.path());
    let out = run(&c.ledger, &["commit", "--no-code-repo", p(&c.round("r01"))]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("already committed"), "{err}");
    assert!(err.contains(&ids[0]), "names r01's commit: {err}");
    assert!(!err.contains("`gate`"), "not a gate mismatch: {err}");
    // Nothing moved.
    let log = ok_json(&c.ledger, &["log", "main", "-n", "1"]);
    assert_eq!(log[0]["id"], ids[2].as_str());
}

#[test]
fn a_directory_that_is_almost_a_round_gets_a_hint() {
    let tmp = tempfile::tempdir().expect("tmp");
    let c = build_campaign(tmp.path());
    let near = tmp.path().join("near");
    loop_support::copy_dir(&c.round("r01"), &near);
    std::fs::remove_dir_all(near.join("data")).expect("rm data");
    let out = run(&c.ledger, &["commit", p(&near)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let _filters = crate::common::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!(stderr(&out), @r"
        error: [tmp] looks like a round directory but is missing data/manifest.json
        hint: a round needs data/manifest.json (from `bat round build`), candidate-eval/ and gate.json; to record the folder as it is, pass --plain -m MSG
        ");
    // With a message it is recorded as a plain directory, with a warning.
    let out = run(&c.ledger, &["commit", p(&near), "-m", "near"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: ") && stderr(&out).contains("data/manifest.json"),
        "{}",
        stderr(&out)
    );
    // A folder with nothing of a round keeps the plain message.
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(&plain).expect("mkdir");
    std::fs::write(plain.join("a.txt"), b"a").expect("write");
    let out = run(&c.ledger, &["commit", p(&plain)]);
    assert!(stderr(&out).contains("a commit message is required"));
}

// ------------------------------------------------------------ replay --strict

/// A two-round toy campaign (external backends: tolerance verify) whose
/// trainer runs through a wrapper script the test can change.
fn toy_campaign(root: &Path) -> (PathBuf, PathBuf) {
    let ledger = root.join("ledger");
    std::fs::create_dir_all(&ledger).expect("mkdir");
    assert!(run(&ledger, &["init"]).status.success());
    let init_model = root.join("initial");
    assert!(StdCommand::new(example("toy_trainer"))
        .arg("--init")
        .arg(&init_model)
        .status()
        .expect("toy init")
        .success());
    let script = root.join("train.sh");
    let toy = example("toy_trainer");
    std::fs::write(&script, format!("exec \"{}\" \"$@\"\n", toy.display())).expect("script");
    let trainer = root.join("trainer.json");
    let t = serde_json::json!([
        "sh",
        script,
        "{checkpoint}",
        "{dataset}",
        "{output}",
        "{health}",
        "{runtime_tool_format}",
        "{round_id}",
        "{target_stage}"
    ]);
    std::fs::write(&trainer, t.to_string()).expect("write");
    let evaluator = root.join("evaluator.json");
    let e = serde_json::json!([
        example("toy_evaluator"),
        "{checkpoint}",
        "{request}",
        "{output}"
    ]);
    std::fs::write(&evaluator, e.to_string()).expect("write");
    let src = loop_support::source(root, &Pack::default_pack());
    let out = run(
        &ledger,
        &[
            "run",
            "--source",
            p(&src),
            "--initial-checkpoint",
            p(&init_model),
            "--trainer",
            p(&trainer),
            "--evaluator",
            p(&evaluator),
            "--protocol-id",
            "toy-protocol",
            "--runtime-tool-format",
            "hermes",
            "--rounds",
            "2",
            "--batches",
            "2",
        ],
    );
    assert!(out.status.success(), "bat run: {}", stderr(&out));
    (ledger, script)
}

#[test]
fn strict_verify_fails_on_a_difference_plain_verify_tolerates() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ledger, script) = toy_campaign(tmp.path());
    // Unchanged training code: both modes reproduce.
    let v = ok_json(&ledger, &["replay", "r01", "--verify", "--strict"]);
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["rounds"][0]["verify"]["strict"], true);

    // The trainer now also writes a notes file into its model folder: the
    // candidate (and its evaluation record) differ, the scores do not.
    let toy = example("toy_trainer");
    std::fs::write(
        &script,
        format!(
            "\"{}\" \"$@\" || exit $?\necho extra > \"$3/notes.txt\"\n",
            toy.display()
        ),
    )
    .expect("script");
    let plain = run(&ledger, &["--json", "replay", "r01", "--verify"]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let pv: Value = serde_json::from_slice(&plain.stdout).expect("json");
    let rv = &pv["rounds"][0]["verify"];
    assert_eq!(rv["mode"], "tolerance");
    assert_eq!(rv["passed"], true);
    let differing: Vec<&str> = rv["differing"]
        .as_array()
        .expect("differing")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(differing.contains(&"candidate/notes.txt"), "{differing:?}");

    let strict = run(&ledger, &["replay", "r01", "--verify", "--strict"]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    let err = stderr(&strict);
    assert!(err.contains("round r01 did not reproduce"), "{err}");
    let text = String::from_utf8_lossy(&strict.stdout);
    assert!(text.contains("DIFFERS (strict)"), "{text}");

    // --strict only means something with --verify.
    let out = run(&ledger, &["replay", "r01", "--strict"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
