//! Export and import of objects in wire form: a multi-commit ledger with
//! chunked, delta-stored and small files crosses into an empty ledger in
//! small batches; every kind of malicious input is refused and leaves the
//! receiving ledger byte-identical.

use crate::common;

use std::collections::HashSet;
use std::path::Path;

use bat_ledger::remote::digest::FileDigests;
use bat_ledger::remote::wire::{decode_stream, encode_stream};
use bat_ledger::remote::{ImportPipeline, ImportStats, WireBody, WireObject};
use bat_ledger::{
    CommitId, Error, Kind, Ledger, Location, Mode, NoProgress, ObjectId, Tree, TreeEntry, TreeId,
};
use common::{no, series_ledger, state};

/// Everything reachable from `c`, bottom-up: bases before deltas, lists
/// and chunks before chunked files, entries before trees, parents first.
fn closure(l: &Ledger, c: CommitId) -> Vec<ObjectId> {
    fn bases(l: &Ledger, id: ObjectId, out: &mut Vec<ObjectId>, seen: &mut HashSet<ObjectId>) {
        if let Some(b) = l.delta_base(&id).unwrap() {
            if seen.insert(b) {
                bases(l, b, out, seen);
                out.push(b);
            }
        }
    }
    fn tree(l: &Ledger, t: ObjectId, out: &mut Vec<ObjectId>, seen: &mut HashSet<ObjectId>) {
        if !seen.insert(t) {
            return;
        }
        for e in l.read_tree(&TreeId(t)).unwrap().entries {
            if e.mode == Mode::Tree {
                tree(l, e.id, out, seen);
                continue;
            }
            if !seen.insert(e.id) {
                continue;
            }
            if let Location::Chunked { list } = l.locate(&e.id).unwrap().unwrap().location {
                if seen.insert(list) {
                    out.push(list);
                }
                for ch in l.read_chunk_list(&list).unwrap().chunks {
                    if seen.insert(ch.id) {
                        bases(l, ch.id, out, seen);
                        out.push(ch.id);
                    }
                }
            } else {
                bases(l, e.id, out, seen);
            }
            out.push(e.id);
        }
        out.push(t);
    }
    fn commit(l: &Ledger, c: CommitId, out: &mut Vec<ObjectId>, seen: &mut HashSet<ObjectId>) {
        if !seen.insert(c.0) {
            return;
        }
        let k = l.read_commit(&c).unwrap();
        for p in &k.parents {
            commit(l, *p, out, seen);
        }
        tree(l, k.tree.0, out, seen);
        out.push(c.0);
    }
    let mut out = Vec::new();
    commit(l, c, &mut out, &mut HashSet::new());
    out
}

fn export_all(l: &Ledger, ids: &[ObjectId]) -> Vec<WireObject> {
    ids.iter().map(|i| l.export_wire(i).unwrap()).collect()
}

#[test]
fn a_series_crosses_in_small_batches_and_verifies() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 4, 11);
    let tip = *commits.last().unwrap();
    let ids = closure(&a, tip);
    let objs = export_all(&a, &ids);
    assert!(objs
        .iter()
        .any(|o| matches!(o.body, WireBody::Delta { .. })));
    assert!(objs
        .iter()
        .any(|o| matches!(o.body, WireBody::Chunked { .. })));
    // Through the framed stream and back.
    let objs = decode_stream(&encode_stream(&objs)).unwrap();
    let mut b = Ledger::init(&t.path().join("b")).unwrap();
    let mut stored = 0;
    for batch in objs.chunks(3) {
        stored += b.import_wire(batch.to_vec()).unwrap().stored;
    }
    assert_eq!(stored, ids.len() as u64);
    // A second import stores nothing.
    let again = b.import_wire(objs.clone()).unwrap();
    assert_eq!((again.stored, again.skipped), (0, ids.len() as u64));
    b.update_ref("refs/heads/main", None, Some(tip), "import")
        .unwrap();
    let rep = b.fsck(&NoProgress, &no()).unwrap();
    assert!(rep.ok(), "{:?}", rep.problems);
    assert_eq!(rep.commits_reachable, 4);
    // Same files, same storage form (deltas stay deltas).
    for c in &commits {
        let fa = a.walk_files(&a.read_commit(c).unwrap().tree).unwrap();
        let fb = b.walk_files(&b.read_commit(c).unwrap().tree).unwrap();
        assert_eq!(fa, fb);
        for f in fb {
            let mut x = Vec::new();
            b.read_bytes_to(&f.id, &mut x, &no()).unwrap();
            assert_eq!(ObjectId::of_bytes(&x), f.id);
        }
    }
    let deltas = ids
        .iter()
        .filter(|i| {
            matches!(
                b.locate(i).unwrap().unwrap().location,
                Location::Delta { .. }
            )
        })
        .count();
    assert!(deltas > 0);
    assert_eq!(b.stats().unwrap().commits, 4);
}

