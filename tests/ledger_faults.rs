//! Faults against the real binary: a full disk (a real 64 MiB tmpfs),
//! kill -9 at many instants across commit, gc, push and clone, and eight
//! writers with gc and fsck running alongside.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

use crate::common::ledger as common;

/// A tmpfs of a fixed size mounted on a temporary directory; unmounted on
/// drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mount one, or explain why not (and fail under CI=true, where the
    /// runner is root and mounting must work).
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true but a tmpfs cannot be mounted: {why}"
                );
                eprintln!("SKIPPED: full-disk tests need to mount a tmpfs (root): {why}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Run `bat ARGS` in `cwd`, killing it if it runs longer than `limit`
/// (a hang is the fault under test). Returns (success, stderr, elapsed).
fn run_bounded(cwd: &Path, args: &[&str], limit: Duration) -> (bool, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(bat_path())
        .current_dir(cwd)
        .env_remove("BAT_DIR")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bat");
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            return (
                st.success(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
                started.elapsed(),
            );
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`bat {}` hung for more than {limit:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Write into `dir` until the filesystem is full.
fn fill_disk(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).expect("filler");
    let big = vec![0x5au8; 1 << 20];
    while f.write_all(&big).is_ok() {}
    let small = [0x5au8; 512];
    while f.write_all(&small).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn full_disk_commits_fail_fast_and_read_only_verbs_still_work() {
    let Some(fs) = Tmpfs::mount("64m") else {
        return;
    };
    let outside = tempfile::tempdir().expect("tempdir");
    let w = fs.path().join("w");
    std::fs::create_dir(&w).expect("mkdir");
    bat(&w).arg("init").assert().success();
    let small = outside.path().join("small");
    std::fs::create_dir(&small).expect("mkdir");
    gen_file(&small.join("a.bin"), 1 << 20, 1);
    bat(&w)
        .args(["commit"])
        .arg(&small)
        .args(["-m", "fits"])
        .assert()
        .success();
    // ~160 MB that compress to ~100 MB: never fits in 64 MiB.
    let big = outside.path().join("big");
    std::fs::create_dir(&big).expect("mkdir");
    for i in 0..4 {
        // Odd, distinct seeds: gen_file sets the low bit.
        gen_file(&big.join(format!("part{i}.bin")), 40 << 20, 21 + 2 * i);
    }
    let mut times = Vec::new();
    for i in 0..10 {
        let (ok, err, took) = run_bounded(
            &w,
            &[
                "commit",
                big.to_str().expect("utf-8"),
                "-m",
                &format!("enospc {i}"),
            ],
            Duration::from_secs(120),
        );
        assert!(!ok, "commit {i} cannot fit but succeeded");
        assert!(
            err.contains("No space left") || err.contains("disk") || err.contains("full"),
            "commit {i}: {err}"
        );
        times.push(took);
        let (ok, err, _) = run_bounded(&w, &["fsck"], Duration::from_secs(60));
        assert!(ok, "fsck after full-disk commit {i}: {err}");
    }
    println!("full-disk commits failed after {times:?}");

    // An unreferenced segment (what a killed commit leaves), then a disk
    // filled to the last byte.
    gen_file(&w.join(".bat/packs/orphan.pack"), 4 << 20, 99);
    fill_disk(fs.path());
    for args in [
        vec!["log"],
        vec!["fsck"],
        vec![
            "checkout",
            "HEAD",
            "--to",
            outside.path().join("out").to_str().expect("utf-8"),
        ],
        vec!["gc"],
    ] {
        let (ok, err, _) = run_bounded(&w, &args, Duration::from_secs(60));
        assert!(ok, "`bat {}` on a full disk: {err}", args.join(" "));
    }
    assert_eq!(
        hash_file(&outside.path().join("out/a.bin")),
        hash_file(&small.join("a.bin"))
    );
    assert!(
        !w.join(".bat/packs/orphan.pack").exists(),
        "gc frees unreferenced segments first"
    );
    // gc made room: a small commit fits again.
    std::fs::write(small.join("b.txt"), b"after gc").expect("write");
    let (ok, err, _) = run_bounded(
        &w,
        &["commit", small.to_str().expect("utf-8"), "-m", "after gc"],
        Duration::from_secs(60),
    );
    assert!(ok, "commit after gc freed space: {err}");
    let (ok, err, _) = run_bounded(&w, &["fsck"], Duration::from_secs(60));
    assert!(ok, "{err}");
}

/// Spawn `bat ARGS` in `cwd` and SIGKILL it after `delay`.
fn kill_after(cwd: &Path, args: &[&str], delay: Duration) {
    let mut child = Command::new(bat_path())
        .current_dir(cwd)
        .env_remove("BAT_DIR")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn bat");
    std::thread::sleep(delay);
    let _ = child.kill();
    let _ = child.wait();
}

fn fsck_ok(cwd: &Path, what: &str) {
    let out = bat(cwd).arg("fsck").output().expect("fsck");
    assert!(
        out.status.success(),
        "fsck after {what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kill9_campaign_across_commit_gc_push_and_clone() {
    let t = tempfile::tempdir().expect("tempdir");
    let w = t.path().join("w");
    let dst = t.path().join("dst");
    for d in [&w, &dst] {
        std::fs::create_dir(d).expect("mkdir");
        bat(d).arg("init").assert().success();
    }
    let data = t.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    gen_file(&data.join("base.bin"), 6 << 20, 3);
    bat(&w)
        .arg("commit")
        .arg(&data)
        .args(["-m", "base"])
        .assert()
        .success();
    bat(&w)
        .args(["remote", "add", "dst"])
        .arg(&dst)
        .assert()
        .success();
    let mut rng = Rng(0xC0FFEE);
    let mut clones: Vec<PathBuf> = Vec::new();
    for i in 0..52u64 {
        let delay = Duration::from_micros(rng.next() % 250_000);
        match i % 4 {
            0 => {
                gen_file(&data.join(format!("f{i}.bin")), 3 << 20, 100 + i);
                let d = data.to_str().expect("utf-8").to_string();
                kill_after(&w, &["commit", &d, "-m", &format!("k{i}")], delay);
                fsck_ok(&w, &format!("killed commit {i}"));
            }
            1 => {
                kill_after(&w, &["gc"], delay);
                fsck_ok(&w, &format!("killed gc {i}"));
            }
            2 => {
                kill_after(&w, &["push", "dst"], delay);
                fsck_ok(&w, &format!("killed push {i} (source)"));
                fsck_ok(&dst, &format!("killed push {i} (destination)"));
            }
            _ => {
                let c = t.path().join(format!("c{i}"));
                let url = w.to_str().expect("utf-8").to_string();
                let dest = c.to_str().expect("utf-8").to_string();
                kill_after(t.path(), &["clone", &url, &dest], delay);
                // Unless the clone finished before the kill, re-running
                // resumes (or starts over) and ends with a complete clone
                // that knows its origin.
                let finished = bat_ledger::Ledger::discover(&c)
                    .ok()
                    .and_then(|l| l.config_get("clone.incomplete").ok())
                    .is_some_and(|v| v.is_none());
                if !finished {
                    let out = bat(t.path())
                        .args(["clone", &url, &dest])
                        .output()
                        .expect("clone");
                    assert!(
                        out.status.success(),
                        "clone {i} after a kill at {delay:?}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                let l = bat_ledger::Ledger::discover(&c).expect("cloned ledger");
                assert!(
                    l.remote_config("origin").expect("config").is_some(),
                    "clone {i} lost its origin"
                );
                drop(l);
                fsck_ok(&c, &format!("resumed clone {i}"));
                clones.push(c);
            }
        }
    }
    bat(&w).arg("push").arg("dst").assert().success();
    bat(&w).arg("gc").assert().success();
    fsck_ok(&w, "the campaign");
    fsck_ok(&dst, "the campaign");
    println!(
        "kill -9 campaign: 52 kills, {} clones resumed",
        clones.len()
    );
}

#[test]
fn eight_writers_with_gc_and_fsck_alongside() {
    let t = new_ledger();
    let w = t.path().to_path_buf();
    for i in 0..8 {
        let d = w.join(format!("d{i}"));
        std::fs::create_dir_all(&d).expect("mkdir");
        gen_file(&d.join("own.bin"), 256 << 10, 500 + i);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checker = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let out = bat(&w).arg("fsck").output().expect("fsck");
                assert!(
                    out.status.success(),
                    "fsck reported damage while writers ran: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
            }
            runs
        })
    };
    let collector = {
        let (w, stop) = (w.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut ran, mut busy) = (0, 0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let out = bat(&w).arg("gc").output().expect("gc");
                let err = String::from_utf8_lossy(&out.stderr);
                if out.status.success() {
                    ran += 1;
                } else {
                    assert!(
                        err.contains("busy") || err.contains("another bat"),
                        "gc: {err}"
                    );
                    busy += 1;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            (ran, busy)
        })
    };
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let w = w.clone();
            std::thread::spawn(move || {
                for round in 0..3 {
                    std::fs::write(w.join(format!("d{i}/round.txt")), format!("{round}"))
                        .expect("write");
                    let out = bat(&w)
                        .args(["commit", &format!("d{i}"), "-m", &format!("w{i} r{round}")])
                        .output()
                        .expect("commit");
                    assert!(
                        out.status.success(),
                        "writer {i}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            })
        })
        .collect();
    for h in writers {
        h.join().expect("writer");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let fscks = checker.join().expect("fsck thread");
    let (gcs, busy) = collector.join().expect("gc thread");
    println!("24 commits by 8 writers; {fscks} fsck runs, {gcs} gc runs, {busy} gc busy");
    let log = json(bat(&w).args(["log"]));
    assert_eq!(log.as_array().expect("array").len(), 24);
    fsck_ok(&w, "the writers");
}

/// gc on a full disk with delta chains to re-root fails before it changes
/// anything, says the disk is full and that `--keep-chains` needs less
/// room; once there is room it re-roots, and every version reads back.
#[test]
fn full_disk_gc_of_delta_chains_fails_cleanly_then_reroots() {
    let Some(fs) = Tmpfs::mount("64m") else {
        return;
    };
    let outside = tempfile::tempdir().expect("tempdir");
    let w = fs.path().join("w");
    let d = outside.path().join("data");
    std::fs::create_dir(&w).expect("mkdir");
    std::fs::create_dir(&d).expect("mkdir");
    bat(&w).arg("init").assert().success();
    let mut rng = Rng(0xf011);
    let mut data: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            let mut v = vec![0u8; 4 << 20];
            fill(&mut v, &mut rng);
            v
        })
        .collect();
    let versions = commit_versions(&w, &d, &mut data, &mut rng, 6);
    let read_all = |label: &str| {
        for (v, want) in versions.iter().enumerate() {
            let out = outside.path().join(format!("out-{label}-{v}"));
            let (ok, err, _) = run_bounded(
                &w,
                &[
                    "checkout",
                    &format!("HEAD~{}", 5 - v),
                    "--to",
                    out.to_str().expect("utf-8"),
                ],
                Duration::from_secs(60),
            );
            assert!(ok, "{label}: checkout v{v}: {err}");
            assert_eq!(
                &hash_file(&out.join("model.safetensors")),
                want,
                "{label}: v{v}"
            );
        }
    };
    fill_disk(fs.path());
    let (ok, err, _) = run_bounded(&w, &["gc"], Duration::from_secs(60));
    assert!(!ok, "gc cannot fit its new packs on a full disk");
    assert!(err.contains("the disk is full"), "{err}");
    assert!(err.contains("--keep-chains"), "{err}");
    let (ok, err, _) = run_bounded(&w, &["fsck"], Duration::from_secs(60));
    assert!(ok, "fsck after the failed gc: {err}");
    read_all("full");
    std::fs::remove_file(fs.path().join("filler")).expect("rm filler");
    let out = bat(&w).arg("gc").output().expect("gc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("re-root 3 delta chains"), "{text}");
    read_all("after");
}
