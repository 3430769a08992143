//! Tensor-aware delta storage: round trips over safetensors files of every
//! dtype, layout changes, fallbacks, corruption detection, chain depth, gc
//! and fsck.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{
    CommitId, CommitRequest, Error, Ledger, Location, LockMode, NoProgress, ObjectId,
};

use crate::common;
use common::{no, write_safetensors, Rng, Tensor};

const DTYPES: &[(&str, usize)] = &[
    ("BOOL", 1),
    ("U8", 1),
    ("I8", 1),
    ("F8_E5M2", 1),
    ("F8_E4M3", 1),
    ("I16", 2),
    ("U16", 2),
    ("F16", 2),
    ("BF16", 2),
    ("I32", 4),
    ("U32", 4),
    ("F32", 4),
    ("F64", 8),
    ("I64", 8),
    ("U64", 8),
];

struct T {
    name: String,
    dtype: &'static str,
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn tensor(rng: &mut Rng, name: &str, dtype: &'static str, w: usize, shape: Vec<usize>) -> T {
    let n: usize = shape.iter().product();
    T {
        name: name.into(),
        dtype,
        shape,
        data: rng.bytes(n * w),
    }
}

/// Serialize like the safetensors crate writes a PyTorch export.
fn safetensors(ts: &[T]) -> Vec<u8> {
    let ts: Vec<Tensor<'_>> = ts
        .iter()
        .map(|t| Tensor {
            name: &t.name,
            dtype: t.dtype,
            shape: &t.shape,
            data: &t.data,
        })
        .collect();
    write_safetensors(&ts, Some(serde_json::json!({"format": "pt"})))
}

/// Change about one element byte in eight.
fn perturb(rng: &mut Rng, ts: &mut [T]) {
    for t in ts {
        for b in t.data.iter_mut() {
            if rng.next().is_multiple_of(8) {
                *b ^= 1 << (rng.next() % 8);
            }
        }
    }
}

fn small_ledger(t: &Path) -> Ledger {
    let mut l = Ledger::init(t).unwrap();
    l.config.chunk_threshold = 1024;
    l
}

fn commit(l: &mut Ledger, d: &Path, msg: &str) -> CommitId {
    l.commit_dir(d, &CommitRequest::new(msg), &NoProgress, &no())
        .unwrap()
        .commit
}

/// Every file of commit `c` reads back as `expect`.
fn check(l: &Ledger, c: &CommitId, expect: &[(&str, &[u8])]) {
    let tree = l.read_commit(c).unwrap().tree;
    let files = l.walk_files(&tree).unwrap();
    assert_eq!(files.len(), expect.len());
    for (name, bytes) in expect {
        let f = files.iter().find(|f| f.path == *name).unwrap();
        assert_eq!(f.id, ObjectId(*blake3::hash(bytes).as_bytes()));
        assert_eq!(&l.read_bytes(&f.id).unwrap(), bytes, "{name}");
    }
}

/// Every commit of `s` reads back as its bytes.
fn check_versions(l: &Ledger, s: &[(CommitId, Vec<u8>)]) {
    for (c, b) in s {
        check(l, c, &[("m.safetensors", b)]);
    }
}

/// [`check_versions`], and fsck finds nothing wrong.
fn check_series(l: &Ledger, s: &[(CommitId, Vec<u8>)]) {
    check_versions(l, s);
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
}

fn all_dtypes(rng: &mut Rng) -> Vec<T> {
    let mut ts = Vec::new();
    for (i, (d, w)) in DTYPES.iter().enumerate() {
        let shape = match i % 4 {
            0 => vec![7, 13],
            1 => vec![3, 5, 11],
            2 => vec![257],
            _ => vec![1, 1, 1, 999],
        };
        ts.push(tensor(rng, &format!("t.{d}"), d, *w, shape));
        ts.push(tensor(rng, &format!("empty.{d}"), d, *w, vec![0, 4]));
    }
    ts.push(tensor(rng, "scalar", "F32", 4, vec![]));
    ts
}

#[test]
fn every_dtype_round_trips_and_deltas() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let d = t.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let mut rng = Rng(7);
    let mut ts = all_dtypes(&mut rng);
    let mut history = Vec::new();
    for round in 0..4 {
        let bytes = safetensors(&ts);
        std::fs::write(d.join("model.safetensors"), &bytes).unwrap();
        let c = commit(&mut l, &d, &format!("r{round}"));
        history.push((c, bytes));
        perturb(&mut rng, &mut ts);
    }
    for (c, bytes) in &history {
        check(&l, c, &[("model.safetensors", bytes)]);
    }
    let st = l.stats().unwrap();
    assert!(st.delta_objects > 0, "later rounds are stored as deltas");
    assert!(st.delta_stored_bytes < st.delta_logical_bytes);
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
}

