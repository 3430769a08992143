//! Library-level behaviour: revisions, refs and CAS, indexed fields, gc of
//! unreachable objects, catalog rebuild from packs, verified reads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{
    CommitId, CommitRequest, Error, FieldValue, Head, Kind, Ledger, LockMode, Mode, NoProgress,
    ObjectId, OnMoved, Tree, TreeEntry,
};

fn no() -> AtomicBool {
    AtomicBool::new(false)
}

fn write_dir(d: &Path, files: &[(&str, &[u8])]) {
    for (p, b) in files {
        let p = d.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b).unwrap();
    }
}

fn commit(l: &mut Ledger, d: &Path, msg: &str) -> CommitId {
    l.commit_dir(d, &CommitRequest::new(msg), &NoProgress, &no())
        .unwrap()
        .commit
}

#[test]
fn revisions_refs_and_reflog() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    write_dir(&d, &[("a", b"1")]);
    assert!(
        matches!(l.resolve("HEAD"), Err(Error::BadRevision { .. })),
        "unborn HEAD"
    );
    let c1 = commit(&mut l, &d, "one");
    write_dir(&d, &[("a", b"2")]);
    let c2 = commit(&mut l, &d, "two");
    write_dir(&d, &[("a", b"3")]);
    let c3 = commit(&mut l, &d, "three");
    assert_eq!(l.resolve("HEAD").unwrap(), c3);
    assert_eq!(l.resolve("main").unwrap(), c3);
    assert_eq!(l.resolve("HEAD^").unwrap(), c2);
    assert_eq!(l.resolve("HEAD~2").unwrap(), c1);
    assert_eq!(l.resolve("main~1^").unwrap(), c1);
    assert_eq!(l.resolve(&c2.to_string()[..10]).unwrap(), c2);
    assert_eq!(l.resolve(&c2.to_string().to_uppercase()).unwrap(), c2);
    assert!(matches!(
        l.resolve("HEAD~3"),
        Err(Error::BadRevision { .. })
    ));
    assert!(matches!(
        l.resolve("HEAD~x"),
        Err(Error::BadRevision { .. })
    ));

    l.create_tag("v1", c1).unwrap();
    assert_eq!(l.resolve("v1").unwrap(), c1);
    assert!(matches!(
        l.create_tag("v1", c2),
        Err(Error::RefExists { .. })
    ));
    l.create_branch("exp", c2).unwrap();
    assert_eq!(l.switch("exp").unwrap(), c2);
    assert_eq!(
        l.head().unwrap(),
        Head::Branch {
            name: "refs/heads/exp".into(),
            commit: Some(c2)
        }
    );
    write_dir(&d, &[("b", b"x")]);
    let e1 = commit(&mut l, &d, "on exp");
    assert_eq!(l.read_commit(&e1).unwrap().parents, vec![c2]);
    assert_eq!(l.resolve("main").unwrap(), c3, "main untouched");
    // commit --branch to a new branch forks from HEAD
    let mut req = CommitRequest::new("forked");
    req.branch = Some("fork".into());
    let f1 = l.commit_dir(&d, &req, &NoProgress, &no()).unwrap().commit;
    assert_eq!(l.read_commit(&f1).unwrap().parents, vec![e1]);
    // reset keeps the old tip in the reflog
    let (name, old) = l.reset(c1, None).unwrap();
    assert_eq!((name.as_str(), old), ("refs/heads/exp", Some(e1)));
    let log = l.reflog("exp").unwrap();
    assert_eq!(log[0].old, Some(e1));
    assert_eq!(log[0].new, Some(c1));
    assert!(l
        .reflog("HEAD")
        .unwrap()
        .iter()
        .any(|e| e.message.starts_with("switch")));
    // CAS with a stale expectation fails and changes nothing
    let err = l
        .update_ref("refs/heads/exp", Some(e1), Some(c3), "stale")
        .unwrap_err();
    assert!(matches!(err, Error::BranchMoved { .. }), "{err}");
    assert_eq!(l.resolve("exp").unwrap(), c1);
    // OnMoved::Fail surfaces concurrent movement as "branch moved"
    assert!(
        l.delete_branch("exp").is_err(),
        "cannot delete the current branch"
    );
    l.switch("main").unwrap();
    assert_eq!(l.delete_branch("exp").unwrap(), c1);
    assert!(l.resolve("exp").is_err());
    let log = l.log(c3, None).unwrap();
    assert_eq!(
        log.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![c3, c2, c1]
    );
    assert_eq!(l.log(c3, Some(2)).unwrap().len(), 2);
    for bad in ["", "a..b", "-x", "x.lock", "a b", "HEAD", "x:y", "a~1"] {
        assert!(l.create_branch(bad, c1).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn on_moved_fail_reports_branch_moved() {
    let t = tempfile::tempdir().unwrap();
    let mut a = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    write_dir(&d, &[("a", b"1")]);
    let c1 = commit(&mut a, &d, "one");
    // a second handle moves main between our read of the tip and our commit:
    // emulate by resetting main away and committing with Fail against the
    // tip we saw, via update_ref's expectation
    let mut b = Ledger::open(a.dir()).unwrap();
    write_dir(&d, &[("a", b"2")]);
    let c2 = commit(&mut b, &d, "two");
    let mut req = CommitRequest::new("three");
    req.on_moved = OnMoved::Fail;
    // the tip is read at the start of commit_dir, so this one succeeds ...
    let c3 = a.commit_dir(&d, &req, &NoProgress, &no()).unwrap().commit;
    assert_eq!(a.read_commit(&c3).unwrap().parents, vec![c2]);
    // ... while a stale compare-and-swap fails
    assert!(matches!(
        a.update_ref("refs/heads/main", Some(c1), Some(c1), "x"),
        Err(Error::BranchMoved { .. })
    ));
}

#[test]
fn indexed_fields_are_queryable() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    let mut ids = vec![];
    for i in 0..4i64 {
        write_dir(&d, &[("f", i.to_string().as_bytes())]);
        let mut req = CommitRequest::new(format!("c{i}"));
        req.time = Some(1000 + i);
        req.metadata = serde_json::json!({"free": {"nested": [i]}});
        req.fields = BTreeMap::from([
            (
                "k".to_string(),
                FieldValue::Str(if i % 2 == 0 { "even" } else { "odd" }.into()),
            ),
            ("n".to_string(), FieldValue::Int(i)),
            ("x".to_string(), FieldValue::Float(i as f64 / 2.0)),
            ("ok".to_string(), FieldValue::Bool(i > 1)),
        ]);
        ids.push(l.commit_dir(&d, &req, &NoProgress, &no()).unwrap().commit);
    }
    assert_eq!(
        l.commits_with_field("k", &FieldValue::Str("even".into()))
            .unwrap(),
        vec![ids[2], ids[0]]
    );
    assert_eq!(
        l.commits_with_field("n", &FieldValue::Int(3)).unwrap(),
        vec![ids[3]]
    );
    assert_eq!(
        l.commits_with_field("x", &FieldValue::Float(0.5)).unwrap(),
        vec![ids[1]]
    );
    assert_eq!(
        l.commits_with_field("ok", &FieldValue::Bool(true)).unwrap(),
        vec![ids[3], ids[2]]
    );
    let c = l.read_commit(&ids[1]).unwrap();
    assert_eq!(c.metadata, serde_json::json!({"free": {"nested": [1]}}));
    assert_eq!(c.fields["n"], FieldValue::Int(1));
    let mut bad = CommitRequest::new("nan");
    bad.fields.insert("x".into(), FieldValue::Float(f64::NAN));
    assert!(matches!(
        l.commit_dir(&d, &bad, &NoProgress, &no()),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn gc_drops_unreachable_and_rebuild_restores_the_catalog() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    let big: Vec<u8> = (0..6_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    write_dir(&d, &[("a", b"keep"), ("sub/big", &big)]);
    let c1 = commit(&mut l, &d, "one");
    // objects stored but never referenced by any commit
    let ids = l
        .write_objects(
            &[b"garbage one", b"garbage two"],
            &[Tree::new(vec![TreeEntry {
                name: "g".into(),
                mode: Mode::File,
                id: ObjectId([9; 32]),
                size: 1,
            }])
            .unwrap()],
        )
        .unwrap();
    assert!(l.contains(&ids[0]).unwrap());
    let before = l.stats().unwrap();
    assert!(
        matches!(l.gc(&NoProgress, &no()), Err(Error::Busy { .. })),
        "gc needs the exclusive lock"
    );
    let dir = l.dir().to_path_buf();
    drop(l);
    let mut x = Ledger::open_with(&dir, LockMode::Exclusive).unwrap();
    assert!(matches!(
        Ledger::open_with(&dir, LockMode::Exclusive),
        Err(Error::Busy { .. })
    ));
    let rep = x.gc(&NoProgress, &no()).unwrap();
    assert_eq!(rep.removed_objects, 3);
    // The pack with the garbage, and the commit's small pack merged with it.
    assert_eq!(rep.rewritten_packs, 2);
    assert_eq!(x.stats().unwrap().packs, 1);
    for id in &ids {
        assert!(!x.contains(id).unwrap());
    }
    assert!(x.fsck(&NoProgress, &no()).unwrap().ok());
    let after = x.stats().unwrap();
    assert_eq!(after.objects, before.objects - 3);
    // the catalog's derived tables can be rebuilt from the packs alone
    let n = x.rebuild_catalog().unwrap();
    assert!(n > 0);
    let rebuilt = x.stats().unwrap();
    assert_eq!(
        (rebuilt.objects, rebuilt.commits, rebuilt.logical_bytes),
        (after.objects, after.commits, after.logical_bytes)
    );
    assert!(x.fsck(&NoProgress, &no()).unwrap().ok());
    let out = t.path().join("out");
    x.checkout(&c1, &out, &NoProgress, &no()).unwrap();
    assert_eq!(std::fs::read(out.join("sub/big")).unwrap(), big);
    let row = x
        .locate(&ObjectId(*blake3::hash(&big).as_bytes()))
        .unwrap()
        .unwrap();
    assert!(matches!(row.location, bat_ledger::Location::Chunked { .. }));
    assert_eq!(row.kind, Kind::Bytes);
}

#[test]
fn cancellation_stops_a_commit_without_changing_refs() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    write_dir(&d, &[("a", b"1")]);
    let cancel = AtomicBool::new(true);
    let err = l
        .commit_dir(&d, &CommitRequest::new("x"), &NoProgress, &cancel)
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled));
    assert!(l.head().unwrap().commit().is_none());
    assert_eq!(l.stats().unwrap().objects, 0);
}

#[test]
fn fsck_reports_catalog_inconsistencies() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    write_dir(&d, &[("a", b"alpha"), ("b", b"beta")]);
    let c1 = commit(&mut l, &d, "one");
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
    let dir = l.dir().to_path_buf();
    drop(l);
    let db = rusqlite::Connection::open(dir.join("catalog.sqlite")).unwrap();
    // a row pointing past the end of its pack
    let a = blake3::hash(b"alpha");
    db.execute(
        "UPDATE objects SET offset = offset + 1000000 WHERE id = ?1",
        [a.as_bytes().as_slice()],
    )
    .unwrap();
    // a dangling ref
    db.execute(
        "INSERT INTO refs(name, target) VALUES ('refs/heads/ghost', ?1)",
        [[7u8; 32].as_slice()],
    )
    .unwrap();
    drop(db);
    let l = Ledger::open(&dir).unwrap();
    let rep = l.fsck(&NoProgress, &no()).unwrap();
    let text: Vec<String> = rep.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|p| p.contains(&a.to_hex().to_string()) && p.contains("beyond")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|p| p.contains("refs/heads/ghost") && p.contains("missing commit")),
        "{text:?}"
    );
    // reading the damaged object fails with an error naming it
    let err = l.read_bytes(&ObjectId(*a.as_bytes())).unwrap_err();
    assert!(err.to_string().contains(&a.to_hex().to_string()), "{err}");
    // the untouched file is still readable and history is intact
    assert_eq!(
        l.read_bytes(&ObjectId(*blake3::hash(b"beta").as_bytes()))
            .unwrap(),
        b"beta"
    );
    assert_eq!(l.log(c1, None).unwrap().len(), 1);
}

