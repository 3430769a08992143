//! Delta bases read from the files an earlier commit recorded
//! (`WriteConfig::reuse_base_files`, `.bat/sources`): used when the previous
//! round's file is still in place, checked piece by piece against the ids,
//! and never trusted when the file changed behind an unchanged stat.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, CommitOutcome, CommitRequest, Ledger, NoProgress, ObjectId};

use crate::common;
use common::{write_safetensors, Rng, Tensor};

/// A safetensors file of BF16 tensors `w0`, `w1`, ... holding `data`.
fn model(data: &[Vec<u8>]) -> Vec<u8> {
    let names: Vec<String> = (0..data.len()).map(|i| format!("w{i}")).collect();
    let shapes: Vec<[usize; 1]> = data.iter().map(|d| [d.len() / 2]).collect();
    let ts: Vec<Tensor<'_>> = (0..data.len())
        .map(|i| Tensor {
            name: &names[i],
            dtype: "BF16",
            shape: &shapes[i],
            data: &data[i],
        })
        .collect();
    write_safetensors(&ts, None)
}

/// Round `r` of a model whose elements move by one code point, about one in
/// eight per round.
fn rounds(n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x5eed);
    let mut data: Vec<Vec<u8>> = (0..2)
        .map(|_| (0..2 * 4096).map(|_| rng.next() as u8).collect())
        .collect();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(model(&data));
        for t in data.iter_mut() {
            for e in t.chunks_mut(2) {
                if rng.next().is_multiple_of(8) {
                    let v = u16::from_le_bytes([e[0], e[1]]).wrapping_add(1);
                    e.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    out
}

fn ledger(root: &Path, reuse: bool) -> Ledger {
    let mut l = Ledger::init(root).unwrap();
    l.config.chunk_threshold = 1024;
    l.config.reuse_base_files = reuse;
    l
}

fn commit(l: &mut Ledger, dir: &Path, msg: &str) -> CommitOutcome {
    l.commit_dir(
        dir,
        &CommitRequest::new(msg),
        &NoProgress,
        &AtomicBool::new(false),
    )
    .unwrap()
}

/// Write round `bytes` into its own folder `root/name`; returns the folder.
fn round_dir(root: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let d = root.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("m.safetensors"), bytes).unwrap();
    d
}

/// Every commit reads back as its round, and fsck is clean.
fn check(l: &Ledger, commits: &[(CommitId, Vec<u8>)]) {
    for (c, bytes) in commits {
        let tree = l.read_commit(c).unwrap().tree;
        let f = &l.walk_files(&tree).unwrap()[0];
        assert_eq!(f.id, ObjectId(*blake3::hash(bytes).as_bytes()));
        assert_eq!(&l.read_bytes(&f.id).unwrap(), bytes);
    }
    assert!(l.fsck(&NoProgress, &AtomicBool::new(false)).unwrap().ok());
}

#[test]
fn bases_come_from_the_previous_rounds_folder_and_store_the_same() {
    let t = tempfile::tempdir().unwrap();
    let rs = rounds(5);
    let mut reused = ledger(&t.path().join("a"), true);
    let mut decoded = ledger(&t.path().join("b"), false);
    let (mut ca, mut cb) = (Vec::new(), Vec::new());
    for (r, bytes) in rs.iter().enumerate() {
        let d = round_dir(t.path(), &format!("r{r}"), bytes);
        let a = commit(&mut reused, &d, &format!("r{r}"));
        let b = commit(&mut decoded, &d, &format!("r{r}"));
        // Both tensors' pieces, from round 1 on.
        assert_eq!(a.base_pieces_from_files, if r == 0 { 0 } else { 2 }, "r{r}");
        assert_eq!(b.base_pieces_from_files, 0, "r{r}");
        assert_eq!(a.tree, b.tree);
        assert_eq!(a.pack_bytes, b.pack_bytes, "r{r}: the same records");
        ca.push((a.commit, bytes.clone()));
        cb.push((b.commit, bytes.clone()));
    }
    let (sa, sb) = (reused.stats().unwrap(), decoded.stats().unwrap());
    assert_eq!(sa.delta_objects, sb.delta_objects);
    assert!(sa.delta_objects >= 8, "{}", sa.delta_objects);
    check(&reused, &ca);
    check(&decoded, &cb);
}

/// The previous round's file rewritten in place with other bytes of the
/// same length, its modification time put back: the stat matches the hint,
/// the bytes do not, so the bases are decoded from the ledger.
#[test]
fn a_base_file_changed_behind_its_stat_is_not_used() {
    let t = tempfile::tempdir().unwrap();
    let rs = rounds(3);
    let mut l = ledger(&t.path().join("l"), true);
    let d0 = round_dir(t.path(), "r0", &rs[0]);
    let c0 = commit(&mut l, &d0, "r0");
    let f = d0.join("m.safetensors");
    let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
    {
        use std::os::unix::fs::FileExt;
        let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        // Same length, same inode: a tensor's bytes from another round.
        let at = rs[0].len() as u64 - 4096;
        w.write_all_at(&rs[2][rs[2].len() - 4096..], at).unwrap();
        w.set_modified(mtime).unwrap();
    }
    assert_eq!(std::fs::metadata(&f).unwrap().modified().unwrap(), mtime);
    assert_ne!(std::fs::read(&f).unwrap(), rs[0]);
    let d1 = round_dir(t.path(), "r1", &rs[1]);
    let c1 = commit(&mut l, &d1, "r1");
    // The first tensor's piece still matches its id; the second does not.
    assert_eq!(c1.base_pieces_from_files, 1);
    assert!(l.stats().unwrap().delta_objects >= 2);
    check(
        &l,
        &[(c0.commit, rs[0].clone()), (c1.commit, rs[1].clone())],
    );
}

/// A file overwritten where it was committed from (new stat), a damaged hint
/// file, or the setting off: bases are decoded, and every round reads back.
#[test]
fn missing_stale_or_damaged_hints_fall_back_to_decoding() {
    let t = tempfile::tempdir().unwrap();
    let rs = rounds(6);
    let root = t.path().join("l");
    let mut l = ledger(&root, true);
    let d = t.path().join("work");
    let mut commits = Vec::new();
    for (r, bytes) in rs.iter().enumerate().take(2) {
        round_dir(t.path(), "work", bytes);
        let c = commit(&mut l, &d, &format!("r{r}"));
        assert_eq!(c.base_pieces_from_files, 0, "r{r}: the same path rewritten");
        commits.push((c.commit, bytes.clone()));
    }
    std::fs::write(
        root.join(".bat/sources"),
        b"{\"version\":1,\"files\":[{\"id\":",
    )
    .unwrap();
    let d2 = round_dir(t.path(), "r2", &rs[2]);
    let c = commit(&mut l, &d2, "r2");
    assert_eq!(c.base_pieces_from_files, 0, "damaged hints");
    commits.push((c.commit, rs[2].clone()));
    let d3 = round_dir(t.path(), "r3", &rs[3]);
    l.config.reuse_base_files = false;
    let c = commit(&mut l, &d3, "r3");
    assert_eq!(c.base_pieces_from_files, 0, "setting off");
    commits.push((c.commit, rs[3].clone()));
    // With the setting off nothing is remembered either: r4's base (r3) has
    // no hint; r5's base (r4) has one, in the file r2 found damaged.
    l.config.reuse_base_files = true;
    let d4 = round_dir(t.path(), "r4", &rs[4]);
    let c = commit(&mut l, &d4, "r4");
    assert_eq!(c.base_pieces_from_files, 0, "r3 was not remembered");
    commits.push((c.commit, rs[4].clone()));
    let d5 = round_dir(t.path(), "r5", &rs[5]);
    let c = commit(&mut l, &d5, "r5");
    assert_eq!(c.base_pieces_from_files, 2, "r4's file");
    commits.push((c.commit, rs[5].clone()));
    check(&l, &commits);
}

/// A commit killed while replacing the hint file leaves a temporary
/// sibling; gc (exclusive) removes it and keeps the hints.
#[test]
fn gc_removes_temporary_hint_files_a_killed_commit_left() {
    let t = tempfile::tempdir().unwrap();
    let rs = rounds(2);
    let root = t.path().join("l");
    let mut l = ledger(&root, true);
    let d = round_dir(t.path(), "r0", &rs[0]);
    commit(&mut l, &d, "r0");
    drop(l);
    let bat = root.join(".bat");
    std::fs::write(bat.join(".sources-Xy12ab"), b"{\"version\":1,").unwrap();
    let hints = std::fs::read(bat.join("sources")).unwrap();
    let mut l = Ledger::open_with(&bat, bat_ledger::LockMode::Exclusive).unwrap();
    l.gc(&NoProgress, &AtomicBool::new(false)).unwrap();
    assert!(!bat.join(".sources-Xy12ab").exists());
    assert_eq!(std::fs::read(bat.join("sources")).unwrap(), hints);
}
