//! Pruned files travel as absent entries (PROTOCOL.md §3, §6): a pruned
//! ledger bundles, pushes and is fetched from, every receiver records the
//! files as pruned (fsck-clean), a full remote restores them, and a
//! hostile peer can neither mark absent a file the receiver stores nor
//! stand an absent entry in for bytes a file needs (a chunk).

use crate::common;

use std::path::Path;

use bat_ledger::remote::bundle::{create_bundle, BUNDLE_MAGIC, BUNDLE_VERSION_PLAIN};
use bat_ledger::remote::transfer::{fetch, push, send_plan};
use bat_ledger::remote::wire::{decode_stream, encode_stream, WireWriter};
use bat_ledger::remote::{Bundle, DirRemote, RemoteError, WireBody, WireObject};
use bat_ledger::{CommitId, Error, GcOptions, Ledger, LockMode, NoProgress, ObjectId};
use common::{no, series_ledger};

/// The id and size of `path` in `commit`.
fn file_of(l: &Ledger, commit: CommitId, path: &str) -> (ObjectId, u64) {
    let tree = l.read_commit(&commit).expect("commit").tree;
    let f = l
        .walk_files(&tree)
        .expect("walk")
        .into_iter()
        .find(|f| f.path == path)
        .expect("file in tree");
    (f.id, f.size)
}

/// A 3-round ledger whose first model checkpoint is pruned.
fn pruned(root: &Path) -> (Ledger, Vec<CommitId>, ObjectId) {
    let (l, commits) = series_ledger(root, 3, 3);
    let (model, _) = file_of(&l, commits[0], "candidate/model.safetensors");
    let dir = l.dir().to_path_buf();
    drop(l);
    let mut l = Ledger::open_with(&dir, LockMode::Exclusive).expect("open for gc");
    let opts = GcOptions {
        prune: vec![model],
        policy: "last=2".into(),
        ..Default::default()
    };
    let rep = l.gc_with(&opts, &NoProgress, &no()).expect("gc");
    assert_eq!(rep.pruned_files, 1);
    (l, commits, model)
}

fn fsck_pruned(l: &Ledger) -> u64 {
    let rep = l.fsck(&NoProgress, &no()).expect("fsck");
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    rep.pruned_files
}

fn main_ref(tip: CommitId) -> Vec<(String, CommitId)> {
    vec![("refs/heads/main".to_string(), tip)]
}

#[test]
fn pruned_files_bundle_push_and_restore() {
    let t = tempfile::tempdir().expect("tempdir");
    let (a, commits, model) = pruned(&t.path().join("a"));
    let tip = commits[2];
    let file = t.path().join("a.bundle");
    let s = create_bundle(&a, &file, &main_ref(tip), &NoProgress, &no()).expect("bundle");
    assert_eq!(s.absent, 1);
    let bytes = std::fs::read(&file).expect("read bundle");
    assert_eq!(&bytes[..8], BUNDLE_MAGIC);
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().expect("4")), 2);
    // The bundle does not claim to have the file; it sends its mark.
    let mut bundle = Bundle::open(&file).expect("open");
    assert_eq!(bundle.summary().absent, 1);
    use bat_ledger::remote::Remote;
    assert_eq!(bundle.has(&[model]).expect("has"), vec![false]);

    // Cloned from the bundle: recorded as pruned, fsck-clean.
    let mut b = Ledger::init(&t.path().join("b")).expect("init");
    let out = fetch(&mut b, &mut bundle, "origin", None, &NoProgress, &no()).expect("fetch");
    assert_eq!(out.stats.files_absent, 1);
    assert_eq!(fsck_pruned(&b), 1);
    match b.read_bytes(&model) {
        Err(Error::Pruned { policy, .. }) => {
            assert!(policy.starts_with("last=2"), "{policy}");
            assert!(policy.contains("received marked absent"), "{policy}");
        }
        r => panic!("expected a pruned read, got {:?}", r.map(|v| v.len())),
    }

    // Pushed to a new directory ledger: the same.
    let c_dir = t.path().join("c");
    drop(Ledger::init(&c_dir).expect("init"));
    let mut c = DirRemote::open(&c_dir).expect("open");
    push(
        &a,
        &mut c,
        "refs/heads/main",
        "refs/heads/main",
        false,
        &NoProgress,
        &no(),
    )
    .expect("push of pruned history");
    drop(c);
    let c = Ledger::open(&c_dir.join(".bat")).expect("open");
    assert_eq!(fsck_pruned(&c), 1);
    drop(c);

    // A full ledger with the same files restores it on fetch.
    let (full, _) = series_ledger(&t.path().join("full"), 3, 3);
    let want = full.read_bytes(&model).expect("full copy has it");
    drop(full);
    let mut full = DirRemote::open(&t.path().join("full")).expect("open");
    fetch(&mut b, &mut full, "full", None, &NoProgress, &no()).expect("fetch");
    assert_eq!(fsck_pruned(&b), 0);
    assert!(b.read_bytes(&model).expect("restored") == want);
}

