//! Ctrl-C: SIGINT to a running `bat commit`, `bat clone` and `bat checkout`
//! (real processes, signal sent with `kill -INT`). Each must stop at a safe
//! point, exit with the interrupted code (130), say what to rerun, and
//! leave nothing half-done: the ledger fsck-clean with no new commit, no
//! half-made clone, no partial checkout directory.
//!
//! The progress-delay test hooks (`BAT_TEST_PROGRESS_DELAY_MS`,
//! `BAT_TEST_TRANSFER_DELAY_MS`) slow each progress step so the signal
//! reliably lands while the operation runs, on any machine speed.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;

use crate::common::ledger as common;

const MIB: usize = 1 << 20;

/// `n` files of `size` bytes of xorshift output (incompressible, so the
/// commit really stores every byte).
fn random_dir(dir: &Path, n: usize, size: usize, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = Rng(seed | 1);
    let mut buf = vec![0u8; MIB];
    for i in 0..n {
        let mut f = std::fs::File::create(dir.join(format!("blob-{i}.bin"))).unwrap();
        for _ in 0..size / MIB {
            fill(&mut buf, &mut rng);
            f.write_all(&buf).unwrap();
        }
    }
}

/// Spawn `bat ARGS` in `cwd`, wait until `started` holds (or a moment
/// passed), send SIGINT, and return its output.
fn interrupt(
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    started: &dyn Fn() -> bool,
) -> Output {
    let mut cmd = Command::new(bat_path());
    cmd.current_dir(cwd)
        .env_remove("BAT_DIR")
        .env("BAT_AUTHOR", "tester")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    for _ in 0..500 {
        if started() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        child.try_wait().unwrap().is_none(),
        "bat {args:?} finished before the signal"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    child.wait_with_output().unwrap()
}

fn assert_interrupted(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{what}: expected exit 130; stderr: {stderr}"
    );
    assert!(
        stderr.contains("interrupted:"),
        "{what}: no interrupted message: {stderr}"
    );
    assert!(
        stderr.contains("to finish, run again: bat "),
        "{what}: no rerun hint: {stderr}"
    );
    stderr
}

fn fsck_clean(dir: &Path) {
    let v = json(bat(dir).arg("fsck"));
    assert_eq!(v["ok"], true, "fsck of {}: {v}", dir.display());
}

fn commit_count(dir: &Path) -> usize {
    let out = bat(dir).args(["log", "--json"]).output().unwrap();
    if !out.status.success() {
        return 0; // an empty ledger has no HEAD commit to list
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .map(Vec::len)
        .or_else(|| v["commits"].as_array().map(Vec::len))
        .unwrap_or(0)
}

#[test]
fn sigint_during_commit_records_nothing_and_exits_130() {
    let t = new_ledger();
    let w = t.path();
    random_dir(&w.join("data"), 4, 24 * MIB, 7);
    let before = commit_count(w);
    let out = interrupt(
        w,
        &["commit", "data", "-m", "big", "--plain"],
        &[("BAT_TEST_PROGRESS_DELAY_MS", "40")],
        &|| true,
    );
    let stderr = assert_interrupted(&out, "commit");
    assert!(
        stderr.contains("stopped before anything was recorded"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bat commit data -m big --plain"),
        "{stderr}"
    );
    fsck_clean(w);
    assert_eq!(
        commit_count(w),
        before,
        "an interrupted commit left a commit"
    );
    // The same command, run again without interruption, records the tree.
    bat(w)
        .args(["commit", "data", "-m", "big", "--plain"])
        .assert()
        .success();
    assert_eq!(commit_count(w), before + 1);
    fsck_clean(w);
}

#[test]
fn sigint_during_clone_leaves_no_half_made_clone() {
    let t = tempfile::tempdir().unwrap();
    let o = t.path().join("origin");
    std::fs::create_dir_all(&o).unwrap();
    bat(&o).arg("init").assert().success();
    random_dir(&o.join("data"), 2, 16 * MIB, 11);
    bat(&o)
        .args(["commit", "data", "-m", "payload", "--plain"])
        .assert()
        .success();
    let c = t.path().join("copy");
    let marker = c.join(".bat");
    let out = interrupt(
        t.path(),
        &["clone", "origin", "copy"],
        &[("BAT_TEST_TRANSFER_DELAY_MS", "100")],
        &|| marker.exists(),
    );
    let stderr = assert_interrupted(&out, "clone");
    assert!(stderr.contains("removed the unfinished clone"), "{stderr}");
    assert!(!c.exists(), "an interrupted clone left {}", c.display());
    fsck_clean(&o);
    // Rerunning the printed command clones completely.
    bat(t.path())
        .args(["clone", "origin", "copy"])
        .assert()
        .success();
    fsck_clean(&c);
    assert_eq!(commit_count(&c), commit_count(&o));
}

#[test]
fn sigint_during_checkout_writes_nothing() {
    let t = new_ledger();
    let w = t.path();
    // Checkout checks the flag between files: many of them.
    random_dir(&w.join("data"), 64, MIB, 13);
    bat(w)
        .args(["commit", "data", "-m", "payload", "--plain"])
        .assert()
        .success();
    let out = interrupt(
        w,
        &["checkout", "HEAD", "--to", "out"],
        &[("BAT_TEST_PROGRESS_DELAY_MS", "60")],
        &|| true,
    );
    let stderr = assert_interrupted(&out, "checkout");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(!w.join("out").exists(), "a partial checkout appeared");
    let litter: Vec<_> = std::fs::read_dir(w)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".bat-checkout-")
        })
        .collect();
    assert!(litter.is_empty(), "checkout staging left behind");
    fsck_clean(w);
}
