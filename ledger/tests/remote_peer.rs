//! Fetching from a malicious or broken peer: wrong bytes, a decompression
//! bomb, a path-traversal tree name, a ref to a missing commit, a stream
//! that breaks off, objects that are not what was asked for. Each gets a
//! clear error and leaves the local ledger byte-identical; a well-behaved
//! fetch afterwards still works. Also: push over the `Remote` trait with
//! compare-and-swap and fast-forward checks.

use crate::common;

use std::collections::HashMap;

use bat_ledger::remote::transfer::{fetch, push};
use bat_ledger::remote::{DirRemote, Remote, RemoteError, WireBody, WireObject};
use bat_ledger::{
    Commit, CommitId, Kind, Ledger, Mode, NoProgress, ObjectId, Tree, TreeEntry, TreeId,
};
use common::{no, series_ledger, state, Rng};

#[derive(Clone, Copy, Debug)]
enum Lie {
    FlipPayload,
    Bomb,
    Traversal,
    MissingRef,
    BreakOff,
    WrongObject,
}

struct Liar {
    inner: DirRemote,
    lie: Lie,
    extra: HashMap<ObjectId, WireObject>,
    extra_ref: Option<(String, CommitId)>,
    sent: usize,
}

impl Remote for Liar {
    fn url(&self) -> String {
        format!("liar({:?})", self.lie)
    }
    fn list_refs(&mut self) -> Result<Vec<(String, CommitId)>, RemoteError> {
        let mut r = self.inner.list_refs()?;
        if let Some(x) = &self.extra_ref {
            r.push(x.clone());
        }
        Ok(r)
    }
    fn has(&mut self, ids: &[ObjectId]) -> Result<Vec<bool>, RemoteError> {
        self.inner.has(ids)
    }
    fn get(
        &mut self,
        ids: &[ObjectId],
        sink: &mut dyn FnMut(WireObject) -> Result<(), RemoteError>,
    ) -> Result<(), RemoteError> {
        let mut normal = Vec::new();
        for id in ids {
            match self.extra.get(id) {
                Some(o) => sink(o.clone())?,
                None => normal.push(*id),
            }
        }
        let lie = self.lie;
        let sent = &mut self.sent;
        self.inner.get(&normal, &mut |mut o| {
            *sent += 1;
            match (lie, &mut o.body) {
                (Lie::FlipPayload, WireBody::Record { payload, .. })
                    if o.kind == Kind::Bytes && !payload.is_empty() =>
                {
                    let n = payload.len() / 2;
                    payload[n] ^= 0x20;
                }
                (Lie::Bomb, WireBody::Record { .. }) if o.kind == Kind::Bytes => {
                    let zeros = vec![0u8; 32 << 20];
                    o.body = WireBody::Record {
                        compression: 1,
                        payload: zstd::bulk::compress(&zeros, 3).unwrap(),
                    };
                }
                (Lie::BreakOff, _) if *sent > 5 => {
                    return Err(RemoteError::Protocol {
                        reason: "stream truncated in a payload".into(),
                    })
                }
                (Lie::WrongObject, WireBody::Record { .. }) if o.kind == Kind::Tree => {
                    o.id.0[5] ^= 1;
                }
                _ => {}
            }
            sink(o)
        })
    }
    fn put(
        &mut self,
        objects: &mut dyn Iterator<Item = Result<WireObject, RemoteError>>,
    ) -> Result<(), RemoteError> {
        self.inner.put(objects)
    }
    fn update_ref(
        &mut self,
        name: &str,
        expected: Option<CommitId>,
        new: CommitId,
        force: bool,
    ) -> Result<(), RemoteError> {
        self.inner.update_ref(name, expected, new, force)
    }
}

fn record(kind: Kind, raw: Vec<u8>) -> WireObject {
    WireObject {
        id: kind.id_of(&raw),
        kind,
        raw_len: raw.len() as u64,
        body: WireBody::Record {
            compression: 0,
            payload: raw,
        },
    }
}

