//! Remote-tracking refs and clone errors through the real binary:
//! `origin/NAME` resolves in log/show/diff (local names first; a name only
//! remotes have is refused, ambiguous ones name the choices), `bat branch
//! -r`/`-a` list remote-tracking branches, and a clone refused for its
//! token leaves no directory behind and does not suggest resuming.

use std::path::Path;

use serde_json::Value;
use serve_common::{Server, READ_TOKEN};

use crate::common::serve as serve_common;
use crate::common::utf8 as p;
use crate::common::{self, fails, json, ok, output as bat};

fn commit(ledger: &Path, work: &Path, file: &str, bytes: &[u8], msg: &str) -> String {
    std::fs::create_dir_all(work).expect("mkdir");
    std::fs::write(work.join(file), bytes).expect("write");
    let v = json(ledger, &["commit", p(work), "-m", msg]);
    v["commit"].as_str().expect("id").to_string()
}

/// An origin ledger with `main` (two commits) and `feature`; a clone of it
/// with one more local commit on `main`.
fn origin_and_clone(root: &Path) -> (std::path::PathBuf, std::path::PathBuf, String, String) {
    let origin = root.join("origin");
    std::fs::create_dir_all(&origin).expect("mkdir");
    ok(&origin, &["init"]);
    commit(&origin, &root.join("w1"), "a.txt", b"one", "one");
    let main_tip = commit(&origin, &root.join("w1"), "a.txt", b"two", "two");
    ok(&origin, &["branch", "feature"]);
    let clone = root.join("clone");
    ok(root, &["clone", p(&origin), p(&clone)]);
    let local = commit(&clone, &root.join("w2"), "b.txt", b"local", "local");
    (origin, clone, main_tip, local)
}

#[test]
fn origin_name_resolves_in_log_show_and_diff() {
    let t = tempfile::tempdir().expect("tmp");
    let (_origin, clone, main_tip, local) = origin_and_clone(t.path());

    let log = json(&clone, &["log", "origin/main", "-n", "1"]);
    assert_eq!(log[0]["id"], main_tip.as_str());
    let show = json(&clone, &["show", "origin/main"]);
    assert_eq!(show["id"], main_tip.as_str());
    let show = json(&clone, &["show", "origin/main~1"]);
    assert_eq!(show["parents"], serde_json::json!([]));
    let d = json(
        &clone,
        &["diff", "origin/main", "main", "--section", "files"],
    );
    assert_eq!(d["a"], main_tip.as_str());
    assert_eq!(d["b"], local.as_str());
    // The local commit records another folder: a.txt went, b.txt came.
    let st = |path: &str| {
        d["files"]["files"]
            .as_array()
            .expect("files")
            .iter()
            .find(|f| f["path"] == path)
            .map(|f| f["status"].clone())
    };
    assert_eq!(st("a.txt"), Some(Value::from("removed")));
    assert_eq!(st("b.txt"), Some(Value::from("added")));

    // A local branch of the same name takes precedence, as in git.
    ok(&clone, &["branch", "origin/main", "main"]);
    let show = json(&clone, &["show", "origin/main"]);
    assert_eq!(show["id"], local.as_str());
    // The full name still reaches the remote-tracking ref.
    let show = json(&clone, &["show", "refs/remotes/origin/main"]);
    assert_eq!(show["id"], main_tip.as_str());
}

#[test]
fn a_name_only_remotes_have_is_refused_with_the_choices() {
    let t = tempfile::tempdir().expect("tmp");
    let (origin, clone, _, _) = origin_and_clone(t.path());
    // `feature` exists only as origin/feature.
    let (_, err) = fails(&clone, &["log", "feature"]);
    assert!(err.contains("origin/feature"), "{err}");
    // A second remote with the same branch: ambiguous.
    ok(&clone, &["remote", "add", "backup", p(&origin)]);
    ok(&clone, &["fetch", "backup"]);
    let (_, err) = fails(&clone, &["log", "feature"]);
    let _filters = common::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!(err, @r#"error: bad revision "feature": ambiguous: no local branch or tag feature, and several remotes have it (backup/feature, origin/feature); name one"#);
    // Each qualified name resolves.
    ok(&clone, &["log", "backup/feature", "-n", "1"]);
    ok(&clone, &["log", "origin/feature", "-n", "1"]);
}

#[test]
fn branch_lists_remote_tracking_branches() {
    let t = tempfile::tempdir().expect("tmp");
    let (_origin, clone, main_tip, _) = origin_and_clone(t.path());

    let _filters = common::snapshot_settings().bind_to_scope();
    insta::assert_snapshot!(ok(&clone, &["branch"]), @"* main [commit or object id]");

    let r = ok(&clone, &["branch", "-r"]);
    // Names are padded to the longest one: compare the words of a line.
    let tip = main_tip.to_string();
    assert!(
        r.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["origin/main", tip.as_str()]),
        "{r}"
    );
    insta::assert_snapshot!(r, @r"
        origin/feature [commit or object id]
        origin/main    [commit or object id]
        ");
    insta::assert_snapshot!(ok(&clone, &["branch", "-a"]), @r"
        * main                   [commit or object id]
          remotes/origin/feature [commit or object id]
          remotes/origin/main    [commit or object id]
        ");

    let j = json(&clone, &["branch", "-a"]);
    let names: Vec<&str> = j["remote_branches"]
        .as_array()
        .expect("remote_branches")
        .iter()
        .filter_map(|x| x["name"].as_str())
        .collect();
    assert_eq!(names, ["origin/feature", "origin/main"]);
    assert_eq!(j["branches"][0]["name"], "main");
    // -r conflicts with creating a branch.
    assert_eq!(bat(&clone, &["branch", "-r", "x"]).status.code(), Some(2));
}

#[test]
fn clone_refused_for_its_token_leaves_nothing_and_does_not_offer_resume() {
    let t = tempfile::tempdir().expect("tmp");
    let origin = t.path().join("origin");
    std::fs::create_dir_all(&origin).expect("mkdir");
    ok(&origin, &["init"]);
    commit(&origin, &t.path().join("w"), "a.txt", b"one", "one");
    let srv = Server::with_tokens(&origin, t.path(), &[]);

    for token in [None, Some("wrong-token-0123456789")] {
        let dest = t.path().join("dest");
        let mut args = Vec::new();
        if let Some(tk) = token {
            args.extend(["--token", tk]);
        }
        args.extend(["clone", srv.url.as_str(), p(&dest)]);
        let out = bat(t.path(), &args);
        assert!(!out.status.success(), "{token:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unauthorized"), "{token:?}: {err}");
        assert!(!err.contains("resume"), "{token:?}: {err}");
        assert!(!dest.exists(), "{token:?}: the half-made clone stayed");
    }

    // A directory the user made stays (only what bat made goes).
    let mine = t.path().join("mine");
    std::fs::create_dir_all(&mine).expect("mkdir");
    let out = bat(
        t.path(),
        &[
            "--token",
            "wrong-token-0123456789",
            "clone",
            &srv.url,
            p(&mine),
        ],
    );
    assert!(!out.status.success());
    assert!(mine.is_dir(), "the user's directory was removed");
    assert!(
        std::fs::read_dir(&mine).expect("read").next().is_none(),
        "bat left files in the user's directory"
    );

    // The right token clones.
    let dest = t.path().join("good");
    ok(
        t.path(),
        &["--token", READ_TOKEN, "clone", &srv.url, p(&dest)],
    );
    assert!(dest.join(".bat").is_dir());
}
