//! `bat commit` gcs on its own when more small packs than `gc.auto` wait to
//! be merged: the pack count drops and fsck stays clean; `gc.auto 0` (or
//! `false`) turns it off; a process holding the ledger makes it skip (with
//! a line saying so); SIGKILL at several instants of an automatic gc leaves
//! an fsck-clean ledger with every commit readable.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use bat_ledger::{CommitRequest, Ledger, NoProgress};

use crate::common::{bat, stdout_json, succeeded, text};

/// `bat -C dir ARGS`.
fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    bat()
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("spawn bat")
}

fn packs(dir: &Path) -> u64 {
    let v = stdout_json(run(dir, &["--json", "stats"]));
    v["packs"]
        .as_u64()
        .or_else(|| v["stats"]["packs"].as_u64())
        .unwrap_or_else(|| panic!("no pack count in {v}"))
}

fn fsck_clean(dir: &Path) {
    let v = stdout_json(run(dir, &["--json", "fsck"]));
    assert_eq!(v["ok"], true, "fsck: {v}");
}

/// A ledger at `dir` (work dir `dir/data`) and `bat commit` of version
/// `i` of its one file; the commit's stderr.
fn commit(dir: &Path, i: u32) -> String {
    std::fs::write(dir.join("data/a.txt"), format!("version {i}\n")).expect("write");
    let data = dir.join("data");
    let out = succeeded(run(
        dir,
        &[
            "commit",
            "--plain",
            "-m",
            &format!("v{i}"),
            crate::common::utf8(&data),
        ],
    ));
    text(&out.stderr)
}

fn ledger(dir: &Path) {
    std::fs::create_dir_all(dir.join("data")).expect("mkdir");
    succeeded(bat().arg("init").arg(dir).output().expect("spawn bat init"));
}

#[test]
fn commit_gcs_past_the_threshold_and_not_before() {
    let t = tempfile::tempdir().expect("tempdir");
    let w = t.path();
    ledger(w);
    succeeded(run(w, &["config", "gc.auto", "4"]));
    for i in 0..4 {
        let err = commit(w, i);
        assert!(!err.contains("auto gc"), "commit {i} of 4: {err}");
    }
    assert_eq!(packs(w), 4, "one pack per commit until the threshold");
    // The fifth small pack passes gc.auto 4.
    let err = commit(w, 4);
    assert!(err.contains("auto gc: 5 small packs"), "{err}");
    assert_eq!(packs(w), 1, "the small packs were merged: {err}");
    fsck_clean(w);
    let log = stdout_json(run(w, &["--json", "log"]));
    assert_eq!(log.as_array().map(Vec::len), Some(5), "{log}");
}

#[test]
fn gc_auto_zero_or_false_turns_it_off() {
    for off in ["0", "false"] {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        ledger(w);
        succeeded(run(w, &["config", "gc.auto", off]));
        let shown = stdout_json(run(w, &["--json", "config", "gc.auto"]));
        assert_eq!(shown["value"], "0", "{shown}");
        for i in 0..6 {
            let err = commit(w, i);
            assert!(!err.contains("auto gc"), "gc.auto {off}, commit {i}: {err}");
        }
        assert_eq!(packs(w), 6, "gc.auto {off}: nothing merged");
    }
}

