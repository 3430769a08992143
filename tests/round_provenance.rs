//! Provenance of round commits: the training code's git state, read with
//! libgit2, for clean and dirty repositories.

use std::path::Path;

use round_common::*;

use crate::common::round as round_common;

fn git_repo(dir: &Path) -> git2::Oid {
    let repo = git2::Repository::init(dir).unwrap();
    std::fs::write(dir.join("train.py"), b"print('train')\n").unwrap();
    let mut idx = repo.index().unwrap();
    idx.add_path(Path::new("train.py")).unwrap();
    idx.write().unwrap();
    let tree = repo.find_tree(idx.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.org").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap()
}

#[test]
fn code_provenance_clean_and_dirty() {
    let tmp = tempfile::tempdir().unwrap();
    let code = tmp.path().join("code");
    std::fs::create_dir_all(&code).unwrap();
    let head = git_repo(&code);

    let clean = bat::round::code_provenance(&code).unwrap();
    assert_eq!(
        clean.head_commit.as_deref(),
        Some(head.to_string().as_str())
    );
    assert!(clean.branch.is_some());
    assert!(!clean.dirty);
    assert_eq!(clean.diff_bytes, 0);
    // A subdirectory finds the same repository.
    std::fs::create_dir_all(code.join("sub")).unwrap();
    std::fs::write(code.join("sub/.keep"), b"").unwrap();
    let untracked = bat::round::code_provenance(&code.join("sub")).unwrap();
    assert!(untracked.dirty);
    assert_eq!(untracked.untracked_files, 1);
    assert_eq!(untracked.diff_bytes, 0);
    std::fs::remove_dir_all(code.join("sub")).unwrap();

    std::fs::write(code.join("train.py"), b"print('train harder')\n").unwrap();
    let dirty = bat::round::code_provenance(&code).unwrap();
    assert!(dirty.dirty);
    assert_eq!(dirty.untracked_files, 0);
    assert!(dirty.diff_bytes > 0);
    assert_ne!(dirty.diff_sha256, clean.diff_sha256);
    std::fs::write(code.join("train.py"), b"print('train faster')\n").unwrap();
    let other = bat::round::code_provenance(&code).unwrap();
    assert_ne!(other.diff_sha256, dirty.diff_sha256);

    // Not a repository: a clear error.
    let none = tmp.path().join("none");
    std::fs::create_dir_all(&none).unwrap();
    assert!(
        matches!(
            bat::round::code_provenance(&none),
            Err(bat::round::RoundError::Provenance { .. })
        ) || git2::Repository::discover(&none).is_ok()
    );
}

#[test]
fn round_commit_records_code_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    let code = tmp.path().join("code");
    std::fs::create_dir_all(&code).unwrap();
    let head = git_repo(&code);
    std::fs::write(code.join("train.py"), b"print('edited')\n").unwrap();
    let out = bat(&c.ledger)
        .args(["--json", "commit", "--code-repo"])
        .arg(&code)
        .arg(c.round("r01"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bat(&c.ledger)
        .args(["cat", "r01:provenance.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prov: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(prov["code"]["head_commit"], head.to_string());
    assert_eq!(prov["code"]["dirty"], true);
    assert_eq!(prov["bat_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(prov["measured_compute"]["generated_tokens"], 12345);
    assert!(prov["timestamps"]["recorded_unix"].as_i64().unwrap() > 0);

    // A path that is not a repository refuses the commit.
    let none = tmp.path().join("none");
    std::fs::create_dir_all(&none).unwrap();
    if git2::Repository::discover(&none).is_err() {
        let out = bat(&c.ledger)
            .args(["commit", "--code-repo"])
            .arg(&none)
            .arg(c.round("r02"))
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("training-code repository"));
    }
}

#[test]
fn invalid_measured_compute_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = build_campaign(tmp.path());
    std::fs::write(
        c.round("r01").join("training-health.json"),
        br#"{"status":"passed","compute":{"steps":-3}}"#,
    )
    .unwrap();
    let out = bat(&c.ledger)
        .args(["commit", "--no-code-repo"])
        .arg(c.round("r01"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`training_health`") && err.contains("steps"),
        "{err}"
    );
}
