//! The S3 remote against a real S3-compatible server (s3s-fs) on
//! 127.0.0.1: objects, refs with conditional writes, the update race.

use bat_ledger::remote::{Remote, RemoteError, WireBody, WireObject};
use bat_ledger::{CommitId, Kind, Ledger, ObjectId};
use s3_common::S3Server;
use serve_common::*;

use crate::common::s3 as s3_common;
use crate::common::serve as serve_common;

/// A commit as a self-contained wire record (compression 0).
fn commit_wire(l: &Ledger, c: CommitId) -> WireObject {
    let raw = l.read_object(&c.0, Kind::Commit).expect("read commit");
    WireObject {
        id: c.0,
        kind: Kind::Commit,
        raw_len: raw.len() as u64,
        body: WireBody::Record {
            compression: 0,
            payload: raw,
        },
    }
}

fn put_commits(r: &mut dyn Remote, l: &Ledger, cs: &[CommitId]) {
    let mut it = cs.iter().map(|&c| Ok(commit_wire(l, c)));
    r.put(&mut it).expect("put commits");
}

#[test]
fn s3_refs_are_conditional_and_fast_forward_only() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let (_dir, mut l) = new_ledger(t.path(), "local");
    let a = commit_files(&mut l, t.path(), &[("x", b"one")], "a");
    let b = commit_files(&mut l, t.path(), &[("x", b"two")], "b");
    l.create_branch("side", a).expect("branch");
    l.switch("side").expect("switch");
    let c = commit_files(&mut l, t.path(), &[("x", b"three")], "c");

    let mut r = s3.remote("team/ledger");
    assert!(r.list_refs().expect("empty listing").is_empty());
    put_commits(&mut r, &l, &[a, b, c]);
    assert_eq!(
        r.has(&[a.0, ObjectId::of_bytes(b"absent"), c.0])
            .expect("has"),
        vec![true, false, true]
    );
    let mut got = Vec::new();
    r.get(&[b.0, a.0], &mut |o| {
        got.push(o);
        Ok(())
    })
    .expect("get");
    assert_eq!(got, vec![commit_wire(&l, b), commit_wire(&l, a)]);

    r.update_ref("refs/heads/main", None, a, false)
        .expect("create");
    let err = r
        .update_ref("refs/heads/main", None, b, false)
        .expect_err("exists");
    assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
    r.update_ref("refs/heads/main", Some(a), b, false)
        .expect("fast-forward");
    let err = r
        .update_ref("refs/heads/main", Some(b), c, false)
        .expect_err("non-ff");
    assert!(matches!(err, RemoteError::NonFastForward { .. }), "{err:?}");
    let ghost = CommitId(ObjectId::of_bytes(b"ghost"));
    let err = r
        .update_ref("refs/heads/main", Some(b), ghost, true)
        .expect_err("missing");
    assert!(matches!(err, RemoteError::MissingObject { .. }), "{err:?}");
    r.update_ref("refs/tags/v1", None, a, false).expect("tag");
    assert_eq!(
        r.list_refs().expect("refs"),
        vec![
            ("refs/heads/main".to_string(), b),
            ("refs/tags/v1".to_string(), a)
        ]
    );
    r.update_ref("refs/heads/main", Some(b), c, true)
        .expect("forced");
    // Another prefix in the same bucket is another ledger.
    assert!(s3.remote("other").list_refs().expect("other").is_empty());
}