#[test]
fn gc_auto_rejects_what_is_not_a_count() {
    let t = tempfile::tempdir().expect("tempdir");
    ledger(t.path());
    let out = run(t.path(), &["config", "gc.auto", "often"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("gc.auto must be a pack count"));
}

#[test]
fn auto_gc_is_skipped_while_another_process_holds_the_ledger() {
    let t = tempfile::tempdir().expect("tempdir");
    let w = t.path();
    ledger(w);
    succeeded(run(w, &["config", "gc.auto", "2"]));
    for i in 0..2 {
        commit(w, i);
    }
    // A reader or writer in another process holds the shared lock.
    let holder = Ledger::open(&w.join(".bat")).expect("open the ledger");
    let err = commit(w, 2);
    assert!(
        err.contains("auto gc skipped: another bat process is using the ledger"),
        "{err}"
    );
    assert_eq!(packs(w), 3, "nothing merged under the lock");
    drop(holder);
    // Free again: the next commit merges.
    let err = commit(w, 3);
    assert!(err.contains("auto gc: 4 small packs"), "{err}");
    assert_eq!(packs(w), 1);
    fsck_clean(w);
}

/// `n` commits of one small tree, one pack each (as `bat commit` makes
/// them), through the library: a layout whose gc takes long enough to be
/// interrupted.
fn many_packs(dir: &Path, n: u64) {
    ledger(dir);
    let mut l = Ledger::open(&dir.join(".bat")).expect("open");
    std::fs::write(dir.join("data/a.txt"), b"first\n").expect("write");
    let tree = l
        .commit_dir(
            &dir.join("data"),
            &CommitRequest::new("seed"),
            &NoProgress,
            &AtomicBool::new(false),
        )
        .expect("seed commit")
        .tree;
    for k in 0..n {
        let mut r = CommitRequest::new(format!("commit {k}"));
        r.author = "tester".into();
        r.time = Some(1_700_000_000 + k as i64);
        l.commit_chain(tree, std::iter::once(r)).expect("commit");
    }
}

/// Start `bat commit` in `dir` (which triggers an automatic gc); return
/// once it printed that the gc starts, with the instant it did.
fn commit_until_auto_gc(dir: &Path) -> (std::process::Child, Instant) {
    std::fs::write(dir.join("data/a.txt"), b"next\n").expect("write");
    let mut child = Command::new(crate::common::bat_exe())
        .env("BAT_AUTHOR", "tester")
        .arg("-C")
        .arg(dir)
        .args(["commit", "--plain", "-m", "next"])
        .arg(dir.join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bat commit");
    let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("auto gc:") => break,
            Some(_) => {}
            None => panic!("bat commit ended without starting an automatic gc"),
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, Instant::now())
}

#[test]
fn sigkill_during_auto_gc_leaves_an_fsck_clean_ledger() {
    const N: u64 = 400;
    // How long an uninterrupted automatic gc of this layout takes.
    let probe = tempfile::tempdir().expect("tempdir");
    many_packs(probe.path(), N);
    succeeded(run(probe.path(), &["config", "gc.auto", "100"]));
    let (mut child, start) = commit_until_auto_gc(probe.path());
    assert!(child.wait().expect("wait").success());
    let full = start.elapsed().max(Duration::from_millis(20));
    assert_eq!(packs(probe.path()), 1);
    let mut killed = 0;
    for k in 0..5u32 {
        let t = tempfile::tempdir().expect("tempdir");
        let w = t.path();
        many_packs(w, N);
        succeeded(run(w, &["config", "gc.auto", "100"]));
        let (mut child, _) = commit_until_auto_gc(w);
        std::thread::sleep(full * k / 5);
        let _ = child.kill();
        if !child.wait().expect("wait").success() {
            killed += 1;
        }
        fsck_clean(w);
        // The seed, the N library commits and the one bat commit made.
        let log = stdout_json(run(w, &["--json", "log"]));
        assert_eq!(
            log.as_array().map(Vec::len),
            Some(N as usize + 2),
            "kill {k}"
        );
        succeeded(run(w, &["cat", "HEAD:a.txt"]));
        // A later gc finishes the job.
        succeeded(run(w, &["gc"]));
        assert_eq!(packs(w), 1, "kill {k}");
        fsck_clean(w);
    }
    assert!(killed > 0, "no kill landed during the automatic gc");
}

#[test]
fn a_run_gcs_at_its_end() {
    let t = tempfile::tempdir().expect("tempdir");
    let w = t.path().join("ledger");
    std::fs::create_dir_all(&w).expect("mkdir");
    succeeded(bat().arg("init").arg(&w).output().expect("spawn bat init"));
    succeeded(run(&w, &["config", "gc.auto", "1"]));
    let work = t.path().join("work");
    let out = succeeded(run(
        &w,
        &[
            "run",
            "--backend",
            "sim",
            "--rounds",
            "2",
            "--batches",
            "10",
            "--work-dir",
            crate::common::utf8(&work),
        ],
    ));
    let err = text(&out.stderr);
    assert!(err.contains("bat run: auto gc:"), "{err}");
    assert_eq!(packs(&w), 1, "{err}");
    fsck_clean(&w);
}