#[test]
fn a_peer_cannot_mark_absent_what_the_receiver_stores() {
    let t = tempfile::tempdir().expect("tempdir");
    let (mut l, commits) = series_ledger(&t.path().join("l"), 2, 5);
    let (id, size) = file_of(&l, commits[1], "notes.txt");
    let before = l.read_bytes(&id).expect("stored");
    let s = l
        .import_wire(vec![WireObject::absent(id, size, "evil")])
        .expect("import");
    assert_eq!((s.absent, s.skipped), (0, 1));
    assert!(l.pruned_file(&id).expect("lookup").is_none());
    assert_eq!(l.read_bytes(&id).expect("still stored"), before);
    assert_eq!(fsck_pruned(&l), 0);
    // An absent entry of another kind than a file is refused on decode.
    let mut o = WireObject::absent(id, size, "evil");
    o.kind = bat_ledger::Kind::Tree;
    let e = decode_stream(&encode_stream(&[o])).expect_err("a tree cannot be absent");
    assert!(matches!(e, RemoteError::Protocol { .. }), "{e}");
    // A long policy is refused before it is read.
    let o = WireObject {
        body: WireBody::Absent {
            policy: "x".repeat(4096),
        },
        ..WireObject::absent(id, size, "")
    };
    let e = decode_stream(&encode_stream(&[o])).expect_err("too long");
    assert!(matches!(e, RemoteError::LimitExceeded { .. }), "{e}");
}

/// A bundle of `version` with `objects` and a correct trailer.
fn craft(path: &Path, version: u32, refs: &[(String, CommitId)], objects: &[WireObject]) {
    let mut out = Vec::new();
    out.extend_from_slice(BUNDLE_MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    for (n, c) in refs {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(c.0.as_bytes());
    }
    let mut w = WireWriter::new(out).expect("header");
    for o in objects {
        w.write(o).expect("frame");
    }
    let mut out = w.finish().expect("end");
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    std::fs::write(path, out).expect("write");
}

#[test]
fn absent_entries_where_bytes_are_needed_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let (a, commits, _) = pruned(&t.path().join("a"));
    let tip = commits[2];
    let plan = send_plan(&a, &[tip], &mut |ids| Ok(vec![false; ids.len()]), &no()).expect("plan");
    let objects: Vec<WireObject> = plan
        .iter()
        .map(|id| a.export_wire_or_absent(id).expect("export"))
        .collect();
    // The same objects in a version 1 bundle: refused (absent entries
    // need version 2).
    let v1 = t.path().join("v1.bundle");
    craft(&v1, BUNDLE_VERSION_PLAIN, &main_ref(tip), &objects);
    let e = Bundle::open(&v1).expect_err("v1 with absent entries");
    assert!(e.to_string().contains("cannot carry absent entries"), "{e}");

    // A chunk of a kept file sent as absent: the fetch fails, nothing is
    // referenced.
    let (kept, _) = file_of(&a, tip, "candidate/model.safetensors");
    let list = match a.export_wire(&kept).expect("export").body {
        WireBody::Chunked { list } => list,
        b => panic!("the kept model is chunked, got {b:?}"),
    };
    let chunk = a.read_chunk_list(&list).expect("list").chunks[0].id;
    let hostile: Vec<WireObject> = objects
        .iter()
        .map(|o| {
            if o.id == chunk {
                WireObject::absent(o.id, o.raw_len, "evil")
            } else {
                o.clone()
            }
        })
        .collect();
    let bad = t.path().join("bad.bundle");
    craft(&bad, 2, &main_ref(tip), &hostile);
    let mut b = Ledger::init(&t.path().join("b")).expect("init");
    let mut bundle = Bundle::open(&bad).expect("open");
    let e = fetch(&mut b, &mut bundle, "origin", None, &NoProgress, &no()).expect_err("refused");
    assert!(e.to_string().contains("marked absent"), "{e}");
    assert!(b.all_refs().expect("refs").is_empty());
}