/// A writer that fails once it has been given `limit` bytes.
struct FailAfter {
    limit: usize,
    taken: usize,
}

impl std::io::Write for FailAfter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.taken >= self.limit {
            return Err(std::io::Error::other("disk full"));
        }
        let n = b.len().min(self.limit - self.taken);
        self.taken += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn reading_a_chunked_file_streams_in_order_and_stops_cleanly() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    // 24 MiB of noise: several dozen chunks, decoded on worker threads.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let data: Vec<u8> = (0..24 << 20)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect();
    write_dir(&d, &[("big", &data)]);
    let c = commit(&mut l, &d, "big");
    let tree = l.read_commit(&c).unwrap().tree;
    let id = l.walk_files(&tree).unwrap()[0].id;
    // whole read: every byte, in order
    let mut out = Vec::new();
    assert_eq!(
        l.read_bytes_to(&id, &mut out, &no()).unwrap(),
        data.len() as u64
    );
    assert!(out == data, "bytes come back in order");
    // a failing writer stops the read with its error (no hang, no panic)
    let mut w = FailAfter {
        limit: 3 << 20,
        taken: 0,
    };
    match l.read_bytes_to(&id, &mut w, &no()) {
        Err(Error::Io { .. }) => {}
        other => panic!("expected the writer's error, got {other:?}"),
    }
    assert_eq!(
        w.taken,
        3 << 20,
        "the writer was filled up to its limit first"
    );
    // a cancelled read says so
    let cancel = AtomicBool::new(true);
    match l.read_bytes_to(&id, &mut Vec::new(), &cancel) {
        Err(Error::Cancelled) => {}
        other => panic!("expected Cancelled, got {other:?}"),
    }
}

