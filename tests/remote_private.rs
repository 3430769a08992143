//! Private raw evaluations never leave the ledger unless asked: after a
//! push to a directory remote and in a bundle, no object holds the raw
//! evaluation or its raw-only content; with --include-private the raw
//! evaluation is copied (verified) to a directory remote.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::Ledger;
use round_common::*;

use crate::common::round as round_common;

/// Every byte of every object reachable from any ref, decoded: commit
/// messages and metadata, and every file.
fn all_content(ledger: &Path) -> Vec<(String, Vec<u8>)> {
    let l = Ledger::discover(ledger).unwrap();
    let mut out = Vec::new();
    for (name, c) in l.all_refs().unwrap() {
        for (id, commit) in l.log(c, None).unwrap() {
            out.push((
                format!("{name} commit {id}"),
                format!("{} {} {:?}", commit.message, commit.metadata, commit.fields).into_bytes(),
            ));
            for f in l.walk_files(&commit.tree).unwrap() {
                let mut b = Vec::new();
                l.read_bytes_to(&f.id, &mut b, &AtomicBool::new(false))
                    .unwrap();
                out.push((format!("{id}:{}", f.path), b));
            }
        }
    }
    out
}

fn commit_r01(c: &Campaign) {
    let out = bat(&c.ledger)
        .args(["--json", "commit", "--no-code-repo", "--keep-raw-eval"])
        .arg(c.round("r01"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn private_raw_evaluations_are_never_pushed_or_bundled() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    commit_r01(&c);
    let raw = std::fs::read(c.round("r01").join("candidate-eval/raw-evaluation.json")).unwrap();
    assert!(String::from_utf8_lossy(&raw).contains(RAW_ONLY));
    let b3 = blake3::hash(&raw).to_hex().to_string();
    assert!(c.ledger.join(".bat/private/raw-eval").join(&b3).is_file());

    let remote = tmp.path().join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    bat(&remote).arg("init").assert().success();
    bat(&c.ledger)
        .args(["remote", "add", "pub"])
        .arg(&remote)
        .assert()
        .success();
    bat(&c.ledger).args(["push", "pub"]).assert().success();
    let sent = all_content(&remote);
    assert!(!sent.is_empty());
    for (what, bytes) in &sent {
        assert!(
            !String::from_utf8_lossy(bytes).contains(RAW_ONLY),
            "{what} holds raw-only content"
        );
        assert_ne!(bytes, &raw, "{what} is the raw evaluation");
    }
    assert!(
        !remote.join(".bat/private").exists(),
        "the private area was copied"
    );
    // Not even compressed: no pack or catalog byte sequence holds it.
    for e in walk(&remote.join(".bat")) {
        let b = std::fs::read(&e).unwrap();
        assert!(
            !b.windows(RAW_ONLY.len()).any(|w| w == RAW_ONLY.as_bytes()),
            "{}",
            e.display()
        );
    }

    // A bundle: neither its bytes nor anything cloned from it.
    let bundle = tmp.path().join("paper.bundle");
    bat(&c.ledger)
        .args(["bundle", "create"])
        .arg(&bundle)
        .assert()
        .success();
    let b = std::fs::read(&bundle).unwrap();
    assert!(!b.windows(RAW_ONLY.len()).any(|w| w == RAW_ONLY.as_bytes()));
    assert!(!b
        .windows(raw.len().min(64))
        .any(|w| w == &raw[..raw.len().min(64)]));
    bat(tmp.path())
        .arg("clone")
        .arg(&bundle)
        .arg("fromb")
        .assert()
        .success();
    for (what, bytes) in all_content(&tmp.path().join("fromb")) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(RAW_ONLY),
            "{what}"
        );
    }

    // With --include-private, a directory remote receives the raw
    // evaluation, verified against its name.
    bat(&c.ledger)
        .args(["push", "pub", "--include-private"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read(remote.join(".bat/private/raw-eval").join(&b3)).unwrap(),
        raw
    );
    // A bundle or endpoint cannot hold private data: refused.
    bat(&c.ledger)
        .args(["remote", "add", "paper"])
        .arg(&bundle)
        .assert()
        .success();
    let out = bat(&c.ledger)
        .args(["push", "paper", "--include-private"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("directory remotes"));
}

fn walk(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