/// Import `batch` into a fresh copy of the receiving ledger state and
/// check it fails with a message containing `want`, leaving every file of
/// `.bat` as it was.
fn refused(b: &mut Ledger, batch: Vec<WireObject>, want: &str) {
    let before = state(b.dir());
    let e = b.import_wire(batch).expect_err("must be refused");
    assert!(
        e.to_string().contains(want),
        "expected {want:?} in error: {e}"
    );
    assert!(matches!(e, Error::Received { .. }), "{e:?}");
    assert_eq!(
        state(b.dir()),
        before,
        "ledger changed after refusing {want}"
    );
}

#[test]
fn malicious_objects_are_refused_and_change_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 2, 5);
    let ids = closure(&a, commits[1]);
    let objs = export_all(&a, &ids);
    let mut b = Ledger::init(&t.path().join("b")).unwrap();
    // Seed b with the first commit so "unchanged" covers a non-empty ledger.
    let first = closure(&a, commits[0]);
    b.import_wire(export_all(&a, &first)).unwrap();
    let rest: Vec<WireObject> = objs
        .iter()
        .filter(|o| !first.contains(&o.id))
        .cloned()
        .collect();

    // 1. A flipped payload byte (in the last record, so earlier ones verify).
    let mut bad = rest.clone();
    let i = bad
        .iter()
        .rposition(|o| matches!(o.body, WireBody::Record { .. } | WireBody::Delta { .. }))
        .unwrap();
    if let WireBody::Record { payload, .. } | WireBody::Delta { payload, .. } = &mut bad[i].body {
        let n = payload.len() / 2;
        payload[n] ^= 0x10;
    }
    let before = state(b.dir());
    assert!(b.import_wire(bad).is_err());
    assert_eq!(state(b.dir()), before);

    // 2. Right bytes, wrong id.
    let mut bad = rest.clone();
    let i = bad.iter().position(|o| o.kind == Kind::Tree).unwrap();
    bad[i].id.0[0] ^= 1;
    refused(&mut b, bad, "does not match the object id");

    // 3. A decompression bomb: 64 MiB of zeros claiming to be 100 bytes.
    let zeros = vec![0u8; 64 << 20];
    let payload = zstd::bulk::compress(&zeros, 1).unwrap();
    let bomb = WireObject {
        id: ObjectId::of_bytes(&zeros[..100]),
        kind: Kind::Bytes,
        raw_len: 100,
        body: WireBody::Record {
            compression: 1,
            payload,
        },
    };
    refused(&mut b, vec![bomb], "declared 100 bytes");

    // 4. A tree entry named "..": the id is right for the bytes, the name
    //    is not acceptable.
    let blob = b"x".to_vec();
    let mut enc = Tree::new(vec![TreeEntry {
        name: "aa".into(),
        mode: Mode::File,
        id: ObjectId::of_bytes(&blob),
        size: 1,
    }])
    .unwrap()
    .encode();
    let at = enc.windows(2).position(|w| w == b"aa").unwrap();
    enc[at..at + 2].copy_from_slice(b"..");
    let evil = WireObject {
        id: Kind::Tree.id_of(&enc),
        kind: Kind::Tree,
        raw_len: enc.len() as u64,
        body: WireBody::Record {
            compression: 0,
            payload: enc,
        },
    };
    refused(&mut b, vec![evil], "not a valid tree");

    // 5. A delta whose base is neither stored nor sent.
    let mut bad: Vec<WireObject> = rest.clone();
    let i = bad
        .iter()
        .position(|o| matches!(o.body, WireBody::Delta { .. }))
        .unwrap();
    let mut d = bad.remove(i);
    if let WireBody::Delta { base, .. } = &mut d.body {
        *base = ObjectId([3; 32]);
    }
    refused(&mut b, vec![d], "another delta base");
    let d = rest
        .iter()
        .find(|o| matches!(o.body, WireBody::Delta { .. }))
        .unwrap()
        .clone();
    if let WireBody::Delta { base, .. } = &d.body {
        if !b.contains(base).unwrap() {
            refused(&mut b, vec![d.clone()], "neither stored nor earlier");
        }
    }

    // 6. A chunked file whose chunks do not hash to its id.
    let alias = rest
        .iter()
        .find(|o| matches!(o.body, WireBody::Chunked { .. }))
        .unwrap();
    let WireBody::Chunked { list } = alias.body else {
        unreachable!()
    };
    let list_obj = rest.iter().find(|o| o.id == list).unwrap().clone();
    let mut upto: Vec<WireObject> = rest
        .iter()
        .take_while(|o| o.id != alias.id)
        .cloned()
        .collect();
    let mut liar = alias.clone();
    liar.id = ObjectId([9; 32]);
    upto.push(liar);
    refused(&mut b, upto, "describes another file");
    let _ = list_obj;

    // 7. A commit whose tree was never sent.
    let ci = rest.iter().position(|o| o.kind == Kind::Commit).unwrap();
    refused(&mut b, vec![rest[ci].clone()], "tree of the commit");

    // After all that, the genuine objects still import and verify.
    b.import_wire(rest).unwrap();
    b.update_ref("refs/heads/main", None, Some(commits[1]), "import")
        .unwrap();
    assert!(b.fsck(&NoProgress, &no()).unwrap().ok());
}