#[test]
fn layout_changes_fall_back_per_tensor() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let d = t.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let mut rng = Rng(11);
    let mut ts = vec![
        tensor(&mut rng, "a", "BF16", 2, vec![64, 64]),
        tensor(&mut rng, "b", "F32", 4, vec![1000]),
        tensor(&mut rng, "c", "F16", 2, vec![33, 3]),
        tensor(&mut rng, "d", "I64", 8, vec![5, 7]),
    ];
    let b0 = safetensors(&ts);
    std::fs::write(d.join("m.safetensors"), &b0).unwrap();
    let c0 = commit(&mut l, &d, "r0");
    perturb(&mut rng, &mut ts);
    ts[1].name = "b_renamed".into(); // renamed
    ts[2].shape = vec![3, 33]; // same bytes, other shape
    ts[3].dtype = "U64"; // other dtype
    ts.remove(0); // removed
    ts.push(tensor(&mut rng, "added", "BF16", 2, vec![64, 64]));
    ts.push(tensor(&mut rng, "a2", "BF16", 2, vec![64, 64]));
    let b1 = safetensors(&ts);
    std::fs::write(d.join("m.safetensors"), &b1).unwrap();
    let c1 = commit(&mut l, &d, "r1");
    check(&l, &c0, &[("m.safetensors", &b0)]);
    check(&l, &c1, &[("m.safetensors", &b1)]);
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
}