/// Two pushers read the ref, then both write: the conditional write lets
/// exactly the first one through and tells the second to pull, for a new
/// ref (create-if-absent) and an existing one (if-match). The interleaving
/// is forced step by step: s3s-fs checks conditions and then writes without
/// a lock, so truly simultaneous writes are not a property it can show
/// (stores with atomic conditional writes, e.g. AWS S3, are).
#[test]
fn s3_racing_pushers_cannot_lose_a_round() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let (_dir, mut l) = new_ledger(t.path(), "local");
    let base = commit_files(&mut l, t.path(), &[("x", b"base")], "base");
    let a = commit_files(&mut l, t.path(), &[("x", b"a")], "a");
    l.create_branch("other", base).expect("branch");
    l.switch("other").expect("switch");
    let b = commit_files(&mut l, t.path(), &[("x", b"b")], "b");
    let mut p1 = s3.remote("race");
    let mut p2 = s3.remote("race");
    put_commits(&mut p1, &l, &[base, a, b]);

    // New ref: both see it absent, both try to create it.
    let s1 = p1.read_ref_state("refs/heads/main").expect("read");
    let s2 = p2.read_ref_state("refs/heads/main").expect("read");
    assert_eq!((s1.commit(), s2.commit()), (None, None));
    p1.write_ref_if("refs/heads/main", s1, base, false)
        .expect("first create wins");
    let err = p2
        .write_ref_if("refs/heads/main", s2, a, false)
        .expect_err("second create loses");
    assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
    assert!(err.to_string().contains("pull"), "{err}");

    // Existing ref: both read base, both push a child of base (forced, so
    // only the version check decides).
    for (first, second) in [(a, b), (b, a)] {
        let s1 = p1.read_ref_state("refs/heads/main").expect("read");
        let s2 = p2.read_ref_state("refs/heads/main").expect("read");
        assert_eq!(s1.commit(), s2.commit());
        p1.write_ref_if("refs/heads/main", s1, first, true)
            .expect("first update wins");
        let err = p2
            .write_ref_if("refs/heads/main", s2, second, true)
            .expect_err("second loses");
        assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
        assert_eq!(
            p2.list_refs().expect("refs"),
            vec![("refs/heads/main".to_string(), first)]
        );
    }
    // Through the trait: a stale expectation is refused before writing.
    let err = p2
        .update_ref("refs/heads/main", Some(a), base, true)
        .expect_err("stale");
    assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
}

#[test]
fn s3_push_and_clone_round_trip() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let (src_dir, commits) = source(t.path(), 3 << 20);
    let src = Ledger::discover(&src_dir).expect("open src");
    let mut r = s3.remote("team/series");
    push(
        &mut r,
        &src,
        commits[1],
        "refs/heads/main",
        None,
        &mut |_| {},
    )
    .expect("push 1");
    push(
        &mut r,
        &src,
        commits[2],
        "refs/heads/main",
        Some(commits[1]),
        &mut |_| {},
    )
    .expect("push 2");
    // A second pusher that has not pulled is told to.
    let err = push(
        &mut s3.remote("team/series"),
        &src,
        commits[0],
        "refs/heads/main",
        Some(commits[1]),
        &mut |_| {},
    )
    .expect_err("stale");
    assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
    assert_eq!(
        r.list_refs().expect("refs"),
        vec![("refs/heads/main".to_string(), commits[2])]
    );

    // Clone into a fresh ledger.
    let ids = objects_in_order(&src, &[commits[2]]);
    let (_, mut dst) = new_ledger(t.path(), "clone");
    let mut c = s3.remote("team/series");
    // Trees and commits are not reordered by S3 (only bases/lists): fetch
    // in dependency order, as the transfer engine asks.
    fetch(&mut c, &mut dst, &ids, &mut |_| {}).expect("clone");
    dst.update_ref("refs/heads/main", None, Some(commits[2]), "clone")
        .expect("ref");
    assert_fsck_clean(&dst);
    same_files(&src, &dst, commits[2]);
    same_files(&src, &dst, commits[0]);

    // A damaged object in the bucket is refused on arrival and changes
    // nothing in the receiving ledger.
    let victim = ids[ids.len() / 2];
    let key = s3
        .root
        .join(s3_common::BUCKET)
        .join("team/series/objects")
        .join(victim.to_hex());
    let mut bytes = std::fs::read(&key).expect("stored object file");
    let n = bytes.len();
    bytes[n - 60] ^= 0x01;
    std::fs::write(&key, &bytes).expect("damage");
    let (_, mut fresh) = new_ledger(t.path(), "fresh");
    let before = fresh.stats().expect("stats").objects;
    let err = fetch(&mut c, &mut fresh, &[victim], &mut |_| {}).expect_err("damaged");
    assert!(!err.to_string().is_empty());
    assert_eq!(fresh.stats().expect("stats").objects, before);
}
