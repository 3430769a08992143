//! Eight `bat commit` processes on one branch at once: every commit that
//! reported success is in history, and fsck is clean.

use std::collections::HashSet;
use std::process::{Command, Stdio};

use common::*;

use crate::common::ledger as common;

#[test]
fn eight_concurrent_committers_lose_nothing() {
    let t = new_ledger();
    let w = t.path();
    for i in 0..8 {
        let d = w.join(format!("d{i}"));
        std::fs::create_dir_all(&d).unwrap();
        gen_file(&d.join("shared.bin"), 5 << 20, 77); // same big file everywhere (dedup races)
        gen_file(&d.join("own.bin"), 1 << 20, 100 + i);
    }
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(bat_path())
                .current_dir(w)
                .env_remove("BAT_DIR")
                .args([
                    "commit",
                    &format!("d{i}"),
                    "-m",
                    &format!("writer {i}"),
                    "--json",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut reported = HashSet::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a committer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        reported.insert(v["commit"].as_str().unwrap().to_string());
    }
    assert_eq!(reported.len(), 8);
    let log = json(bat(w).args(["log"]));
    let history: HashSet<String> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    for id in &reported {
        assert!(
            history.contains(id),
            "commit {id} reported success but is not in history"
        );
    }
    assert_eq!(
        log.as_array().unwrap().len(),
        8,
        "a single linear chain of 8 commits"
    );
    bat(w).arg("fsck").assert().success();

    // Racing writers stored the shared file more than once; the losers'
    // records are dead weight that gc rewrites away. Kill gc at random
    // instants first: the ledger must stay valid after every kill.
    let before = json(bat(w).arg("stats"))["pack_bytes"].as_u64().unwrap();
    println!("pack bytes before gc: {before}");
    let mut rng = Rng(0x5EED);
    for i in 0..8 {
        let mut child = Command::new(bat_path())
            .current_dir(w)
            .env_remove("BAT_DIR")
            .arg("gc")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(rng.next() % 60_000));
        let _ = child.kill();
        let _ = child.wait();
        let f = bat(w).arg("fsck").output().unwrap();
        assert!(
            f.status.success(),
            "fsck after gc kill {i}: {}",
            String::from_utf8_lossy(&f.stdout)
        );
    }
    let gc = json(bat(w).arg("gc"));
    println!("final gc: {gc}");
    assert!(gc["bytes_after"].as_u64().unwrap() <= before);
    let after = json(bat(w).arg("stats"))["pack_bytes"].as_u64().unwrap();
    assert!(
        after < before + (1 << 20),
        "gc must not grow packs ({before} -> {after})"
    );
    bat(w).arg("fsck").assert().success();
    bat(w)
        .args(["checkout", "HEAD", "--to", "out"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read(w.join("out/own.bin")).unwrap(),
        std::fs::read(w.join(format!(
                "d{}/own.bin",
                log.as_array().unwrap()[0]["message"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("writer ")
            )))
        .unwrap()
    );
    // a CAS writer with a stale expectation fails with "branch moved"
    let first = log.as_array().unwrap().last().unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut l = bat_ledger::Ledger::discover(w).unwrap();
    let err = l
        .update_ref(
            "refs/heads/main",
            Some(bat_ledger::CommitId(first.parse().unwrap())),
            None,
            "stale",
        )
        .unwrap_err();
    assert!(err.to_string().contains("branch moved"), "{err}");
}