#[test]
fn non_safetensors_and_malformed_headers_are_stored_plainly() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let d = t.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let mut rng = Rng(3);
    let good = safetensors(&[tensor(&mut rng, "x", "BF16", 2, vec![4096])]);
    let mut cases: Vec<(String, Vec<u8>)> = vec![("plain.bin".into(), rng.bytes(50_000))];
    // header length beyond the file
    let mut m = good.clone();
    m[0..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    cases.push(("huge_len.safetensors".into(), m));
    // offsets beyond the data
    let bad = br#"{"x":{"dtype":"BF16","shape":[4096],"data_offsets":[0,999999]}}"#;
    let mut m = (bad.len() as u64).to_le_bytes().to_vec();
    m.extend_from_slice(bad);
    m.extend_from_slice(&rng.bytes(8192));
    cases.push(("bad_offsets.safetensors".into(), m));
    // shape does not match the byte range
    let bad = br#"{"x":{"dtype":"BF16","shape":[4095],"data_offsets":[0,8192]}}"#;
    let mut m = (bad.len() as u64).to_le_bytes().to_vec();
    m.extend_from_slice(bad);
    m.extend_from_slice(&rng.bytes(8192));
    cases.push(("bad_shape.safetensors".into(), m));
    // not JSON, unknown dtype, overlapping tensors
    for (n, h) in [
        ("not_json", &b"{not json at all}"[..]),
        ("unknown_dtype", br#"{"x":{"dtype":"F4","shape":[8192],"data_offsets":[0,8192]}}"#),
        ("overlap", br#"{"x":{"dtype":"U8","shape":[8192],"data_offsets":[0,8192]},"y":{"dtype":"U8","shape":[10],"data_offsets":[5,15]}}"#),
    ] {
        let mut m = (h.len() as u64).to_le_bytes().to_vec();
        m.extend_from_slice(h);
        m.extend_from_slice(&rng.bytes(8192));
        cases.push((format!("{n}.safetensors"), m));
    }
    for (n, b) in &cases {
        std::fs::write(d.join(n), b).unwrap();
    }
    let c = commit(&mut l, &d, "r0");
    for (n, b) in cases.iter_mut() {
        b[100] ^= 0xff; // second round: still fine
        std::fs::write(d.join(n.as_str()), &b).unwrap();
    }
    let c2 = commit(&mut l, &d, "r1");
    let expect: Vec<(&str, &[u8])> = cases
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    check(&l, &c2, &expect);
    let _ = c;
    assert_eq!(l.stats().unwrap().delta_objects, 0);
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
}

/// A series of `rounds` commits of one perturbed model; returns commits and bytes.
fn series(l: &mut Ledger, d: &Path, rounds: usize) -> Vec<(CommitId, Vec<u8>)> {
    series_with(l, d, rounds, perturb)
}

/// [`series`] with another perturbation between rounds.
fn series_with(
    l: &mut Ledger,
    d: &Path,
    rounds: usize,
    perturb: fn(&mut Rng, &mut [T]),
) -> Vec<(CommitId, Vec<u8>)> {
    std::fs::create_dir_all(d).unwrap();
    let mut rng = Rng(99);
    let mut ts = vec![
        tensor(&mut rng, "w1", "BF16", 2, vec![128, 64]),
        tensor(&mut rng, "w2", "F32", 4, vec![2000]),
    ];
    let mut out = Vec::new();
    for r in 0..rounds {
        let b = safetensors(&ts);
        std::fs::write(d.join("m.safetensors"), &b).unwrap();
        out.push((commit(l, d, &format!("r{r}")), b));
        perturb(&mut rng, &mut ts);
    }
    out
}

/// Delta-stored chunks of the files reachable from HEAD.
fn delta_rows(l: &Ledger) -> Vec<ObjectId> {
    let mut out = Vec::new();
    let tip = l.resolve("HEAD").unwrap();
    let mut c = Some(tip);
    while let Some(cid) = c {
        let commit = l.read_commit(&cid).unwrap();
        for f in l.walk_files(&commit.tree).unwrap() {
            if let Some(Location::Chunked { list }) = l.locate(&f.id).unwrap().map(|r| r.location) {
                for ch in l.read_chunk_list(&list).unwrap().chunks {
                    if let Some(r) = l.locate(&ch.id).unwrap() {
                        if let Location::Delta { .. } = r.location {
                            out.push(ch.id);
                        }
                    }
                }
            }
        }
        c = commit.parents.first().copied();
    }
    out
}

/// Change one element byte in 500 (cheap sparse deltas: one cost unit each).
fn perturb_lightly(rng: &mut Rng, ts: &mut [T]) {
    for t in ts {
        for b in t.data.iter_mut() {
            if rng.next().is_multiple_of(500) {
                *b ^= 1 << (rng.next() % 8);
            }
        }
    }
}

/// Change the low byte of every element, like a large learning rate moves
/// every weight a little (dense deltas of a third of the raw size or more).
fn perturb_all(rng: &mut Rng, ts: &mut [T]) {
    for t in ts {
        let w = t.data.len() / t.shape.iter().product::<usize>().max(1);
        for e in t.data.chunks_exact_mut(w) {
            e[0] ^= 1 + (rng.next() % 255) as u8;
        }
    }
}

/// (delta depth, chain cost) of every chunk of every file of `commits`,
/// the cost as FORMAT.md §12.2 defines it.
/// Every piece (chunk) id of every chunked file of `commits`, in order.
fn pieces(l: &Ledger, commits: &[(CommitId, Vec<u8>)]) -> Vec<ObjectId> {
    let mut out = Vec::new();
    for (c, _) in commits {
        let tree = l.read_commit(c).unwrap().tree;
        for f in l.walk_files(&tree).unwrap() {
            let Some(Location::Chunked { list }) = l.locate(&f.id).unwrap().map(|r| r.location)
            else {
                panic!("large file is chunked");
            };
            out.extend(
                l.read_chunk_list(&list)
                    .unwrap()
                    .chunks
                    .into_iter()
                    .map(|ch| ch.id),
            );
        }
    }
    out
}

fn chains(l: &Ledger, commits: &[(CommitId, Vec<u8>)]) -> Vec<(usize, u64)> {
    pieces(l, commits)
        .into_iter()
        .map(|id| {
            let (mut depth, mut cost, mut cur) = (0, 0u64, id);
            while let Some(row) = l.locate(&cur).unwrap() {
                let Location::Delta {
                    base, stored_len, ..
                } = row.location
                else {
                    break;
                };
                depth += 1;
                assert!(depth <= 64, "the delta chain of {id} loops");
                cost += (stored_len * 10).div_ceil(row.raw_len.max(1)).max(1);
                cur = base;
            }
            (depth, cost)
        })
        .collect()
}

#[test]
fn chain_depth_is_bounded_by_keyframes() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    l.config.delta_max_depth = 2;
    let s = series_with(&mut l, &t.path().join("d"), 7, perturb_lightly);
    let c = chains(&l, &s);
    assert_eq!(
        c.iter().map(|x| x.0).max(),
        Some(2),
        "sparse chains reach the limit"
    );
    assert!(c.iter().all(|x| x.1 <= 2), "and never exceed it: {c:?}");
    check_versions(&l, &s);
}

#[test]
fn dense_deltas_count_more_toward_the_limit() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    assert_eq!(l.config.delta_max_depth, 9, "the default");
    let s = series_with(&mut l, &t.path().join("d"), 8, perturb_all);
    let c = chains(&l, &s);
    let deepest = c.iter().map(|x| x.0).max().unwrap();
    assert!(deepest >= 1, "dense deltas are still stored: {c:?}");
    assert!(
        deepest <= 3,
        "but keyframes come sooner than every 10 rounds: {c:?}"
    );
    assert!(
        c.iter().all(|x| x.1 <= 9),
        "no chain costs more than the limit: {c:?}"
    );
    check_versions(&l, &s);
}