/// How a test imports one batch: `import_wire_with` or
/// `import_wire_parallel`.
type Import =
    fn(&mut Ledger, Vec<WireObject>, Option<&FileDigests>) -> bat_ledger::Result<ImportStats>;

/// A fresh ledger at `dir` that imports `objs` (one per object) in batches
/// of `size` with `import`, files checked from their pieces as `bat serve`
/// does: every object is stored once, and with `tip` as main the ledger
/// is fsck-clean.
fn cross(dir: &Path, objs: &[WireObject], size: usize, tip: CommitId, import: Import) -> Ledger {
    let mut b = Ledger::init(dir).unwrap();
    let mut digests = FileDigests::new();
    let mut stored = 0;
    for batch in objs.chunks(size) {
        for o in batch {
            digests.add_received(o);
        }
        stored += import(&mut b, batch.to_vec(), Some(&digests))
            .unwrap()
            .stored;
    }
    assert_eq!(stored, objs.len() as u64);
    b.update_ref("refs/heads/main", None, Some(tip), "import")
        .unwrap();
    let rep = b.fsck(&NoProgress, &no()).unwrap();
    assert!(rep.ok(), "{:?}", rep.problems);
    b
}

/// As `bat serve` imports a push: chunked files checked from the pieces
/// as they were imported, in earlier batches (their lists seen first). The series arrives whole and fsck-clean; a chunked
/// file whose list names its own pieces in another order (so every piece
/// verifies, but not the file) is refused.
#[test]
fn a_series_crosses_and_files_verify_from_their_pieces() {
    use bat_ledger::ChunkList;
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 4, 23);
    let tip = *commits.last().unwrap();
    let ids = closure(&a, tip);
    let objs = export_all(&a, &ids);
    cross(&t.path().join("b"), &objs, 7, tip, Ledger::import_wire_with);

    // A forged list: the first chunked file's pieces, first two swapped.
    let (alias, list) = objs
        .iter()
        .find_map(|o| match o.body {
            WireBody::Chunked { list } => {
                let l = a.read_chunk_list(&list).unwrap();
                (l.chunks.len() >= 2 && l.chunks[0].id != l.chunks[1].id).then_some((o.clone(), l))
            }
            _ => None,
        })
        .expect("a chunked file of two distinct pieces");
    let mut chunks = list.chunks.clone();
    chunks.swap(0, 1);
    let forged = ChunkList { chunks, ..list };
    let raw = forged.encode();
    let forged = WireObject {
        id: Kind::ChunkList.id_of(&raw),
        kind: Kind::ChunkList,
        raw_len: raw.len() as u64,
        body: WireBody::Record {
            compression: bat_ledger::pack::COMPRESSION_NONE,
            payload: raw,
        },
    };
    let pieces: Vec<WireObject> = forged_pieces(&a, &forged);
    let lying = WireObject {
        body: WireBody::Chunked { list: forged.id },
        ..alias
    };
    let mut c = Ledger::init(&t.path().join("c")).unwrap();
    let mut digests = FileDigests::new();
    let mut batch = vec![forged];
    batch.extend(pieces);
    batch.push(lying);
    for o in &batch {
        digests.add_received(o);
    }
    let e = c.import_wire_with(batch, Some(&digests)).unwrap_err();
    assert!(e.to_string().contains("do not hash to the file id"), "{e}");
}

