//! Damage to pack files: flipped bytes (every pack-header byte, every field
//! of several record headers, random payload positions) and truncations
//! make fsck exit 1 naming the damage, and
//! reads fail cleanly without writing wrong bytes.

use std::path::{Path, PathBuf};

use common::*;

use crate::common::copy_tree as copy_dir;
use crate::common::ledger as common;

fn pack_of(work: &Path) -> PathBuf {
    let mut packs: Vec<PathBuf> = std::fs::read_dir(work.join(".bat/packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    assert_eq!(packs.len(), 1, "one commit writes one pack segment");
    packs.pop().unwrap()
}

/// A pristine ledger with small files and one chunked file, as a template.
fn template() -> (tempfile::TempDir, Vec<u64>) {
    let t = new_ledger();
    let d = t.path().join("data");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("a.txt"), b"hello corruption\n".repeat(100)).unwrap();
    std::fs::write(d.join("sub/b.bin"), [7u8; 3000]).unwrap();
    gen_file(&d.join("sub/large.bin"), (4 << 20) + (1 << 19), 5);
    bat(t.path())
        .args(["commit", "data", "-m", "base"])
        .assert()
        .success();
    bat(t.path()).args(["fsck"]).assert().success();
    // record boundaries, so headers are flipped deliberately too
    let pack = std::fs::read(pack_of(t.path())).unwrap();
    let mut offs = vec![];
    let mut off = 16u64;
    while (off as usize) < pack.len() {
        offs.push(off);
        let stored = u64::from_le_bytes(
            pack[off as usize + 48..off as usize + 56]
                .try_into()
                .unwrap(),
        );
        off += 80 + stored;
    }
    assert_eq!(off as usize, pack.len(), "records tile the pack exactly");
    (t, offs)
}

fn check_damaged(base: &Path, damage: impl Fn(&Path), what: &str) {
    let case = tempfile::tempdir().unwrap();
    let w = case.path();
    copy_dir(base, w);
    damage(&pack_of(w));
    let out = bat(w).args(["fsck"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "fsck must exit 1 after {what}; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let name = pack_of(w)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        text.contains("problem:") && text.contains(&name),
        "fsck output must name the pack after {what}: {text}"
    );
    // checkout either fails leaving no destination, or (damage outside any
    // record, e.g. the pack's magic) writes exactly the original bytes.
    let co = bat(w)
        .args(["checkout", "HEAD", "--to", "out"])
        .output()
        .unwrap();
    if co.status.success() {
        assert_eq!(
            snapshot(&w.join("out")),
            snapshot(&w.join("data")),
            "checkout wrote wrong bytes after {what}"
        );
    } else {
        assert!(
            !w.join("out").exists(),
            "failed checkout must leave no destination ({what})"
        );
        let err = String::from_utf8_lossy(&co.stderr);
        assert!(err.contains("error:"), "{err}");
    }
}

#[test]
fn flipped_bytes_are_detected() {
    let (t, offs) = template();
    let base = t.path();
    let len = std::fs::metadata(pack_of(base)).unwrap().len();
    let mut positions: Vec<u64> = (0..16).collect(); // pack header
                                                     // every header field of a few records (first chunk, small files, last =
                                                     // the commit), then random positions anywhere
    let pick = [
        offs[0],
        offs[1],
        offs[offs.len() / 2],
        offs[offs.len() - 2],
        offs[offs.len() - 1],
    ];
    for &o in &pick {
        for k in [0u64, 4, 5, 6, 8, 39, 40, 47, 48, 55, 56, 71, 72, 79, 80, 81] {
            if o + k < len {
                positions.push(o + k); // record header fields + first payload bytes
            }
        }
    }
    let mut rng = Rng(0xC0FFEE);
    for _ in 0..30 {
        positions.push(rng.next() % len); // anywhere, mostly payload
    }
    positions.push(len - 1);
    positions.sort();
    positions.dedup();
    for p in positions {
        check_damaged(
            base,
            |pack| {
                let mut b = std::fs::read(pack).unwrap();
                b[p as usize] ^= 0x41;
                std::fs::write(pack, b).unwrap();
            },
            &format!("flipping byte {p}"),
        );
    }
}

#[test]
fn truncation_is_detected() {
    let (t, offs) = template();
    let base = t.path();
    let len = std::fs::metadata(pack_of(base)).unwrap().len();
    for cut in [0, 10, 16, offs[1] + 40, len / 2, len - 1] {
        check_damaged(
            base,
            |pack| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(pack)
                    .unwrap()
                    .set_len(cut)
                    .unwrap()
            },
            &format!("truncating to {cut} bytes"),
        );
    }
}

#[test]
fn cat_of_damaged_object_fails_without_output() {
    let (t, _) = template();
    let w = t.path();
    let pack = pack_of(w);
    let mut b = std::fs::read(&pack).unwrap();
    // the payload of "a.txt" is the zstd frame of a repeated line; find it by
    // its header id and damage its last payload byte
    let id = blake3::hash(&b"hello corruption\n".repeat(100));
    let pos = b
        .windows(32)
        .position(|w| w == id.as_bytes())
        .expect("record header of a.txt")
        - 8;
    let stored = u64::from_le_bytes(b[pos + 48..pos + 56].try_into().unwrap()) as usize;
    b[pos + 80 + stored - 1] ^= 1;
    std::fs::write(&pack, b).unwrap();
    let out = fails(bat(w).args(["cat", "HEAD:a.txt"]));
    assert!(
        out.stdout.is_empty(),
        "no bytes of a damaged object may be written"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&id.to_hex().to_string())
            && err.contains(pack.file_name().unwrap().to_str().unwrap()),
        "error must name object and pack: {err}"
    );
    // other objects remain readable
    let ok = bat(w).args(["cat", "HEAD:sub/b.bin"]).output().unwrap();
    assert!(ok.status.success());
    assert_eq!(ok.stdout, vec![7u8; 3000]);
}
