//! History at scale: streaming log over the commit index, index-based
//! revisions, the in-place catalog upgrade, pack consolidation by gc and the
//! bounded pack-handle cache.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, CommitRequest, Ledger, LockMode, NoProgress, TreeId};

fn no() -> AtomicBool {
    AtomicBool::new(false)
}

/// A ledger with one real commit of a small directory; returns its tree.
fn seeded(dir: &Path) -> (Ledger, TreeId) {
    let mut l = Ledger::init(dir).unwrap();
    let d = dir.join("data");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.txt"), b"hello\n").unwrap();
    let out = l
        .commit_dir(&d, &CommitRequest::new("seed"), &NoProgress, &no())
        .unwrap();
    (l, out.tree)
}

fn req(i: u64) -> CommitRequest {
    let mut r = CommitRequest::new(format!("commit {i}\n\nbody of {i}"));
    r.author = "bench".into();
    r.time = Some(1_700_000_000 + i as i64);
    r
}

/// `n` commits, `per_call` commits per pack segment.
fn chain(l: &mut Ledger, tree: TreeId, n: u64, per_call: u64) -> Vec<CommitId> {
    let mut ids = Vec::new();
    let mut i = 0;
    while i < n {
        let end = (i + per_call).min(n);
        ids.extend(l.commit_chain(tree, (i..end).map(req)).unwrap());
        i = end;
    }
    ids
}

#[test]
fn history_streams_one_commit_at_a_time() {
    let t = tempfile::tempdir().unwrap();
    let (mut l, tree) = seeded(t.path());
    let ids = chain(&mut l, tree, 2000, 2000);
    let mut h = l.history(*ids.last().unwrap(), None).unwrap();
    let mut seen = Vec::new();
    loop {
        // Structural bound: on a linear history the walk holds at most the
        // next commit to show, whatever the length.
        assert!(h.commits_held() <= 1, "held {}", h.commits_held());
        match h.next() {
            Some(item) => seen.push(item.unwrap().0),
            None => break,
        }
    }
    drop(h);
    assert_eq!(seen.len(), 2001, "2000 chained commits + the seed");
    let mut want: Vec<CommitId> = ids.iter().rev().copied().collect();
    want.push(l.resolve(&format!("HEAD~{}", 2000)).unwrap());
    assert_eq!(seen, want);
    // The collected form agrees, and a limit stops early.
    let collected: Vec<CommitId> = l
        .log(*ids.last().unwrap(), Some(20))
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(collected, want[..20]);
    // Commits come back equal to the objects themselves.
    for id in [ids[0], ids[999], ids[1999]] {
        assert_eq!(l.indexed_commit(&id).unwrap(), l.read_commit(&id).unwrap());
    }
}

#[test]
fn revisions_walk_the_index() {
    let t = tempfile::tempdir().unwrap();
    let (mut l, tree) = seeded(t.path());
    let ids = chain(&mut l, tree, 500, 500);
    assert_eq!(l.resolve("HEAD~499").unwrap(), ids[0]);
    assert_eq!(l.resolve("HEAD~100^").unwrap(), ids[398]);
    assert_eq!(l.resolve("HEAD~250~249").unwrap(), ids[0]);
    let seed = l.resolve("HEAD~500").unwrap();
    assert_eq!(l.read_commit(&seed).unwrap().message, "seed");
    let err = l.resolve("HEAD~501").unwrap_err();
    assert!(
        err.to_string().contains(&format!("{seed} has no parent")),
        "{err}"
    );
    assert!(l.resolve("HEAD^2").is_err());
}