/// The pieces a chunk list names, with their delta bases first.
fn forged_pieces(a: &Ledger, list: &WireObject) -> Vec<WireObject> {
    let WireBody::Record { payload, .. } = &list.body else {
        unreachable!("built as a plain record")
    };
    let l = bat_ledger::ChunkList::decode(payload).unwrap();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for c in l.chunks {
        let mut chain = vec![c.id];
        while let Some(b) = a.delta_base(chain.last().unwrap()).unwrap() {
            chain.push(b);
        }
        for id in chain.into_iter().rev() {
            if seen.insert(id) {
                out.push(a.export_wire(&id).unwrap());
            }
        }
    }
    out
}

/// As `bat serve` imports an upload batch: pieces decoded and hashed on two
/// threads, then stored as one import. A series crosses whole, in batches
/// that hold several chains (so both threads have work), fsck-clean and in
/// the same storage form.
#[test]
fn a_series_crosses_with_its_pieces_verified_on_two_threads() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 4, 31);
    let tip = *commits.last().unwrap();
    let ids = closure(&a, tip);
    let objs = export_all(&a, &ids);
    let b = cross(
        &t.path().join("b"),
        &objs,
        40,
        tip,
        Ledger::import_wire_parallel,
    );
    same_storage_forms(&a, &b, &ids);
}

/// Every object of `ids` is a delta in `b` exactly where it is one in `a`.
fn same_storage_forms(a: &Ledger, b: &Ledger, ids: &[ObjectId]) {
    for id in ids {
        let (la, lb) = (
            a.locate(id).unwrap().unwrap().location,
            b.locate(id).unwrap().unwrap().location,
        );
        assert_eq!(
            matches!(la, Location::Delta { .. }),
            matches!(lb, Location::Delta { .. }),
            "{id} kept its storage form"
        );
    }
}

/// A batch whose pieces are verified on two threads is refused whole when
/// any one piece fails, on either thread (each piece spoilt in turn): no
/// object of it is stored, no catalog row added, no pack file left.
#[test]
fn a_refused_batch_verified_on_two_threads_stores_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 3, 37);
    let ids = closure(&a, commits[2]);
    let objs = export_all(&a, &ids);
    let pieces: Vec<usize> = objs
        .iter()
        .enumerate()
        .filter(|(_, o)| {
            o.kind == Kind::Bytes
                && matches!(o.body, WireBody::Record { .. } | WireBody::Delta { .. })
        })
        .map(|(i, _)| i)
        .collect();
    assert!(pieces.len() > 4, "several chains to split");
    assert!(objs
        .iter()
        .any(|o| matches!(o.body, WireBody::Delta { .. })));
    let mut b = Ledger::init(&t.path().join("b")).unwrap();
    let before = state(b.dir());
    for spoil in pieces {
        let mut batch = objs.clone();
        // Another id: every byte decodes, the hash does not match.
        batch[spoil].id = ObjectId::of_bytes(format!("not piece {spoil}").as_bytes());
        let mut digests = FileDigests::new();
        for o in &batch {
            digests.add_received(o);
        }
        let e = b
            .import_wire_parallel(batch.clone(), Some(&digests))
            .expect_err("a spoilt piece refuses the batch");
        assert!(matches!(e, Error::Received { .. }), "piece {spoil}: {e:?}");
        assert_eq!(state(b.dir()), before, "piece {spoil}: nothing written");
        for o in &batch {
            assert!(!b.contains(&o.id).unwrap(), "{} not catalogued", o.id);
        }
        assert_eq!(b.stats().unwrap().packs, 0, "no pack registered");
    }
    // The same batch unspoilt imports whole.
    let s = b.import_wire_parallel(objs.clone(), None).unwrap();
    assert_eq!(s.stored, ids.len() as u64);
}

