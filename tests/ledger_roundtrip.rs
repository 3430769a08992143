//! Round trip and dedup through the real binary: nested dirs, empty files,
//! non-ASCII names, exec bits, symlinks and a 1 GiB file; file ids equal
//! BLAKE3; recommitting stores < 1 MiB more, a 1 MiB overwrite < 8 MiB more.

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;

use common::*;

use crate::common::ledger as common;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn stored(work: &std::path::Path) -> u64 {
    json(bat(work).arg("stats"))["stored_bytes"]
        .as_u64()
        .expect("stored_bytes")
}

#[test]
fn round_trip_and_dedup_with_a_1gib_file() {
    let t = new_ledger();
    let w = t.path();
    let d = w.join("data");
    std::fs::create_dir_all(d.join("nested/deeper/deepest")).unwrap();
    std::fs::create_dir_all(d.join("empty dir")).unwrap();
    std::fs::write(d.join("empty.txt"), b"").unwrap();
    std::fs::write(d.join("nested/deeper/deepest/leaf.json"), b"{\"a\": 1}\n").unwrap();
    std::fs::write(d.join("nested/日本語 ñandú Ωμέγα.txt"), "non-ascii ✓\n").unwrap();
    std::fs::write(d.join("run.sh"), b"#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(d.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("../run.sh", d.join("nested/link-to-run")).unwrap();
    std::os::unix::fs::symlink("deeper/deepest", d.join("nested/dirlink")).unwrap();
    let mid = gen_file(&d.join("nested/medium.bin"), 5 * MIB + 12345, 7);
    let big_hash = gen_file(&d.join("big.bin"), GIB, 42);

    let c1 = json(bat(w).args(["commit", "data", "-m", "first"]));
    let c1id = c1["commit"].as_str().unwrap().to_string();
    assert_eq!(c1id.len(), 64);
    let s1 = stored(w);

    // ids in `show` equal BLAKE3 of the bytes (what b3sum prints)
    let show = json(bat(w).args(["show", &c1id]));
    let files = show["files"].as_array().unwrap();
    let find = |p: &str| {
        files
            .iter()
            .find(|f| f["path"] == p)
            .unwrap_or_else(|| panic!("{p} missing from show"))
    };
    assert_eq!(find("big.bin")["id"], big_hash.to_hex().as_str());
    assert_eq!(find("big.bin")["size"], GIB);
    assert_eq!(find("nested/medium.bin")["id"], mid.to_hex().as_str());
    assert_eq!(find("empty.txt")["id"], blake3::hash(b"").to_hex().as_str());
    assert_eq!(
        find("nested/日本語 ñandú Ωμέγα.txt")["id"],
        blake3::hash("non-ascii ✓\n".as_bytes()).to_hex().as_str()
    );
    assert!(find("nested/deeper/deepest/leaf.json").is_object());

    // recommit unchanged: < 1 MiB more
    let c2 = json(bat(w).args(["commit", "data", "-m", "again"]));
    let s2 = stored(w);
    assert!(s2 - s1 < MIB, "unchanged recommit stored {} bytes", s2 - s1);
    assert_eq!(c2["parents"][0], c1id.as_str());

    // checkout of the first commit is byte-identical (modes, links, empty dirs)
    let before = snapshot(&d);
    bat(w)
        .args(["checkout", &c1id, "--to", "out1"])
        .assert()
        .success();
    assert_eq!(snapshot(&w.join("out1")), before);
    std::fs::remove_dir_all(w.join("out1")).unwrap();

    // overwrite 1 MiB in the middle: < 8 MiB more
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("big.bin"))
            .unwrap();
        f.seek(SeekFrom::Start(GIB / 2 + 777)).unwrap();
        let mut patch = vec![0u8; MIB as usize];
        fill(&mut patch, &mut Rng(99));
        f.write_all(&patch).unwrap();
    }
    let new_hash = hash_file(&d.join("big.bin"));
    let c3 = json(bat(w).args(["commit", "data", "-m", "patched"]));
    let s3 = stored(w);
    assert!(
        s3 - s2 < 8 * MIB,
        "1 MiB overwrite stored {} bytes",
        s3 - s2
    );
    let show3 = json(bat(w).args(["show", c3["commit"].as_str().unwrap()]));
    let big3 = show3["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "big.bin")
        .unwrap()
        .clone();
    assert_eq!(big3["id"], new_hash.to_hex().as_str());

    // cat streams the exact bytes
    let out = bat(w)
        .args(["cat", "HEAD:nested/日本語 ñandú Ωμέγα.txt"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, "non-ascii ✓\n".as_bytes());

    // fsck re-reads every reachable chunk and recomputes both big files'
    // whole-file digests
    bat(w).args(["fsck"]).assert().success();
    let st = json(bat(w).arg("stats"));
    let per_commit: u64 = files.iter().map(|f| f["size"].as_u64().unwrap()).sum();
    assert_eq!(per_commit, GIB + 5 * MIB + 12345 + 9 + 14 + 18);
    assert_eq!(st["logical_bytes"].as_u64().unwrap(), 3 * per_commit);
}