/// Pack segments, oldest first (each commit writes its own segment).
fn packs_by_age(l: &Ledger) -> Vec<std::path::PathBuf> {
    let mut packs: Vec<_> = std::fs::read_dir(l.dir().join("packs"))
        .unwrap()
        .flatten()
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    packs.sort();
    packs.into_iter().map(|p| p.1).collect()
}

#[test]
fn corrupted_delta_is_detected_with_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let s = series(&mut l, &t.path().join("d"), 2);
    let deltas = delta_rows(&l);
    assert!(!deltas.is_empty());
    let id = deltas[0];
    let (_, off, _) = l.locate(&id).unwrap().unwrap().location.record().unwrap();
    let path = packs_by_age(&l).pop().unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .open(&path)
        .unwrap();
    // A byte of the plane table (after the statistics), as the header
    // says: the frame lengths no longer add up.
    let mut head = vec![0u8; 200];
    let n = f.read_at(&mut head, off + 80).unwrap();
    let (h, _) = bat_ledger::delta::PlanesHeader::decode_prefix(&head[..n]).unwrap();
    assert!(h.stats.is_some());
    let mut b = [0u8; 1];
    let at = off + 80 + h.encoded_len() as u64 + 2;
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], at).unwrap();
    let tree = l.read_commit(&s[1].0).unwrap().tree;
    let file = l.walk_files(&tree).unwrap()[0].id;
    match l.read_bytes(&file) {
        Err(Error::Corrupt { id: bad, pack, .. }) => {
            assert_eq!(bad, id);
            assert!(path.ends_with(&pack));
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let rep = l.fsck(&NoProgress, &no()).unwrap();
    assert!(!rep.ok());
    // the older round still reads
    check(&l, &s[0].0, &[("m.safetensors", &s[0].1)]);
}

#[test]
fn a_missing_pack_is_named_by_the_read_that_needs_it() {
    // Reads hint the kernel to read the records of the pieces ahead
    // (`prefetch_chain`); a pack that cannot be opened there must still be
    // reported by the read itself, naming the pack, not skipped or panicked on.
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let s = series(&mut l, &t.path().join("d"), 3);
    assert!(!delta_rows(&l).is_empty());
    let oldest = packs_by_age(&l)[0].clone();
    std::fs::remove_file(&oldest).unwrap();
    // A new handle: this one may hold the pack open from the commits.
    drop(l);
    let l = Ledger::open(&t.path().join(".bat")).unwrap();
    let tree = l.read_commit(&s[2].0).unwrap().tree;
    let file = l.walk_files(&tree).unwrap()[0].id;
    match l.read_bytes_to(&file, &mut std::io::sink(), &no()) {
        Err(Error::Corrupt { pack, reason, .. }) => {
            assert!(oldest.ends_with(&pack), "{pack}");
            assert!(reason.contains("cannot open pack file"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn corrupted_or_missing_base_is_detected() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let s = series(&mut l, &t.path().join("d"), 2);
    let did = delta_rows(&l)[0];
    let Some(Location::Delta { base, .. }) = l.locate(&did).unwrap().map(|r| r.location) else {
        panic!()
    };
    // corrupt the base record (in the first, oldest pack)
    let row = l.locate(&base).unwrap().unwrap();
    let (_, off, _) = row.location.record().unwrap();
    let path = packs_by_age(&l)[0].clone();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .read(true)
        .open(&path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off + 90).unwrap();
    f.write_all_at(&[b[0] ^ 0x01], off + 90).unwrap();
    let tree = l.read_commit(&s[1].0).unwrap().tree;
    let file = l.walk_files(&tree).unwrap()[0].id;
    match l.read_bytes(&file) {
        Err(Error::Corrupt { id, .. }) => assert_eq!(id, base, "the damaged base is named"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(!l.fsck(&NoProgress, &no()).unwrap().ok());
    // A next round whose base chain runs through the damaged record is still
    // recorded: those pieces are stored whole instead of as deltas on bad bytes.
    let mut next = s[1].1.clone();
    let data_at = 8 + u64::from_le_bytes(next[..8].try_into().unwrap()) as usize;
    for i in (data_at..next.len()).step_by(7) {
        next[i] ^= 0x01;
    }
    let d = t.path().join("d");
    std::fs::write(d.join("m.safetensors"), &next).unwrap();
    let c = commit(&mut l, &d, "after damage");
    check(&l, &c, &[("m.safetensors", &next)]);
    let tree = l.read_commit(&c).unwrap().tree;
    let Some(Location::Chunked { list }) = l
        .locate(&l.walk_files(&tree).unwrap()[0].id)
        .unwrap()
        .map(|r| r.location)
    else {
        panic!("large file is chunked")
    };
    let pieces = l.read_chunk_list(&list).unwrap().chunks;
    let on_damaged = pieces.iter().filter(|p| {
        let mut cur = p.id;
        while let Some(Location::Delta { base: b, .. }) =
            l.locate(&cur).unwrap().map(|r| r.location)
        {
            if b == base {
                return true;
            }
            cur = b;
        }
        false
    });
    assert_eq!(
        on_damaged.count(),
        0,
        "no new delta rests on the damaged record"
    );
}

#[test]
fn gc_keeps_bases_and_rebuild_restores_delta_rows() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let s = series(&mut l, &t.path().join("d"), 4);
    let before = l.stats().unwrap();
    assert!(before.delta_objects > 0);
    drop(l);
    let mut l = Ledger::open_with(&t.path().join(".bat"), LockMode::Exclusive).unwrap();
    l.gc(&NoProgress, &no()).unwrap();
    check_versions(&l, &s);
    l.rebuild_catalog().unwrap();
    let after = l.stats().unwrap();
    assert_eq!(after.delta_objects, before.delta_objects);
    check_series(&l, &s);
}

#[test]
fn delta_disabled_stores_no_deltas() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    l.config.delta = false;
    let s = series(&mut l, &t.path().join("d"), 3);
    assert_eq!(l.stats().unwrap().delta_objects, 0);
    check_versions(&l, &s);
}

/// Chunk ids of the large file in commit `c`.
fn chunk_ids(l: &Ledger, c: &CommitId) -> Vec<ObjectId> {
    let tree = l.read_commit(c).unwrap().tree;
    let f = l.walk_files(&tree).unwrap()[0].id;
    let Some(Location::Chunked { list }) = l.locate(&f).unwrap().map(|r| r.location) else {
        panic!("large file is chunked");
    };
    l.read_chunk_list(&list)
        .unwrap()
        .chunks
        .iter()
        .map(|c| c.id)
        .collect()
}

#[test]
fn an_explicit_delta_base_replaces_the_parent() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let d = t.path().join("d");
    // main: r0, r1 (perturbed). Then a file derived from r0, committed on
    // main with r0 named as its base: its deltas point into r0, not r1.
    let s = series(&mut l, &d, 2);
    // rebuild r0's tensors exactly as `series` made them
    let mut r = Rng(99);
    let mut ts = vec![
        tensor(&mut r, "w1", "BF16", 2, vec![128, 64]),
        tensor(&mut r, "w2", "F32", 4, vec![2000]),
    ];
    assert_eq!(safetensors(&ts), s[0].1, "r0 rebuilt");
    let mut rng = Rng(7);
    perturb(&mut rng, &mut ts);
    let b = safetensors(&ts);
    std::fs::write(d.join("m.safetensors"), &b).unwrap();
    let mut req = CommitRequest::new("from r0");
    req.delta_base = Some(s[0].0);
    let c = l.commit_dir(&d, &req, &NoProgress, &no()).unwrap().commit;
    let r0: std::collections::HashSet<ObjectId> = chunk_ids(&l, &s[0].0).into_iter().collect();
    let r1: std::collections::HashSet<ObjectId> = chunk_ids(&l, &s[1].0).into_iter().collect();
    let mut bases = 0;
    for ch in chunk_ids(&l, &c) {
        if let Some(Location::Delta { base, .. }) = l.locate(&ch).unwrap().map(|r| r.location) {
            assert!(r0.contains(&base), "base {base} is a piece of r0");
            assert!(!r1.contains(&base), "base {base} is not a piece of r1");
            bases += 1;
        }
    }
    assert!(bases >= 2, "the tensor pieces are deltas against r0");
    check(&l, &c, &[("m.safetensors", &b)]);
    assert_eq!(
        l.read_commit(&c).unwrap().parents,
        vec![s[1].0],
        "history is unchanged"
    );
}

/// The delta depth of every tensor piece of each commit, in commit order
/// (the first chunk, the safetensors header, is never a delta).
fn depths(l: &Ledger, commits: &[(CommitId, Vec<u8>)]) -> Vec<Vec<usize>> {
    commits
        .iter()
        .map(|c| {
            chains(l, std::slice::from_ref(c))
                .iter()
                .skip(1)
                .map(|x| x.0)
                .collect()
        })
        .collect()
}

/// The statistics reading of every delta record among the commits' pieces.
fn readings(l: &Ledger, commits: &[(CommitId, Vec<u8>)]) -> Vec<bat_ledger::delta::StatsReading> {
    pieces(l, commits)
        .iter()
        .filter_map(|id| l.delta_record_stats(id).unwrap())
        .map(|s| s.stats.reading)
        .collect()
}

/// A ledger holding `rounds` commits of a lightly changed model (one
/// forward delta chain per piece), reopened with the exclusive lock gc
/// needs.
fn lightly_changed(rounds: usize) -> (tempfile::TempDir, Ledger, Vec<(CommitId, Vec<u8>)>) {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let s = series_with(&mut l, &t.path().join("d"), rounds, perturb_lightly);
    drop(l);
    let l = exclusive(t.path());
    (t, l, s)
}

fn exclusive(t: &Path) -> Ledger {
    let mut l = Ledger::open_with(&t.join(".bat"), LockMode::Exclusive).unwrap();
    l.config.chunk_threshold = 1024;
    l
}

#[test]
fn gc_moves_each_chains_keyframe_to_its_middle() {
    let (_t, mut l, s) = lightly_changed(10);
    let before = depths(&l, &s);
    assert!(
        before
            .iter()
            .enumerate()
            .all(|(i, v)| v.iter().all(|&x| x == i)),
        "written as one forward chain per piece: {before:?}"
    );
    let stored = l.stats().unwrap().record_stored_bytes;
    let readings_before = readings(&l, &s);
    let rep = l.gc(&NoProgress, &no()).unwrap();
    // Re-encoded deltas keep the statistics reading the commit chose
    // from each piece's dtype.
    let readings_after = readings(&l, &s);
    assert_eq!(readings_after.len(), readings_before.len());
    assert!(
        readings_after.iter().all(|r| readings_before.contains(r)),
        "{readings_before:?} then {readings_after:?}"
    );
    assert!(!readings_after.contains(&bat_ledger::delta::StatsReading::All));
    let pieces = before[0].len() as u64;
    assert_eq!(rep.rerooted_trees, pieces, "{rep:?}");
    assert_eq!(rep.rerooted_records, 6 * pieces, "r00..r05 re-encoded");
    let after = depths(&l, &s);
    let want = [5, 4, 3, 2, 1, 0, 1, 2, 3, 4];
    for (i, v) in after.iter().enumerate() {
        assert!(v.iter().all(|&x| x == want[i]), "r{i}: {v:?}");
    }
    let now = l.stats().unwrap();
    assert_eq!(now.delta_objects, 9 * pieces);
    let ratio = now.record_stored_bytes as f64 / stored as f64;
    assert!(
        (0.97..1.03).contains(&ratio),
        "reversed links take the space they took: {ratio}"
    );
    check_series(&l, &s);
    let again = l.gc(&NoProgress, &no()).unwrap();
    assert_eq!(again.rerooted_trees, 0, "a centred tree stays: {again:?}");
    l.rebuild_catalog().unwrap();
    assert_eq!(depths(&l, &s), after, "rebuild reads the new bases back");
}

#[test]
fn commits_after_a_reroot_extend_the_shallower_chain() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    l.config.delta_max_depth = 4;
    let d = t.path().join("d");
    let mut s = series_with(&mut l, &d, 5, perturb_lightly);
    drop(l);
    let mut l = exclusive(t.path());
    l.config.delta_max_depth = 4;
    l.gc(&NoProgress, &no()).unwrap();
    assert!(depths(&l, &s)[4].iter().all(|&x| x == 2), "tip at depth 2");
    // Three more rounds chain on at depths 3 and 4, then a keyframe.
    let mut rng = Rng(7);
    let mut ts = vec![
        tensor(&mut rng, "w1", "BF16", 2, vec![128, 64]),
        tensor(&mut rng, "w2", "F32", 4, vec![2000]),
    ];
    let last = s.last().unwrap().1.clone();
    let header = u64::from_le_bytes(last[..8].try_into().unwrap()) as usize + 8;
    let (a, b) = last[header..].split_at(ts[0].data.len());
    ts[0].data = a.to_vec();
    ts[1].data = b.to_vec();
    for r in 5..8 {
        perturb_lightly(&mut rng, &mut ts);
        let bytes = safetensors(&ts);
        std::fs::write(d.join("m.safetensors"), &bytes).unwrap();
        s.push((commit(&mut l, &d, &format!("r{r}")), bytes));
    }
    let v = depths(&l, &s);
    assert!(v[5].iter().all(|&x| x == 3), "{v:?}");
    assert!(v[6].iter().all(|&x| x == 4), "{v:?}");
    assert!(v[7].iter().all(|&x| x == 0), "{v:?}");
    check_series(&l, &s);
}

#[test]
fn keep_chains_and_dry_runs_leave_chains_alone() {
    let (_t, mut l, s) = lightly_changed(6);
    let before = depths(&l, &s);
    let dry = bat_ledger::GcOptions {
        dry_run: true,
        ..Default::default()
    };
    let rep = l.gc_with(&dry, &NoProgress, &no()).unwrap();
    assert!(rep.rerooted_trees > 0, "a dry run says what it would do");
    assert_eq!(depths(&l, &s), before);
    let keep = bat_ledger::GcOptions {
        keep_chains: true,
        ..Default::default()
    };
    let rep = l.gc_with(&keep, &NoProgress, &no()).unwrap();
    assert_eq!(rep.rerooted_trees, 0);
    assert_eq!(depths(&l, &s), before);
}

#[test]
fn dense_chains_stay_within_the_cost_limit_after_a_reroot() {
    let t = tempfile::tempdir().unwrap();
    let mut l = small_ledger(t.path());
    let s = series_with(&mut l, &t.path().join("d"), 8, perturb_all);
    drop(l);
    let mut l = exclusive(t.path());
    l.gc(&NoProgress, &no()).unwrap();
    let c = chains(&l, &s);
    assert!(c.iter().all(|x| x.1 <= 9), "{c:?}");
    check_versions(&l, &s);
}

/// Cancels when a phase whose label contains `at` starts.
struct CancelAt<'a>(&'a str, &'a AtomicBool);

impl bat_ledger::Progress for CancelAt<'_> {
    fn start(&self, label: &str, _total: Option<u64>) {
        if label.contains(self.0) {
            self.1.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}

#[test]
fn an_interrupted_reroot_leaves_the_old_chains() {
    let (_t, mut l, s) = lightly_changed(6);
    let before = depths(&l, &s);
    let cancel = no();
    let err = l
        .gc(&CancelAt("re-rooting", &cancel), &cancel)
        .expect_err("cancelled");
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    assert_eq!(depths(&l, &s), before);
    check_series(&l, &s);
    // The next gc removes the unreferenced segment and re-roots.
    let rep = l.gc(&NoProgress, &no()).unwrap();
    assert!(rep.rerooted_trees > 0);
    check_versions(&l, &s);
}

#[test]
fn rebuild_with_old_and_rerooted_records_side_by_side_keeps_chains_finite() {
    let (t, mut l, s) = lightly_changed(10);
    let packs = t.path().join(".bat/packs");
    let old: Vec<(std::path::PathBuf, Vec<u8>)> = std::fs::read_dir(&packs)
        .unwrap()
        .flatten()
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    assert!(l.gc(&NoProgress, &no()).unwrap().rerooted_trees > 0);
    // A crash after gc's catalog switch, before it deleted the old packs:
    // both forms of every re-rooted record are on disk.
    for (p, bytes) in &old {
        std::fs::write(p, bytes).unwrap();
    }
    l.rebuild_catalog().unwrap();
    let d = depths(&l, &s);
    assert!(d.iter().flatten().all(|&x| x <= 9), "{d:?}");
    check_series(&l, &s);
}

#[test]
fn gc_after_every_commit_keeps_twice_the_versions_per_keyframe() {
    let t = tempfile::tempdir().unwrap();
    drop(Ledger::init(t.path()).unwrap());
    let mut l = exclusive(t.path());
    l.config.delta_max_depth = 3;
    let d = t.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    let mut rng = Rng(99);
    let mut ts = vec![
        tensor(&mut rng, "w1", "BF16", 2, vec![128, 64]),
        tensor(&mut rng, "w2", "F32", 4, vec![2000]),
    ];
    let mut s = Vec::new();
    for r in 0..10 {
        let b = safetensors(&ts);
        std::fs::write(d.join("m.safetensors"), &b).unwrap();
        s.push((commit(&mut l, &d, &format!("r{r}")), b));
        l.gc(&NoProgress, &no()).unwrap();
        perturb_lightly(&mut rng, &mut ts);
    }
    let v = depths(&l, &s);
    assert!(v.iter().flatten().all(|&x| x <= 3), "{v:?}");
    // Seven versions (depths 3 2 1 0 1 2 3) per keyframe instead of four.
    let keyframes: Vec<usize> = v
        .iter()
        .map(|p| p.iter().filter(|&&x| x == 0).count())
        .collect();
    assert_eq!(
        keyframes.iter().filter(|&&k| k > 0).count(),
        2,
        "r00..r06 share one keyframe, r07..r09 another: {v:?}"
    );
    check_series(&l, &s);
}