/// A delta whose base is stored here decodes that base without hashing it
/// (the delta's own id check covers every byte of it); when the local copy
/// of the base is damaged, the import is refused with the damage named in
/// the packs, not blamed on the received delta, on one thread or two.
#[test]
fn a_damaged_local_base_is_named_when_a_delta_on_it_arrives() {
    use std::os::unix::fs::FileExt;
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 2, 41);
    let first = closure(&a, commits[0]);
    let (delta, base) = closure(&a, commits[1])
        .into_iter()
        .find_map(|id| match a.locate(&id).unwrap().unwrap().location {
            Location::Delta { base, .. } if first.contains(&base) => Some((id, base)),
            _ => None,
        })
        .expect("a delta of round 1 on a piece of round 0");
    let mut b = Ledger::init(&t.path().join("b")).unwrap();
    b.import_wire(export_all(&a, &first)).unwrap();
    let (_, off, stored) = b.locate(&base).unwrap().unwrap().location.record().unwrap();
    let pack = std::fs::read_dir(b.dir().join("packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .expect("one pack");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&pack)
        .unwrap();
    // Every byte of the second half of the base's payload inverted.
    let from = off + bat_ledger::pack::RECORD_HEADER_LEN as u64 + stored / 2;
    let mut bytes = vec![0u8; (stored / 2) as usize];
    f.read_exact_at(&mut bytes, from).unwrap();
    bytes.iter_mut().for_each(|x| *x = !*x);
    f.write_all_at(&bytes, from).unwrap();
    let obj = a.export_wire(&delta).unwrap();
    for parallel in [false, true] {
        let e = if parallel {
            b.import_wire_parallel(vec![obj.clone()], None)
        } else {
            b.import_wire(vec![obj.clone()])
        }
        .expect_err("the delta cannot verify on a damaged base");
        match e {
            Error::Corrupt { id, .. } => assert_eq!(id, base, "the damaged base is named"),
            other => panic!("expected the base's damage, got {other:?}"),
        }
        assert!(!b.contains(&delta).unwrap());
    }
}

/// Runs `objs` through an [`ImportPipeline`] in batches of `size`, noting
/// every object first, as `bat serve` does with an upload; stops at the
/// first error (from a batch's check or from the store of the one before).
fn pipe(dir: &Path, objs: &[WireObject], size: usize) -> bat_ledger::Result<ImportStats> {
    let mut p = ImportPipeline::new(dir);
    for batch in objs.chunks(size) {
        for o in batch {
            p.note(o)?;
        }
        p.import(batch.to_vec())?;
    }
    p.finish()
}

/// `objs` with each delta moved up to right after its base, as a push
/// sends chains (each link after the one below it).
fn chain_order(objs: &[WireObject]) -> Vec<WireObject> {
    let mut out: Vec<WireObject> = Vec::new();
    for o in objs {
        let at = match &o.body {
            WireBody::Delta { base, .. } => out.iter().position(|x| x.id == *base),
            _ => None,
        };
        match at {
            Some(i) => out.insert(i + 1, o.clone()),
            None => out.push(o.clone()),
        }
    }
    out
}

/// The batch index of each object of `objs` cut in batches of `size`.
fn batch_of(objs: &[WireObject], size: usize) -> std::collections::HashMap<ObjectId, usize> {
    objs.iter()
        .enumerate()
        .map(|(i, o)| (o.id, i / size))
        .collect()
}

/// As `bat serve` imports an upload: each batch checked while the batch
/// before it is stored. Small batches split chains, so many deltas arrive
/// one batch after their base (still being stored while they are
/// checked); the series crosses whole, fsck-clean, every piece in the same
/// storage form.
#[test]
fn a_series_crosses_with_each_batch_checked_while_the_last_is_stored() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 4, 43);
    let tip = *commits.last().unwrap();
    let ids = closure(&a, tip);
    let objs = chain_order(&export_all(&a, &ids));
    for size in [2, 5, 40] {
        let at = batch_of(&objs, size);
        let straddling = objs
            .iter()
            .filter(|o| match &o.body {
                WireBody::Delta { base, .. } => at.get(base).is_some_and(|&b| b + 1 == at[&o.id]),
                _ => false,
            })
            .count();
        assert!(
            size == 40 || straddling > 0,
            "batches of {size}: a delta on a base of the batch before"
        );
        let dir = Ledger::init(&t.path().join(format!("b{size}")))
            .unwrap()
            .dir()
            .to_path_buf();
        let s = pipe(&dir, &objs, size).unwrap();
        assert_eq!(s.stored, objs.len() as u64, "batches of {size}");
        assert_eq!(s.received, objs.len() as u64);
        let mut b = Ledger::open(&dir).unwrap();
        b.update_ref("refs/heads/main", None, Some(tip), "import")
            .unwrap();
        let rep = b.fsck(&NoProgress, &no()).unwrap();
        assert!(rep.ok(), "batches of {size}: {:?}", rep.problems);
        same_storage_forms(&a, &b, &ids);
    }
}

