//! Bundles: round trip through a file, full verification, and crafted
//! bundles (valid checksums, malicious content) that must be refused
//! without changing the receiving ledger.

use crate::common;

use std::path::Path;

use bat_ledger::remote::bundle::{create_bundle, verify_bundle, BUNDLE_MAGIC, BUNDLE_VERSION};
use bat_ledger::remote::transfer::fetch;
use bat_ledger::remote::wire::WireWriter;
use bat_ledger::remote::{Bundle, WireObject};
use bat_ledger::{CommitId, Ledger, NoProgress, ObjectId};
use common::{no, series_ledger, state};

/// A bundle file with the given refs and objects and a correct trailer.
fn craft(path: &Path, refs: &[(&str, CommitId)], objects: &[WireObject]) {
    let mut out = Vec::new();
    out.extend_from_slice(BUNDLE_MAGIC);
    out.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
    out.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    for (n, c) in refs {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(c.0.as_bytes());
    }
    let mut w = WireWriter::new(out).unwrap();
    for o in objects {
        w.write(o).unwrap();
    }
    let mut out = w.finish().unwrap();
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    std::fs::write(path, out).unwrap();
}

#[test]
fn bundle_round_trip_and_crafted_bundles() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 3, 3);
    let tip = *commits.last().unwrap();
    let file = t.path().join("x.bundle");
    let s = create_bundle(
        &a,
        &file,
        &[("refs/heads/main".into(), tip)],
        &NoProgress,
        &no(),
    )
    .unwrap();
    assert!(s.objects > 10);
    let v = verify_bundle(&file, &t.path().join("scratch"), &NoProgress, &no()).unwrap();
    assert_eq!(v.objects, s.objects);
    let mut b = Ledger::init(&t.path().join("b")).unwrap();
    let mut bundle = Bundle::open(&file).unwrap();
    fetch(&mut b, &mut bundle, "paper", None, &NoProgress, &no()).unwrap();
    assert_eq!(b.resolve("refs/remotes/paper/main").unwrap(), tip);
    assert!(b.fsck(&NoProgress, &no()).unwrap().ok());

    // Every object, bottom-up as a bundle holds them, for crafting.
    let plan = bat_ledger::remote::transfer::send_plan(
        &a,
        &[tip],
        &mut |ids| Ok(vec![false; ids.len()]),
        &no(),
    )
    .unwrap();
    let objs: Vec<WireObject> = plan.iter().map(|id| a.export_wire(id).unwrap()).collect();
    let mut c = Ledger::init(&t.path().join("c")).unwrap();
    // A ref to a commit that is not inside.
    let bad = t.path().join("ghost.bundle");
    craft(
        &bad,
        &[
            ("refs/heads/main", tip),
            ("refs/heads/ghost", CommitId(ObjectId([0xab; 32]))),
        ],
        &objs,
    );
    let e = verify_bundle(&bad, &t.path().join("s2"), &NoProgress, &no()).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    let before = state(c.dir());
    let e = fetch(
        &mut c,
        &mut Bundle::open(&bad).unwrap(),
        "g",
        None,
        &NoProgress,
        &no(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    assert_eq!(state(c.dir()), before);
    // An object missing from the middle: the closure is incomplete.
    let mut holey = objs.clone();
    let i = holey.len() / 2;
    holey.remove(i);
    craft(&bad, &[("refs/heads/main", tip)], &holey);
    assert!(verify_bundle(&bad, &t.path().join("s3"), &NoProgress, &no()).is_err());
    let e = fetch(
        &mut c,
        &mut Bundle::open(&bad).unwrap(),
        "g",
        None,
        &NoProgress,
        &no(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    assert_eq!(state(c.dir()), before);
    // A bad ref name.
    craft(&bad, &[("refs/heads/../x", tip)], &objs);
    let e = Bundle::open(&bad).unwrap_err();
    assert!(e.to_string().contains("invalid ref name"), "{e}");
    // Trailing garbage inside the checksummed area.
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len() - 32;
    bytes.truncate(n);
    bytes.extend_from_slice(b"junk");
    let sum = *blake3::hash(&bytes).as_bytes();
    bytes.extend_from_slice(&sum);
    std::fs::write(&bad, &bytes).unwrap();
    let e = Bundle::open(&bad).unwrap_err();
    assert!(e.to_string().contains("trailing"), "{e}");
    // Every truncation of a real bundle is refused by open.
    let bytes = std::fs::read(&file).unwrap();
    for cut in [0, 7, 20, bytes.len() / 3, bytes.len() - 1] {
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        assert!(Bundle::open(&bad).is_err(), "cut at {cut}");
    }
}

/// An object as a plain (uncompressed) wire record.
fn plain(kind: bat_ledger::Kind, raw: Vec<u8>) -> WireObject {
    WireObject {
        id: kind.id_of(&raw),
        kind,
        raw_len: raw.len() as u64,
        body: bat_ledger::remote::WireBody::Record {
            compression: bat_ledger::pack::COMPRESSION_NONE,
            payload: raw,
        },
    }
}

/// A commit on `tree` with no parent.
fn commit_on(tree: ObjectId) -> WireObject {
    let c = bat_ledger::Commit {
        tree: bat_ledger::TreeId(tree),
        parents: vec![],
        author: "mallory".into(),
        time: 1,
        message: "crafted".into(),
        metadata: serde_json::Value::Null,
        fields: Default::default(),
    };
    plain(bat_ledger::Kind::Commit, c.encode().unwrap())
}

/// Trees whose entries lie (a file's size, a file naming a tree, a subtree
/// naming a file) are refused by clone/fetch exactly as fsck would refuse
/// them, before anything is stored; the same objects, were they stored,
/// are what fsck reports.
#[test]
fn crafted_trees_are_refused_on_import_like_fsck() {
    use bat_ledger::{Kind, Mode, Tree, TreeEntry};
    let t = tempfile::tempdir().unwrap();
    let file = plain(Kind::Bytes, b"twelve bytes".to_vec());
    let inner = Tree {
        entries: vec![TreeEntry {
            name: "f".into(),
            mode: Mode::File,
            id: file.id,
            size: 12,
        }],
    };
    let inner = plain(Kind::Tree, inner.encode());
    let cases: Vec<(&str, TreeEntry)> = vec![
        (
            "size lie",
            TreeEntry {
                name: "a".into(),
                mode: Mode::File,
                id: file.id,
                size: 5,
            },
        ),
        (
            "file names a tree",
            TreeEntry {
                name: "a".into(),
                mode: Mode::File,
                id: inner.id,
                size: 0,
            },
        ),
        (
            "subtree names a file",
            TreeEntry {
                name: "a".into(),
                mode: Mode::Tree,
                id: file.id,
                size: 0,
            },
        ),
        (
            "symlink names a tree",
            TreeEntry {
                name: "a".into(),
                mode: Mode::Symlink,
                id: inner.id,
                size: 0,
            },
        ),
    ];
    let mut c = Ledger::init(&t.path().join("c")).unwrap();
    for (i, (what, entry)) in cases.into_iter().enumerate() {
        let root = plain(
            Kind::Tree,
            Tree {
                entries: vec![entry],
            }
            .encode(),
        );
        let commit = commit_on(root.id);
        let objs = vec![file.clone(), inner.clone(), root, commit.clone()];
        let bad = t.path().join(format!("lie{i}.bundle"));
        craft(&bad, &[("refs/heads/main", CommitId(commit.id))], &objs);
        let e =
            verify_bundle(&bad, &t.path().join(format!("s{i}")), &NoProgress, &no()).unwrap_err();
        assert!(
            !e.to_string().contains("fails fsck"),
            "{what}: import must refuse first: {e}"
        );
        let before = state(c.dir());
        let e = fetch(
            &mut c,
            &mut Bundle::open(&bad).unwrap(),
            "x",
            None,
            &NoProgress,
            &no(),
        )
        .unwrap_err();
        assert!(!e.to_string().is_empty(), "{what}");
        assert_eq!(state(c.dir()), before, "{what}: nothing stored");
        // Direct import of the same batch (what `/v1/put` does): refused
        // by the shared rule, naming it.
        let e = c.import_wire(objs).unwrap_err().to_string();
        assert!(
            e.contains("instead of") || e.contains("the tree says"),
            "{what}: {e}"
        );
        assert_eq!(state(c.dir()), before, "{what}: nothing stored");
        assert!(c.fsck(&NoProgress, &no()).unwrap().ok());
    }
}

/// Duplicate ref names in a bundle are refused when it is opened.
#[test]
fn bundle_with_a_ref_twice_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 2, 5);
    let objs: Vec<WireObject> = bat_ledger::remote::transfer::send_plan(
        &a,
        &[commits[1]],
        &mut |ids| Ok(vec![false; ids.len()]),
        &no(),
    )
    .unwrap()
    .iter()
    .map(|id| a.export_wire(id).unwrap())
    .collect();
    let bad = t.path().join("dup.bundle");
    craft(
        &bad,
        &[
            ("refs/heads/main", commits[1]),
            ("refs/heads/main", commits[0]),
        ],
        &objs,
    );
    let e = Bundle::open(&bad).unwrap_err();
    assert!(e.to_string().contains("appears twice"), "{e}");
    craft(&bad, &[("HEAD", commits[1]), ("HEAD", commits[0])], &objs);
    assert!(Bundle::open(&bad).is_err());
}

/// A few kilobytes naming one highly compressible chunk a thousand times
/// (64 GiB to decode and hash) are refused before the work, by the import
/// budget; a legitimate file of repeated zero chunks still imports.
#[test]
fn chunk_list_amplification_is_refused_before_the_work() {
    use bat_ledger::{ChunkList, ChunkRef, Kind};
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(&t.path().join("l")).unwrap();
    let zeros = vec![0u8; 64 << 20];
    let chunk = WireObject {
        id: Kind::Bytes.id_of(&zeros),
        kind: Kind::Bytes,
        raw_len: zeros.len() as u64,
        body: bat_ledger::remote::WireBody::Record {
            compression: bat_ledger::pack::COMPRESSION_ZSTD,
            payload: zstd::bulk::compress(&zeros, 1).unwrap(),
        },
    };
    drop(zeros);
    let n = 1000u64;
    let file_id = ObjectId([7; 32]); // never reached: refused before hashing
    let list = ChunkList {
        file: file_id,
        total: n * (64 << 20),
        chunks: (0..n)
            .map(|_| ChunkRef {
                id: chunk.id,
                len: 64 << 20,
            })
            .collect(),
    };
    let list = plain(Kind::ChunkList, list.encode());
    let alias = WireObject {
        id: file_id,
        kind: Kind::Bytes,
        raw_len: n * (64 << 20),
        body: bat_ledger::remote::WireBody::Chunked { list: list.id },
    };
    let before = state(l.dir());
    let started = std::time::Instant::now();
    let e = l.import_wire(vec![chunk.clone(), list, alias]).unwrap_err();
    assert!(e.to_string().contains("amplification"), "{e}");
    eprintln!("amplified chunk list refused in {:?}", started.elapsed());
    assert_eq!(state(l.dir()), before);

    // Legitimate repetition: 4 copies of the 64 MiB zero chunk (a 256 MiB
    // file of zeros) is within the budget and imports.
    let whole = {
        let mut h = blake3::Hasher::new();
        let z = vec![0u8; 64 << 20];
        for _ in 0..4 {
            h.update(&z);
        }
        ObjectId(*h.finalize().as_bytes())
    };
    let list = ChunkList {
        file: whole,
        total: 4 * (64 << 20),
        chunks: (0..4)
            .map(|_| ChunkRef {
                id: chunk.id,
                len: 64 << 20,
            })
            .collect(),
    };
    let list = plain(Kind::ChunkList, list.encode());
    let alias = WireObject {
        id: whole,
        kind: Kind::Bytes,
        raw_len: 4 * (64 << 20),
        body: bat_ledger::remote::WireBody::Chunked { list: list.id },
    };
    l.import_wire(vec![chunk, list, alias]).unwrap();
    assert!(l.contains(&whole).unwrap());
}