#[test]
fn every_kind_of_lie_is_refused_and_changes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (_src, commits) = series_ledger(&t.path().join("src"), 3, 21);
    drop(_src);
    // The local ledger already fetched the first commit, so it is not empty.
    let mut local = Ledger::init(&t.path().join("local")).unwrap();
    {
        let mut r = DirRemote::open(&t.path().join("src")).unwrap();
        let tip = commits[0];
        bat_ledger::remote::transfer::fetch_objects(
            &mut local,
            &mut r,
            &[tip],
            None,
            &NoProgress,
            &no(),
        )
        .unwrap();
        local
            .update_ref("refs/heads/main", None, Some(tip), "seed")
            .unwrap();
    }
    // A commit whose tree holds an entry named "..".
    let blob = b"payload".to_vec();
    let mut enc = Tree::new(vec![TreeEntry {
        name: "zz".into(),
        mode: Mode::File,
        id: ObjectId::of_bytes(&blob),
        size: blob.len() as u64,
    }])
    .unwrap()
    .encode();
    let at = enc.windows(2).position(|w| w == b"zz").unwrap();
    enc[at..at + 2].copy_from_slice(b"..");
    let evil_tree = record(Kind::Tree, enc);
    let evil_commit = Commit {
        tree: TreeId(evil_tree.id),
        parents: vec![],
        author: "mallory".into(),
        time: 0,
        message: "escape".into(),
        metadata: serde_json::Value::Null,
        fields: Default::default(),
    };
    let evil_commit = record(Kind::Commit, evil_commit.encode().unwrap());

    for (lie, want) in [
        (Lie::FlipPayload, "does not"),
        (Lie::Bomb, "declared"),
        (Lie::Traversal, "not a valid tree"),
        (Lie::MissingRef, "missing"),
        (Lie::BreakOff, "truncated"),
        (Lie::WrongObject, "missing"),
    ] {
        let mut liar = Liar {
            inner: DirRemote::open(&t.path().join("src")).unwrap(),
            lie,
            extra: HashMap::new(),
            extra_ref: None,
            sent: 0,
        };
        match lie {
            Lie::Traversal => {
                liar.extra.insert(evil_tree.id, evil_tree.clone());
                liar.extra.insert(evil_commit.id, evil_commit.clone());
                liar.extra_ref = Some(("refs/heads/evil".into(), CommitId(evil_commit.id)));
            }
            Lie::MissingRef => {
                liar.extra_ref = Some(("refs/heads/ghost".into(), CommitId(ObjectId([0xab; 32]))));
            }
            _ => {}
        }
        let before = state(local.dir());
        let e = fetch(&mut local, &mut liar, "origin", None, &NoProgress, &no())
            .expect_err("a lie must be refused");
        assert!(
            e.to_string().contains(want),
            "{lie:?}: expected {want:?} in {e}"
        );
        assert_eq!(
            state(local.dir()),
            before,
            "{lie:?} changed the local ledger"
        );
        assert!(local
            .all_refs()
            .unwrap()
            .iter()
            .all(|(n, _)| !n.starts_with("refs/remotes/")));
    }
    // An honest fetch afterwards works and verifies.
    let mut honest = DirRemote::open(&t.path().join("src")).unwrap();
    let out = fetch(&mut local, &mut honest, "origin", None, &NoProgress, &no()).unwrap();
    assert!(out.stats.objects_stored > 0);
    assert!(local.fsck(&NoProgress, &no()).unwrap().ok());
}

#[test]
fn push_is_atomic_fast_forward_only_and_compare_and_swap() {
    let t = tempfile::tempdir().unwrap();
    let (a, ca) = series_ledger(&t.path().join("a"), 3, 1);
    let mut dest = DirRemote::open(&{
        Ledger::init(&t.path().join("dest")).unwrap();
        t.path().join("dest")
    })
    .unwrap();
    let out = push(
        &a,
        &mut dest,
        "refs/heads/main",
        "refs/heads/main",
        false,
        &NoProgress,
        &no(),
    )
    .unwrap();
    assert!(out.objects_sent > 0);
    let again = push(
        &a,
        &mut dest,
        "refs/heads/main",
        "refs/heads/main",
        false,
        &NoProgress,
        &no(),
    )
    .unwrap();
    assert!(again.up_to_date);
    // A remote ref that does not match what the pusher saw: CAS refused.
    let e = dest
        .update_ref("refs/heads/main", Some(ca[0]), ca[1], false)
        .unwrap_err();
    assert!(matches!(e, RemoteError::RefMoved { .. }), "{e}");
    // Backwards without force: not a fast-forward.
    let e = dest
        .update_ref("refs/heads/main", Some(ca[2]), ca[0], false)
        .unwrap_err();
    assert!(matches!(e, RemoteError::NonFastForward { .. }), "{e}");
    dest.update_ref("refs/heads/main", Some(ca[2]), ca[0], true)
        .unwrap();
    // A ref to a commit the remote does not have is refused.
    let (_b, cb) = series_ledger(&t.path().join("b"), 1, 99);
    let e = dest
        .update_ref("refs/heads/other", None, cb[0], false)
        .unwrap_err();
    assert!(matches!(e, RemoteError::MissingObject { .. }), "{e}");
    assert!(dest.ledger().fsck(&NoProgress, &no()).unwrap().ok());
}

/// A push to a directory remote is imported batch by batch, each batch
/// checked while the one before is stored: a lie in the second batch
/// stops the push with every object of the first batch stored and none
/// of the lying batch's, and the same objects sent honestly afterwards
/// all arrive.
#[test]
fn a_lie_in_a_later_batch_of_a_dir_push_keeps_the_batches_before() {
    const PIECE: usize = 4 << 20;
    let t = tempfile::tempdir().unwrap();
    Ledger::init(&t.path().join("dest")).unwrap();
    let mut dest = DirRemote::open(&t.path().join("dest")).unwrap();
    // Incompressible pieces, so each counts its full size towards a batch:
    // 36 × 4 MiB make three batches of 64 MiB (16 + 16 + 4 pieces).
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let honest: Vec<WireObject> = (0..36)
        .map(|_| record(Kind::Bytes, rng.bytes(PIECE)))
        .collect();
    let mut lying = honest.clone();
    if let WireBody::Record { payload, .. } = &mut lying[20].body {
        payload[PIECE / 2] ^= 1;
    }
    let e = dest
        .put(&mut lying.into_iter().map(Ok))
        .expect_err("a piece that does not match its id is refused");
    assert!(e.to_string().contains(&honest[20].id.to_hex()), "{e}");
    let stored: Vec<bool> = honest
        .iter()
        .map(|o| dest.ledger().contains(&o.id).unwrap())
        .collect();
    assert_eq!(stored[..16], [true; 16], "the first batch is kept");
    assert_eq!(
        stored[16..],
        [false; 20],
        "nothing of the lying batch or after"
    );
    assert!(dest.ledger().fsck(&NoProgress, &no()).unwrap().ok());

    dest.put(&mut honest.iter().cloned().map(Ok)).unwrap();
    for o in &honest {
        assert!(dest.ledger().contains(&o.id).unwrap());
    }
    assert!(dest.ledger().fsck(&NoProgress, &no()).unwrap().ok());
}
