//! CLI journeys of sharing: clone, fetch, pull, push (fast-forward,
//! refused, forced, concurrent), partial clone with on-demand checkpoints,
//! bundles, and kill -9 of a client mid-clone and mid-push.

use std::path::Path;
use std::process::Stdio;

use ledger_common::{bat, bat_path, fails, gen_file, json, ledger_state};

use crate::common::ledger as ledger_common;

/// Write round `r` of a small campaign into `dir`: a note, a 6 MiB binary
/// (chunked) and a 5 MiB bf16 safetensors model that changes slightly each
/// round (delta-stored).
fn round_dir(dir: &Path, r: u64) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("candidate")).unwrap();
    std::fs::write(dir.join("notes.txt"), format!("round {r}\n")).unwrap();
    gen_file(&dir.join("big.bin"), 6 << 20, 100 + 2 * r);
    std::fs::write(dir.join("candidate/model.safetensors"), model(r)).unwrap();
}

fn model(r: u64) -> Vec<u8> {
    let elems = 5 << 19; // 2.5 Mi bf16 elements = 5 MiB
    let header = format!(
        "{{\"w\":{{\"dtype\":\"BF16\",\"shape\":[{elems}],\"data_offsets\":[0,{}]}}}}",
        elems * 2
    );
    let mut h = header.into_bytes();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..elems {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // a slowly drifting value: high byte stable, low byte changes by round
        let v: u16 = 0x3f00 | ((x as u16) & 0x7f);
        let v = if (i as u64 + r) % 9 == 0 { v ^ 1 } else { v };
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn commit_round(ledger: &Path, work: &Path, r: u64) -> String {
    round_dir(work, r);
    let v = json(
        bat(ledger)
            .args(["commit", "--plain", "-m"])
            .arg(format!("round {r}"))
            .arg(work),
    );
    v["commit"].as_str().unwrap().to_string()
}

fn fsck_ok(dir: &Path) -> serde_json::Value {
    let v = json(bat(dir).arg("fsck"));
    assert_eq!(v["ok"], true, "fsck of {}: {v}", dir.display());
    v
}

fn head(dir: &Path) -> String {
    let v = json(bat(dir).args(["log", "-n", "1"]));
    v[0]["id"]
        .as_str()
        .or(v["commits"][0]["id"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

fn origin_with_rounds(t: &Path, n: u64) -> std::path::PathBuf {
    let o = t.join("origin");
    std::fs::create_dir_all(&o).unwrap();
    bat(&o).arg("init").assert().success();
    for r in 0..n {
        commit_round(&o, &t.join("work"), r);
    }
    o
}

#[test]
fn clone_fetch_pull_push_and_refusals() {
    let t = tempfile::tempdir().unwrap();
    let o = origin_with_rounds(t.path(), 2);
    let c = t.path().join("clone");
    let v = json(bat(t.path()).args(["clone", "origin", "clone"]));
    assert!(
        v["fetch"]["stats"]["objects_stored"].as_u64().unwrap() > 10,
        "{v}"
    );
    fsck_ok(&o);
    fsck_ok(&c);
    assert_eq!(head(&o), head(&c));
    // The clone checks out byte-identical files.
    bat(&c)
        .args(["checkout", "HEAD", "--to"])
        .arg(t.path().join("co"))
        .assert()
        .success();
    round_dir(&t.path().join("expect"), 1);
    assert_eq!(
        ledger_common::snapshot(&t.path().join("co")),
        ledger_common::snapshot(&t.path().join("expect"))
    );

    // A new round on the origin: fetch sends exactly the missing objects.
    let before = json(bat(&o).arg("stats"))["objects"].as_u64().unwrap();
    commit_round(&o, &t.path().join("work"), 2);
    let after = json(bat(&o).arg("stats"))["objects"].as_u64().unwrap();
    let f = json(bat(&c).arg("fetch"));
    assert_eq!(
        f["stats"]["objects_stored"].as_u64().unwrap(),
        after - before,
        "{f}"
    );
    assert_eq!(
        f["stats"]["objects_received"].as_u64().unwrap(),
        after - before,
        "{f}"
    );
    // Fetching again sends nothing.
    let f2 = json(bat(&c).arg("fetch"));
    assert_eq!(f2["stats"]["objects_received"], 0, "{f2}");
    let p = json(bat(&c).arg("pull"));
    assert_eq!(p["status"], "fast-forwarded", "{p}");
    assert_eq!(head(&o), head(&c));

    // Push a round from the clone.
    commit_round(&c, &t.path().join("work2"), 3);
    let p = json(bat(&c).arg("push"));
    assert!(p["push"]["objects_sent"].as_u64().unwrap() > 0, "{p}");
    assert_eq!(head(&o), head(&c));
    fsck_ok(&o);
    fsck_ok(&c);
    // Up to date.
    let p = json(bat(&c).arg("push"));
    assert_eq!(p["push"]["up_to_date"], true);

    // Diverge: the origin and the clone both commit; push is refused.
    commit_round(&o, &t.path().join("work"), 4);
    commit_round(&c, &t.path().join("work2"), 5);
    let origin_head = head(&o);
    let out = fails(bat(&c).arg("push"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("non-fast-forward") && err.contains("pull"),
        "{err}"
    );
    assert_eq!(head(&o), origin_head, "a refused push moved the remote");
    // Pull reports the divergence, moves nothing.
    let out = fails(bat(&c).arg("pull"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("diverged"));
    // --force overwrites.
    let p = json(bat(&c).args(["push", "--force"]));
    assert_eq!(p["push"]["forced"], true);
    assert_eq!(head(&o), head(&c));
    fsck_ok(&o);
    fsck_ok(&c);

    // Remote registry.
    let l = json(bat(&c).args(["remote", "list"]));
    assert_eq!(l[0]["name"], "origin");
    bat(&c)
        .args(["remote", "add", "second"])
        .arg(&o)
        .assert()
        .success();
    let f = json(bat(&c).args(["fetch", "second"]));
    assert!(f["refs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["local_ref"] == "refs/remotes/second/main"));
    bat(&c)
        .args(["remote", "remove", "second"])
        .assert()
        .success();
    let out = fails(bat(&c).args(["fetch", "second"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no remote named"));
    bat(&c)
        .args(["remote", "add", "h", "http://127.0.0.1:1/x"])
        .assert()
        .success();
    // Nothing listens on port 1: a clear connection error.
    let out = fails(bat(&c).args(["fetch", "h"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http://127.0.0.1:1/x"));
}

#[test]
fn two_concurrent_pushes_one_wins_the_other_is_told_to_pull() {
    let t = tempfile::tempdir().unwrap();
    let o = origin_with_rounds(t.path(), 1);
    for n in ["a", "b"] {
        bat(t.path())
            .args(["clone", "origin", n])
            .assert()
            .success();
        commit_round(
            &t.path().join(n),
            &t.path().join(format!("w{n}")),
            if n == "a" { 10 } else { 11 },
        );
    }
    let spawn = |n: &str| {
        std::process::Command::new(bat_path())
            .current_dir(t.path().join(n))
            .env_remove("BAT_DIR")
            .arg("push")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a"), spawn("b"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_ne!(
        a.status.success(),
        b.status.success(),
        "exactly one push wins"
    );
    let loser = if a.status.success() { &b } else { &a };
    let err = String::from_utf8_lossy(&loser.stderr);
    assert!(err.contains("pull"), "the loser is told to pull: {err}");
    let winner = if a.status.success() { "a" } else { "b" };
    assert_eq!(head(&o), head(&t.path().join(winner)));
    fsck_ok(&o);
}

#[test]
fn partial_clone_fetches_a_checkpoint_on_demand() {
    let t = tempfile::tempdir().unwrap();
    let o = origin_with_rounds(t.path(), 2);
    let p = t.path().join("part");
    let v = json(bat(t.path()).args(["clone", "--filter", "no-checkpoints", "origin", "part"]));
    // Per round: the model under candidate/ and big.bin (a weight-file
    // extension) stay on the remote.
    assert_eq!(v["fetch"]["stats"]["files_promised"], 4, "{v}");
    let f = fsck_ok(&p);
    assert_eq!(f["promised_files"], 4);
    assert_eq!(f["promisor"], "origin");
    let full = json(bat(&o).arg("stats"))["pack_bytes"].as_u64().unwrap();
    let part = json(bat(&p).arg("stats"))["pack_bytes"].as_u64().unwrap();
    assert!(part < full, "partial {part} < full {full}");
    // Checkout fetches the checkpoint of that commit only, verified.
    let v = json(
        bat(&p)
            .args(["checkout", "HEAD~1", "--to"])
            .arg(t.path().join("co")),
    );
    assert_eq!(v["fetched_on_demand"], 2, "{v}");
    assert_eq!(
        std::fs::read(t.path().join("co/candidate/model.safetensors")).unwrap(),
        model(0)
    );
    let f = fsck_ok(&p);
    assert_eq!(f["promised_files"], 2);
    // diff of the two rounds fetches the other checkpoint files too.
    bat(&p).args(["diff", "HEAD~1", "HEAD"]).assert().success();
    assert_eq!(fsck_ok(&p)["promised_files"], 0);
    fsck_ok(&o);
}

#[test]
fn bundle_round_trip_and_damage() {
    let t = tempfile::tempdir().unwrap();
    let o = origin_with_rounds(t.path(), 2);
    bat(&o).args(["tag", "paper", "HEAD~1"]).assert().success();
    let b = t.path().join("campaign.bundle");
    let v = json(bat(&o).args(["bundle", "create"]).arg(&b));
    assert_eq!(v["summary"]["refs"].as_array().unwrap().len(), 2, "{v}");
    let v = json(bat(t.path()).args(["bundle", "verify"]).arg(&b));
    assert_eq!(v["ok"], true);
    let v = json(bat(t.path()).args(["clone"]).arg(&b).arg("fromb"));
    assert_eq!(v["branch"], "main");
    let c = t.path().join("fromb");
    fsck_ok(&c);
    assert_eq!(head(&o), head(&c));
    // A damaged copy: verify and clone fail, nothing is created.
    let mut bytes = std::fs::read(&b).unwrap();
    let n = bytes.len() / 2;
    bytes[n] ^= 0x01;
    let bad = t.path().join("bad.bundle");
    std::fs::write(&bad, &bytes).unwrap();
    let out = fails(bat(t.path()).args(["bundle", "verify"]).arg(&bad));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checksum"));
    fails(bat(t.path()).args(["clone"]).arg(&bad).arg("frombad"));
    assert!(!t.path().join("frombad").exists());
    // Truncated.
    std::fs::write(&bad, &std::fs::read(&b).unwrap()[..n]).unwrap();
    fails(bat(t.path()).args(["bundle", "verify"]).arg(&bad));
    // Fetching a damaged bundle into an existing ledger changes nothing.
    std::fs::write(&bad, &bytes).unwrap();
    bat(&c)
        .args(["remote", "add", "bad"])
        .arg(&bad)
        .assert()
        .success();
    let before = ledger_state(&c);
    fails(bat(&c).args(["fetch", "bad"]));
    assert_eq!(ledger_state(&c), before);
}

fn kill_midway(mut cmd: std::process::Command, marker: &Path) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the transfer has visibly started (the destination ledger
    // exists / the child is running), then kill -9.
    for _ in 0..200 {
        if marker.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    let done = child.try_wait().unwrap();
    assert!(done.is_none(), "the transfer finished before the kill");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn kill_9_mid_clone_and_mid_push_then_retry() {
    let t = tempfile::tempdir().unwrap();
    let o = origin_with_rounds(t.path(), 2);
    let mut cmd = std::process::Command::new(bat_path());
    cmd.current_dir(t.path())
        .env_remove("BAT_DIR")
        .env("BAT_TEST_TRANSFER_DELAY_MS", "200")
        .args(["clone", "origin", "c"]);
    kill_midway(cmd, &t.path().join("c/.bat"));
    fsck_ok(&o);
    let c = t.path().join("c");
    fsck_ok(&c);
    bat(t.path())
        .args(["clone", "origin", "c"])
        .assert()
        .success();
    fsck_ok(&c);
    assert_eq!(head(&o), head(&c));

    commit_round(&c, &t.path().join("w"), 7);
    let before = ledger_state(&o);
    let mut cmd = std::process::Command::new(bat_path());
    cmd.current_dir(&c)
        .env_remove("BAT_DIR")
        .env("BAT_TEST_TRANSFER_DELAY_MS", "300")
        .arg("push");
    kill_midway(cmd, &c);
    fsck_ok(&o);
    fsck_ok(&c);
    let _ = before;
    assert_ne!(head(&o), head(&c));
    bat(&c).arg("push").assert().success();
    assert_eq!(head(&o), head(&c));
    fsck_ok(&o);
}
