//! Integrity at every door, through the real binary: `eval attach` checks
//! the summary's checkpoint identity against the round (override with a
//! recorded reason), `replay --verify` is bit-exact for external backends
//! too (a nondeterministic trainer fails it; `--tolerance X` accepts score
//! deltas up to X and says NOT bit-identical), a bundle of `main` keeps `refs/promoted/main`
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

// ------------------------------------------------- replay --verify, bit-exact

/// A two-round toy campaign (external backends) whose trainer runs through
/// a wrapper script the test can change. Returns (ledger, script).
pub(crate) fn toy_campaign(root: &Path) -> (PathBuf, PathBuf) {
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
fn verify_is_bit_exact_for_external_backends_and_tolerance_is_explicit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ledger, script) = toy_campaign(tmp.path());
    // Unchanged, deterministic training code: bit for bit.
    let v = ok_json(&ledger, &["replay", "r01", "--verify"]);
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["bit_identical"], true);
    assert_eq!(v["note"], Value::Null);
    let rv = &v["rounds"][0]["verify"];
    assert_eq!(
        rv["mode"], "exact",
        "external backends are compared bit for bit too"
    );
    assert_eq!(rv["bit_identical"], true);
    // --strict is still accepted (the default now).
    let v = ok_json(&ledger, &["replay", "r01", "--verify", "--strict"]);
    assert_eq!(v["reproduced"], true);

    // A nondeterministic trainer: it also writes random bytes into its
    // model folder. The scores do not move, the candidate does.
    let toy = example("toy_trainer");
    std::fs::write(
        &script,
        format!(
            "\"{}\" \"$@\" || exit $?\nhead -c 32 /dev/urandom > \"$3/noise.bin\"\n",
            toy.display()
        ),
    )
    .expect("script");
    let out = run(&ledger, &["replay", "r01", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "round r01 did not reproduce bit for bit: first differing artifact candidate/noise.bin"
        ),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("DIFFERS: first differing artifact candidate/noise.bin"),
        "{text}"
    );

    // Accepting it is explicit, and the output says what was accepted on
    // every line it applies to.
    let out = run(
        &ledger,
        &["replay", "r01", "--verify", "--tolerance", "0.02"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("verify   NOT bit-identical; within tolerance 0.02"),
        "{text}"
    );
    assert!(
        text.contains("reproduced: 1 round(s); NOT bit-identical; within tolerance 0.02"),
        "{text}"
    );
    let v = ok_json(
        &ledger,
        &["replay", "r01", "--verify", "--tolerance", "0.02"],
    );
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["bit_identical"], false);
    assert_eq!(v["note"], "NOT bit-identical; within tolerance 0.02");
    let rv = &v["rounds"][0]["verify"];
    assert_eq!(rv["mode"], "tolerance");
    assert_eq!(rv["passed"], true);
    assert_eq!(rv["note"], "NOT bit-identical; within tolerance 0.02");
    let differing: Vec<&str> = rv["differing"]
        .as_array()
        .expect("differing")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        differing.first(),
        Some(&"candidate/noise.bin"),
        "{differing:?}"
    );

    // Training code whose scores move (it trains S2 whatever the target):
    // a tolerance below the score change does not accept it.
    std::fs::write(
        &script,
        format!(
            "exec \"{}\" \"$1\" \"$2\" \"$3\" \"$4\" \"$5\" \"$6\" S2\n",
            toy.display()
        ),
    )
    .expect("script");
    let v = ok_json(&ledger, &["replay", "r01", "--verify", "--tolerance", "1"]);
    let delta = v["rounds"][0]["verify"]["max_score_delta"]
        .as_f64()
        .expect("delta");
    assert!(delta > 0.0, "training S2 instead moves the scores: {v}");
    let out = run(
        &ledger,
        &[
            "replay",
            "r01",
            "--verify",
            "--tolerance",
            &format!("{}", delta / 2.0),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("did not reproduce within tolerance"), "{err}");

    // --strict and --tolerance contradict; both only mean something with
    // --verify.
    for args in [
        &[
            "replay",
            "r01",
            "--verify",
            "--strict",
            "--tolerance",
            "0.1",
        ][..],
        &["replay", "r01", "--strict"][..],
        &["replay", "r01", "--tolerance", "0.1"][..],
    ] {
        let out = run(&ledger, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}