#[test]
fn fsck_reports_a_reachable_commit_missing_from_the_index() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    write_dir(&d, &[("a", b"alpha")]);
    let c1 = commit(&mut l, &d, "one");
    write_dir(&d, &[("a", b"alpha2")]);
    let c2 = commit(&mut l, &d, "two");
    let dir = l.dir().to_path_buf();
    drop(l);
    let db = rusqlite::Connection::open(dir.join("catalog.sqlite")).unwrap();
    db.execute(
        "DELETE FROM commits WHERE id = ?1",
        [c1.0.as_bytes().as_slice()],
    )
    .unwrap();
    drop(db);
    let l = Ledger::open(&dir).unwrap();
    let rep = l.fsck(&NoProgress, &no()).unwrap();
    assert!(!rep.ok());
    let text: Vec<String> = rep.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|p| p.contains(&c1.to_string()) && p.contains("commit index")),
        "{text:?}"
    );
    assert!(
        !text.iter().any(|p| p.contains(&c2.to_string())),
        "{text:?}"
    );
}

/// A ref a commit moves together with its branch (`also_move`) moves in
/// the same transaction: on success both point at the new commit; when
/// the ref's expectation is stale, neither moves and no commit is indexed.
#[test]
fn refs_moved_with_a_commit_move_in_its_transaction_or_not_at_all() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    let d = t.path().join("d");
    write_dir(&d, &[("a", b"1")]);
    let c1 = commit(&mut l, &d, "one");
    let follow = |expected: Option<CommitId>| bat_ledger::RefMove {
        name: "refs/promoted/main".into(),
        expected,
        message: "follow".into(),
    };
    write_dir(&d, &[("a", b"2")]);
    let mut req = CommitRequest::new("two");
    req.also_move = vec![follow(None)];
    let c2 = l.commit_dir(&d, &req, &NoProgress, &no()).unwrap().commit;
    assert_eq!(l.resolve("refs/heads/main").unwrap(), c2);
    assert_eq!(l.resolve("refs/promoted/main").unwrap(), c2);
    // Stale: the promoted ref is at c2, not c1.
    write_dir(&d, &[("a", b"3")]);
    let mut req = CommitRequest::new("three");
    req.also_move = vec![follow(Some(c1))];
    assert!(matches!(
        l.commit_dir(&d, &req, &NoProgress, &no()),
        Err(Error::BranchMoved { .. })
    ));
    assert_eq!(l.resolve("refs/heads/main").unwrap(), c2);
    assert_eq!(l.resolve("refs/promoted/main").unwrap(), c2);
    assert_eq!(l.log(c2, None).unwrap().len(), 2);
    // A name outside refs/<namespace>/<name> is refused before any work.
    let mut req = CommitRequest::new("four");
    req.also_move = vec![bat_ledger::RefMove {
        name: "promoted".into(),
        expected: None,
        message: "x".into(),
    }];
    assert!(matches!(
        l.commit_dir(&d, &req, &NoProgress, &no()),
        Err(Error::InvalidRefName { .. })
    ));
}