/// A spoilt piece refuses its batch in the pipeline, wherever it is
/// caught (its own batch's check, or the store): the batches before it
/// are stored, nothing of its batch is, and the ledger stays fsck-clean.
#[test]
fn a_refused_batch_in_the_pipeline_stores_nothing_and_keeps_the_ones_before() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 3, 47);
    let ids = closure(&a, commits[2]);
    let objs = chain_order(&export_all(&a, &ids));
    let size = 2;
    let at = batch_of(&objs, size);
    let pieces: Vec<usize> = objs
        .iter()
        .enumerate()
        .filter(|(i, o)| {
            o.kind == Kind::Bytes
                && *i >= size
                && matches!(o.body, WireBody::Record { .. } | WireBody::Delta { .. })
        })
        .map(|(i, _)| i)
        .collect();
    assert!(pieces.len() > 4, "pieces past the first batch");
    // Deltas on a base of the batch before: their batch's check leaves
    // them to the import, so the spoilt one is caught there.
    let late = pieces
        .iter()
        .filter(|&&i| match &objs[i].body {
            WireBody::Delta { base, .. } => at.get(base).is_some_and(|&b| b + 1 == i / size),
            _ => false,
        })
        .count();
    assert!(late > 0, "a spoilt delta caught when its batch is stored");
    for spoil in pieces {
        let dir = Ledger::init(&t.path().join(format!("b{spoil}")))
            .unwrap()
            .dir()
            .to_path_buf();
        let mut batch = objs.clone();
        batch[spoil].id = ObjectId::of_bytes(format!("not piece {spoil}").as_bytes());
        let e = pipe(&dir, &batch, size).expect_err("a spoilt piece refuses its batch");
        assert!(matches!(e, Error::Received { .. }), "piece {spoil}: {e:?}");
        let b = Ledger::open(&dir).unwrap();
        let refused = spoil / size;
        for o in &objs {
            let first = at[&o.id];
            assert_eq!(
                b.contains(&o.id).unwrap(),
                first < refused,
                "piece {spoil}: {} (first in batch {first}, refused {refused})",
                o.id
            );
        }
        assert!(!b.contains(&batch[spoil].id).unwrap());
        assert!(b.fsck(&NoProgress, &no()).unwrap().ok(), "piece {spoil}");
    }
}
