//! Bad input: a clear error, a non-zero exit, and an unchanged ledger.

use common::*;

use crate::common::ledger as common;

/// Run a failing command and check that it explains itself and changed
/// nothing under .bat.
fn rejects(w: &std::path::Path, args: &[&str], expect_in_error: &str) {
    let before = ledger_state(w);
    let out = fails(bat(w).args(args));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: "),
        "{args:?}: stderr should start with 'error: ', got {err}"
    );
    assert!(
        err.contains(expect_in_error),
        "{args:?}: expected {expect_in_error:?} in {err}"
    );
    assert_eq!(ledger_state(w), before, "{args:?} changed the ledger");
}

fn base() -> tempfile::TempDir {
    let t = new_ledger();
    let d = t.path().join("data");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("a.txt"), b"a").unwrap();
    std::fs::write(d.join("sub/b.txt"), b"b").unwrap();
    bat(t.path())
        .args(["commit", "data", "-m", "base"])
        .assert()
        .success();
    t
}

#[test]
fn missing_and_wrong_paths() {
    let t = base();
    let w = t.path();
    rejects(
        w,
        &["commit", "does-not-exist", "-m", "x"],
        "does not exist",
    );
    rejects(w, &["commit", "data/a.txt", "-m", "x"], "not a directory");
    rejects(w, &["cat", "HEAD:nope.txt"], "not found");
    rejects(w, &["cat", "HEAD:sub"], "directory");
    rejects(w, &["ls", "HEAD:nope"], "not found");
    rejects(w, &["show", "nosuchbranch"], "unknown revision");
    rejects(w, &["log", "HEAD~5"], "has no parent");
    rejects(w, &["switch", "nosuch"], "does not exist");
    rejects(w, &["branch", "bad..name"], "invalid ref name");
    rejects(
        w,
        &["commit", "data", "-m", "x", "--meta", "missing.json"],
        "cannot read",
    );
    std::fs::write(w.join("bad.json"), b"{not json").unwrap();
    rejects(
        w,
        &["commit", "data", "-m", "x", "--meta", "bad.json"],
        "not valid JSON",
    );
    std::fs::create_dir(w.join("nonempty")).unwrap();
    std::fs::write(w.join("nonempty/x"), b"x").unwrap();
    rejects(
        w,
        &["checkout", "HEAD", "--to", "nonempty"],
        "not an empty directory",
    );
    rejects(w, &["tag", "v1", "HEAD~3"], "has no parent");
    bat(w).args(["tag", "v1"]).assert().success();
    rejects(w, &["tag", "v1"], "already exists");
    // outside any ledger
    let elsewhere = tempfile::tempdir().unwrap();
    let out = fails(bat(elsewhere.path()).args(["log"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside a bat ledger"));
    assert!(!elsewhere.path().join(".bat").exists());
    rejects(w, &["init"], "already exists");
}

#[test]
fn unreadable_special_files_are_refused() {
    // Tests run as root, so permission bits cannot make a file unreadable;
    // a FIFO is a file that cannot be recorded (reading it would block).
    let t = base();
    let w = t.path();
    let fifo = w.join("data/sub/pipe");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo exists");
    assert!(st.success());
    rejects(w, &["commit", "data", "-m", "x"], "FIFO");
    std::fs::remove_file(&fifo).unwrap();
    // a non-UTF-8 file name cannot be represented in the tree
    use std::os::unix::ffi::OsStrExt;
    let bad = w
        .join("data")
        .join(std::ffi::OsStr::from_bytes(b"bad\xffname"));
    std::fs::write(&bad, b"x").unwrap();
    rejects(w, &["commit", "data", "-m", "x"], "not valid UTF-8");
    std::fs::remove_file(&bad).unwrap();
    bat(w)
        .args(["commit", "data", "-m", "fine again"])
        .assert()
        .success();
}

#[test]
fn escaping_symlinks_are_refused() {
    let t = base();
    let w = t.path();
    let link = w.join("data/sub/escape");
    std::os::unix::fs::symlink("../../outside", &link).unwrap();
    rejects(w, &["commit", "data", "-m", "x"], "points outside");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &link).unwrap();
    rejects(w, &["commit", "data", "-m", "x"], "points outside");
    std::fs::remove_file(&link).unwrap();
    // staying inside is fine, even through ..
    std::os::unix::fs::symlink("../a.txt", &link).unwrap();
    bat(w)
        .args(["commit", "data", "-m", "inside"])
        .assert()
        .success();
}

#[test]
fn unknown_format_version_is_refused_without_changes() {
    let t = base();
    let w = t.path();
    std::fs::write(w.join(".bat/VERSION"), b"bat-ledger format 99\n").unwrap();
    for args in [
        &["log"][..],
        &["commit", "data", "-m", "x"],
        &["fsck"],
        &["gc"],
        &["stats"],
    ] {
        rejects(w, args, "format version");
    }
}

#[test]
fn ambiguous_prefix_lists_candidates() {
    let t = base();
    let w = t.path();
    // make commits until two ids share a 4-hex prefix (birthday bound: a few
    // hundred), using the library for speed
    let mut seen = std::collections::HashMap::new();
    let mut l = bat_ledger::Ledger::discover(w).unwrap();
    let tree = l.read_commit(&l.resolve("HEAD").unwrap()).unwrap().tree;
    let pair = loop {
        let mut req = bat_ledger::CommitRequest::new(format!("c{}", seen.len()));
        req.time = Some(1_700_000_000);
        let id = l.commit_tree(tree, &req).unwrap().commit.to_string();
        let p = id[..4].to_string();
        if let Some(other) = seen.insert(p.clone(), id.clone()) {
            break (p, other, id);
        }
        assert!(seen.len() < 5000, "no collision found");
    };
    drop(l);
    let (prefix, a, b) = pair;
    let before = ledger_state(w);
    let out = fails(bat(w).args(["show", &prefix]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ambiguous") && err.contains(&a) && err.contains(&b),
        "{err}"
    );
    assert_eq!(ledger_state(w), before);
    // a longer prefix resolves
    let show = json(bat(w).args(["show", &a[..12]]));
    assert_eq!(show["id"], a.as_str());
    // too short a prefix is not a prefix
    rejects(w, &["show", &a[..3]], "unknown revision");
}

/// A ledger holding a crafted commit whose root tree has one entry
/// `name` (a symlink to `target`, or a subtree holding one file).
fn crafted_checkout(w: &std::path::Path, name: &str, symlink_to: Option<&[u8]>) -> String {
    use bat_ledger::{CommitRequest, Mode, Tree, TreeEntry};
    let mut l = bat_ledger::Ledger::discover(w).unwrap();
    let (entry, trees) = match symlink_to {
        Some(target) => {
            let ids = l.write_objects(&[target], &[]).unwrap();
            (
                TreeEntry {
                    name: name.into(),
                    mode: Mode::Symlink,
                    id: ids[0],
                    size: target.len() as u64,
                },
                vec![],
            )
        }
        None => {
            let ids = l.write_objects(&[b"planted"], &[]).unwrap();
            let sub = Tree {
                entries: vec![TreeEntry {
                    name: "VERSION".into(),
                    mode: Mode::File,
                    id: ids[0],
                    size: 7,
                }],
            };
            let sid = l.write_objects(&[], &[sub]).unwrap()[0];
            (
                TreeEntry {
                    name: name.into(),
                    mode: Mode::Tree,
                    id: sid,
                    size: 0,
                },
                vec![],
            )
        }
    };
    let mut all = trees;
    all.push(Tree {
        entries: vec![entry],
    });
    let root = *l.write_objects(&[], &all).unwrap().last().unwrap();
    let mut req = CommitRequest::new("crafted");
    req.branch = Some(format!("crafted-{}", w.read_dir().unwrap().count()));
    let out = l.commit_tree(bat_ledger::TreeId(root), &req).unwrap();
    out.commit.to_string()
}

#[test]
fn checkout_refuses_what_commit_refuses() {
    let t = base();
    let w = t.path();
    let cases: Vec<(&str, Option<&[u8]>, &str)> = vec![
        ("passwd", Some(b"/etc/passwd"), "outside"),
        ("up", Some(b"../../.."), "outside"),
        ("deep", Some(b"a/../../x"), "outside"),
        (".bat", None, "ledger directory"),
    ];
    for (i, (name, target, expect)) in cases.into_iter().enumerate() {
        let c = crafted_checkout(w, name, target);
        let to = w.join(format!("out{i}"));
        let out = fails(bat(w).args(["checkout", &c, "--to"]).arg(&to));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{name}: {err}");
        assert!(!to.exists(), "{name}: nothing is written");
        let litter: Vec<_> = std::fs::read_dir(w)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".bat-checkout-")
            })
            .collect();
        assert!(litter.is_empty(), "{name}: temporary directory left behind");
    }
    // A link that stays inside is still checked out.
    let c = crafted_checkout(w, "ok", Some(b"sub/../x"));
    bat(w)
        .args(["checkout", &c, "--to", "fine"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_link(w.join("fine/ok")).unwrap(),
        std::path::PathBuf::from("sub/../x")
    );
}

#[test]
fn committing_the_ledger_itself_is_refused() {
    let t = base();
    let w = t.path();
    rejects(w, &["commit", ".bat", "-m", "x"], "ledger's own directory");
    rejects(
        w,
        &["commit", ".bat/packs", "-m", "x"],
        "ledger's own directory",
    );
}

#[test]
fn endless_json_input_fails_fast() {
    let t = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = fails(bat(t.path()).args([
        "eval",
        "summarize",
        "--raw",
        "/dev/zero",
        "--checkpoint-sha256",
        &"0".repeat(64),
        "--output",
        "s.json",
    ]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("larger than"), "{err}");
    println!("/dev/zero refused after {:?}", started.elapsed());
}

#[test]
fn clone_over_a_killed_init_resumes() {
    let t = base();
    let w = t.path();
    bat(w)
        .args(["commit", "data", "-m", "one"])
        .assert()
        .success();
    let dest = w.join("copy");
    // What a clone killed inside `init` leaves behind.
    std::fs::create_dir_all(dest.join(".bat-init-XYZ12/packs")).unwrap();
    std::fs::create_dir_all(dest.join(".bat-clone-ABC34/.bat")).unwrap();
    bat(w).args(["clone", ".", "copy"]).assert().success();
    let l = bat_ledger::Ledger::discover(&dest).unwrap();
    assert!(l.remote_config("origin").unwrap().is_some());
    let names: Vec<String> = std::fs::read_dir(&dest)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![".bat".to_string()], "litter removed");
}

#[test]
fn bind_refuses_a_malformed_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let m = t.path().join("model");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(m.join("config.json"), b"{}").unwrap();
    let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let mut st = (header.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(header);
    st.extend_from_slice(&[0u8; 5]); // truncated: 8 data bytes declared
    std::fs::write(m.join("model.safetensors"), &st).unwrap();
    let bind = |out: &str| {
        let mut c = bat(t.path());
        c.arg("bind").arg("--model-path").arg(&m).args([
            "--experiment-name",
            "e",
            "--gate-step",
            "0",
            "--arm",
            "candidate",
            "--output",
            out,
        ]);
        c
    };
    let out = fails(&mut bind("b.json"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a valid safetensors"), "{err}");
    assert!(!t.path().join("b.json").exists());
    st.extend_from_slice(&[0u8; 3]);
    std::fs::write(m.join("model.safetensors"), &st).unwrap();
    bind("b.json").assert().success();
}