fn catalog_schema(c: &rusqlite::Connection) -> String {
    c.query_row(
        "SELECT value FROM meta WHERE key = 'catalog_schema'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

fn count(c: &rusqlite::Connection, sql: &str) -> i64 {
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// A catalog written before commit bodies were indexed (schema 1) is
/// upgraded in place on open, and commits indexed without a body, or with
/// a body in the schema-2 place (as an older build writes them), still read.
#[test]
fn schema_1_catalog_is_upgraded_in_place() {
    let t = tempfile::tempdir().unwrap();
    let (mut l, tree) = seeded(t.path());
    let ids = chain(&mut l, tree, 50, 50);
    drop(l);
    let cat = t.path().join(".bat/catalog.sqlite");
    {
        let c = rusqlite::Connection::open(&cat).unwrap();
        c.execute_batch(
            "ALTER TABLE commits DROP COLUMN body; DROP TABLE commit_bodies;
             DELETE FROM meta WHERE key = 'catalog_schema';",
        )
        .unwrap();
    }
    let l = Ledger::open(&t.path().join(".bat")).unwrap();
    {
        let c = rusqlite::Connection::open(&cat).unwrap();
        assert_eq!(catalog_schema(&c), "3");
        assert_eq!(count(&c, "SELECT COUNT(*) FROM commit_bodies"), 51);
        assert_eq!(
            count(&c, "SELECT COUNT(*) FROM commits WHERE body IS NOT NULL"),
            0
        );
        // An older build would index new commits without a body ...
        c.execute(
            "DELETE FROM commit_bodies WHERE id = ?1",
            [ids[10].0.as_bytes().as_slice()],
        )
        .unwrap();
        // ... or with its body in `commits.body` (schema 2).
        c.execute(
            "UPDATE commits SET body = (SELECT body FROM commit_bodies WHERE id = ?1) WHERE id = ?1",
            [ids[30].0.as_bytes().as_slice()],
        )
        .unwrap();
        c.execute(
            "DELETE FROM commit_bodies WHERE id = ?1",
            [ids[30].0.as_bytes().as_slice()],
        )
        .unwrap();
        // A body that does not match its id is never believed.
        c.execute(
            "UPDATE commit_bodies SET body = (SELECT body FROM commit_bodies WHERE id = ?2) WHERE id = ?1",
            [
                ids[20].0.as_bytes().as_slice(),
                ids[21].0.as_bytes().as_slice(),
            ],
        )
        .unwrap();
    }
    let log = l.log(*ids.last().unwrap(), None).unwrap();
    assert_eq!(log.len(), 51);
    for (id, c) in &log {
        assert_eq!(*c, l.read_commit(id).unwrap());
    }
    let raw: Vec<_> = l
        .history_raw(*ids.last().unwrap(), None)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(raw.len(), 51);
    for ((id, r), (lid, c)) in raw.iter().zip(&log) {
        assert_eq!(id, lid);
        assert_eq!(
            r.metadata.get(),
            serde_json::to_string(&c.metadata).unwrap()
        );
    }
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
}

/// A schema-2 catalog (bodies in `commits.body`) has them moved to
/// `commit_bodies` on open, keeping every commit readable.
#[test]
fn schema_2_catalog_moves_bodies_out_of_the_commit_rows() {
    let t = tempfile::tempdir().unwrap();
    let (mut l, tree) = seeded(t.path());
    let ids = chain(&mut l, tree, 40, 40);
    drop(l);
    let cat = t.path().join(".bat/catalog.sqlite");
    {
        let c = rusqlite::Connection::open(&cat).unwrap();
        c.execute_batch(
            "UPDATE commits SET body = (SELECT body FROM commit_bodies b WHERE b.id = commits.id);
             DROP TABLE commit_bodies;
             UPDATE meta SET value = '2' WHERE key = 'catalog_schema';",
        )
        .unwrap();
        assert_eq!(
            count(&c, "SELECT COUNT(*) FROM commits WHERE body IS NOT NULL"),
            41
        );
    }
    let l = Ledger::open(&t.path().join(".bat")).unwrap();
    {
        let c = rusqlite::Connection::open(&cat).unwrap();
        assert_eq!(catalog_schema(&c), "3");
        assert_eq!(count(&c, "SELECT COUNT(*) FROM commit_bodies"), 41);
        assert_eq!(
            count(&c, "SELECT COUNT(*) FROM commits WHERE body IS NOT NULL"),
            0
        );
    }
    let log = l.log(*ids.last().unwrap(), None).unwrap();
    assert_eq!(log.len(), 41);
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
}

/// One pack per commit until gc; gc merges them into one pack, keeps every
/// commit readable and fsck clean, and a second gc has nothing to do.
#[test]
fn gc_consolidates_small_packs() {
    let t = tempfile::tempdir().unwrap();
    let (mut l, tree) = seeded(t.path());
    let ids = chain(&mut l, tree, 300, 1);
    assert_eq!(l.stats().unwrap().packs, 301);
    drop(l);
    let mut l = Ledger::open_with(&t.path().join(".bat"), LockMode::Exclusive).unwrap();
    let rep = l.gc(&NoProgress, &no()).unwrap();
    assert_eq!(rep.rewritten_packs, 301);
    assert_eq!(rep.removed_objects, 0);
    assert_eq!(l.stats().unwrap().packs, 1);
    let files = std::fs::read_dir(t.path().join(".bat/packs"))
        .unwrap()
        .count();
    assert_eq!(files, 1);
    assert!(l.fsck(&NoProgress, &no()).unwrap().ok());
    assert_eq!(l.log(*ids.last().unwrap(), None).unwrap().len(), 301);
    for id in &ids {
        l.read_commit(id).unwrap();
    }
    let again = l.gc(&NoProgress, &no()).unwrap();
    assert_eq!(again.rewritten_packs, 0);
}

/// Reading objects spread over hundreds of packs keeps a bounded number of
/// them open.
#[test]
fn pack_handle_cache_is_bounded() {
    let t = tempfile::tempdir().unwrap();
    let (mut l, tree) = seeded(t.path());
    let ids = chain(&mut l, tree, 200, 1);
    for id in &ids {
        l.read_commit(id).unwrap();
        assert!(l.open_pack_files() <= bat_ledger::store::MAX_OPEN_PACKS);
    }
    assert_eq!(l.open_pack_files(), bat_ledger::store::MAX_OPEN_PACKS);
}
