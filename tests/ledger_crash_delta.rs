//! Crash safety of delta storage: `bat commit` of a perturbed safetensors
//! checkpoint killed with SIGKILL at random instants. After every kill fsck
//! passes and the branch is at the old or the new commit.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

use crate::common::ledger as common;

fn tip(w: &std::path::Path) -> serde_json::Value {
    json(bat(w).args(["log", "-n", "1"]))[0].clone()
}

/// A new ledger with an empty `data` directory, a generator seeded from
/// the clock (printed, to replay a failure) and `tensors` random BF16
/// tensors of 2 Mi elements.
fn seeded_setup(tensors: usize) -> (tempfile::TempDir, Rng, Vec<Vec<u8>>) {
    let t = new_ledger();
    std::fs::create_dir_all(t.path().join("data")).unwrap();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("crash test seed {seed}");
    let mut rng = Rng(seed | 1);
    let data = (0..tensors)
        .map(|_| {
            let mut v = vec![0u8; 4 << 20];
            fill(&mut v, &mut rng);
            v
        })
        .collect();
    (t, rng, data)
}

#[test]
fn sigkill_during_delta_commit_never_breaks_the_ledger() {
    let (t, mut rng, mut data) = seeded_setup(6);
    let w = t.path();
    let d = w.join("data");
    write_model(&d.join("model.safetensors"), &data);
    bat(w)
        .args(["commit", "data", "-m", "base"])
        .assert()
        .success();
    let mut old = tip(w)["id"].as_str().unwrap().to_string();
    let (mut completed, mut killed) = (0, 0);
    let mut duration = Duration::from_millis(300);
    for run in 0..16 {
        for t in data.iter_mut() {
            for _ in 0..(t.len() / 16) {
                let i = (rng.next() as usize) % t.len();
                t[i] ^= 1;
            }
        }
        write_model(&d.join("model.safetensors"), &data);
        let msg = format!("run {run}");
        let start = Instant::now();
        let mut child = Command::new(bat_path())
            .current_dir(w)
            .env_remove("BAT_DIR")
            .args(["commit", "data", "-m", &msg, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at = Duration::from_micros(rng.next() % (duration.as_micros() as u64 * 13 / 10 + 1));
        std::thread::sleep(at);
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            completed += 1;
            duration = start.elapsed();
        } else {
            killed += 1;
        }
        let fsck = bat(w).arg("fsck").output().unwrap();
        assert!(
            fsck.status.success(),
            "run {run} (killed after {at:?}): fsck failed: {}",
            String::from_utf8_lossy(&fsck.stdout)
        );
        let now = tip(w);
        let now_id = now["id"].as_str().unwrap().to_string();
        if now_id != old {
            assert_eq!(now["parents"][0].as_str().unwrap(), old);
            assert_eq!(now["message"], msg.as_str());
        }
        old = now_id;
    }
    println!("{completed} commits completed, {killed} killed");
    assert!(killed >= 3, "most runs should be killed mid-commit");
    let stats = json(bat(w).args(["stats"]));
    println!("{stats}");
    bat(w).arg("gc").assert().success();
    bat(w)
        .args(["commit", "data", "-m", "final"])
        .assert()
        .success();
    assert!(bat(w).arg("fsck").output().unwrap().status.success());
    bat(w)
        .args(["checkout", "HEAD", "--to", "out"])
        .assert()
        .success();
    assert_eq!(
        hash_file(&w.join("out/model.safetensors")),
        hash_file(&d.join("model.safetensors"))
    );
}

/// `bat commit --delta-depth N` bounds the chain: with 0 nothing is stored as
/// a delta, with 1 every other version is a full copy; checkouts are exact.
#[test]
fn delta_depth_flag_bounds_the_chain() {
    for (depth, expect_deltas) in [(0u32, false), (1, true)] {
        let t = new_ledger();
        let w = t.path();
        let d = w.join("data");
        std::fs::create_dir_all(&d).unwrap();
        let mut rng = Rng(0x5eed + u64::from(depth));
        let mut data: Vec<Vec<u8>> = (0..2)
            .map(|_| {
                let mut v = vec![0u8; 4 << 20];
                fill(&mut v, &mut rng);
                v
            })
            .collect();
        let mut versions = Vec::new();
        for v in 0..3 {
            if v > 0 {
                for t in data.iter_mut() {
                    for _ in 0..(t.len() / 64) {
                        let i = (rng.next() as usize) % t.len();
                        t[i] ^= 1;
                    }
                }
            }
            write_model(&d.join("model.safetensors"), &data);
            versions.push(std::fs::read(d.join("model.safetensors")).unwrap());
            bat(w)
                .args(["commit", "data", "-m", &format!("v{v}")])
                .args(["--delta-depth", &depth.to_string()])
                .assert()
                .success();
        }
        let stats = json(bat(w).args(["stats"]));
        let deltas = stats["delta_objects"].as_u64().unwrap();
        assert_eq!(deltas > 0, expect_deltas, "depth {depth}: {stats}");
        if depth == 1 {
            // v1 is a delta of v0; v2's base would be at depth 1 already, so
            // v2 is stored in full: only one version's pieces are deltas.
            assert!(deltas >= 2, "{stats}");
            let logical = stats["delta_logical_bytes"].as_u64().unwrap();
            assert!(logical <= versions[1].len() as u64, "{stats}");
        }
        for (v, bytes) in versions.iter().enumerate() {
            let out = format!("out{v}");
            bat(w)
                .args(["checkout", &format!("HEAD~{}", 2 - v), "--to", &out])
                .assert()
                .success();
            assert_eq!(
                &std::fs::read(w.join(&out).join("model.safetensors")).unwrap(),
                bytes
            );
        }
        assert!(bat(w).arg("fsck").output().unwrap().status.success());
    }
}

/// `bat gc` re-rooting delta chains killed with SIGKILL at random instants:
/// after every kill fsck passes and every version checks out byte-exact;
/// a gc left to finish re-roots the chains.
#[test]
fn sigkill_during_a_rerooting_gc_never_breaks_the_ledger() {
    let (t, mut rng, mut data) = seeded_setup(5);
    let w = t.path();
    let d = w.join("data");
    let versions = commit_versions(w, &d, &mut data, &mut rng, 8);
    let check_all = |label: &str| {
        let fsck = bat(w).arg("fsck").output().unwrap();
        assert!(
            fsck.status.success(),
            "{label}: fsck failed: {}",
            String::from_utf8_lossy(&fsck.stdout)
        );
        for (v, want) in versions.iter().enumerate() {
            let out = w.join("out");
            let _ = std::fs::remove_dir_all(&out);
            bat(w)
                .args(["checkout", &format!("HEAD~{}", 7 - v), "--to", "out"])
                .assert()
                .success();
            assert_eq!(
                &hash_file(&out.join("model.safetensors")),
                want,
                "{label}: v{v}"
            );
        }
    };
    let plan = json(bat(w).args(["gc", "--dry-run"]));
    assert!(plan["rerooted_trees"].as_u64().unwrap() >= 5, "{plan}");
    // How long a whole gc takes, timed on a copy; kills land before that.
    let copy = tempfile::tempdir().unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(w.join(".bat"))
        .arg(copy.path())
        .status()
        .unwrap()
        .success());
    let start = Instant::now();
    bat(copy.path()).arg("gc").assert().success();
    let duration = start.elapsed();
    let mut killed = 0;
    for run in 0..6 {
        let mut child = Command::new(bat_path())
            .current_dir(w)
            .env_remove("BAT_DIR")
            .args(["gc", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at = Duration::from_micros(rng.next() % (duration.as_micros() as u64 * 6 / 10 + 1));
        std::thread::sleep(at);
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            // It finished: the chains are centred; the next runs would
            // have nothing to re-root.
            check_all(&format!("run {run} (completed)"));
            break;
        }
        killed += 1;
        check_all(&format!("run {run} (killed after {at:?})"));
    }
    println!("{killed} gc runs killed (a whole gc took {duration:?})");
    assert!(killed >= 1, "the first run should be killed mid-gc");
    let rep = json(bat(w).arg("gc"));
    println!("{rep}");
    check_all("after a full gc");
    let again = json(bat(w).arg("gc"));
    assert_eq!(again["rerooted_trees"], 0, "{again}");
}
