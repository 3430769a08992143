//! Crash safety: `bat commit` killed with SIGKILL at random instants. After
//! every kill fsck passes and the branch is at the old or the new commit.

use std::io::{Seek, SeekFrom, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

use crate::common::ledger as common;

const MIB: u64 = 1 << 20;

fn tip(w: &std::path::Path) -> serde_json::Value {
    json(bat(w).args(["log", "-n", "1"]))[0].clone()
}

#[test]
fn sigkill_during_commit_never_breaks_the_ledger() {
    let t = new_ledger();
    let w = t.path();
    let d = w.join("data");
    std::fs::create_dir_all(&d).unwrap();
    gen_file(&d.join("a.bin"), 16 * MIB, 1);
    gen_file(&d.join("b.bin"), 16 * MIB, 2);
    bat(w)
        .args(["commit", "data", "-m", "base"])
        .assert()
        .success();

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("crash test seed {seed}");
    let mut rng = Rng(seed | 1);
    let mut old = tip(w)["id"].as_str().unwrap().to_string();
    let mut completed = 0;
    let mut killed = 0;
    let mut duration = Duration::from_millis(300);
    for run in 0..24 {
        // fresh data every run: a new 2 MiB region in one file + a new small file
        let f = if run % 2 == 0 { "a.bin" } else { "b.bin" };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join(f))
            .unwrap();
        file.seek(SeekFrom::Start(rng.next() % (14 * MIB))).unwrap();
        let mut patch = vec![0u8; 2 * MIB as usize];
        fill(&mut patch, &mut rng);
        file.write_all(&patch).unwrap();
        std::fs::write(d.join(format!("run-{run}.txt")), format!("run {run}\n")).unwrap();

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
        // kill anywhere from process start to a bit past the typical end
        let at = Duration::from_micros(rng.next() % (duration.as_micros() as u64 * 13 / 10 + 1));
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let out = child.wait_with_output().unwrap();
        let finished = out.status.success();
        if finished {
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
        if finished {
            let reported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                reported["commit"].as_str().unwrap(),
                now_id,
                "a reported commit must be the tip"
            );
        }
        if now_id != old {
            assert_eq!(
                now["parents"][0].as_str().unwrap(),
                old,
                "run {run}: new tip must sit on the old one"
            );
            assert_eq!(
                now["message"],
                msg.as_str(),
                "run {run}: tip must be the new commit"
            );
        }
        old = now_id;
    }
    println!("{completed} commits completed, {killed} killed");
    assert!(
        killed >= 5,
        "most runs should be killed mid-commit (killed {killed})"
    );
    // garbage from killed commits is collectable and the ledger stays sound
    bat(w).arg("gc").assert().success();
    let fsck = bat(w).arg("fsck").output().unwrap();
    assert!(fsck.status.success());
    assert!(
        !String::from_utf8_lossy(&fsck.stdout).contains("not referenced"),
        "gc removes leftover packs"
    );
    bat(w)
        .args(["checkout", "HEAD", "--to", "out"])
        .assert()
        .success();
}
