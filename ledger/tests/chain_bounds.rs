//! Bounds on delta chains. Readers follow at most 64 records
//! (`MAX_CHAIN`); writers keep chains within `delta_max_depth`, itself at
//! most `MAX_DELTA_DEPTH` (32 cost units, so at most 33 records), and so do
//! fetches: a receiver may hold a version deeper in its chains than the
//! sender, whose gc re-rooted it after the receiver fetched it, and the
//! sender's later links would stack on the receiver's deeper chain.

use crate::common;

use std::path::Path;

use bat_ledger::remote::transfer::fetch;
use bat_ledger::remote::DirRemote;
use bat_ledger::store::MAX_CHAIN;
use bat_ledger::{
    CommitId, CommitRequest, Ledger, Location, LockMode, NoProgress, ObjectId, MAX_DELTA_DEPTH,
};
use common::{no, perturb, safetensors, Rng};

/// Records in the chain of `id` in `l` (1 for a self-contained record).
fn chain_len(l: &Ledger, id: &ObjectId) -> usize {
    let mut n = 1;
    let mut cur = *id;
    while let Some(Location::Delta { base, .. }) = l.locate(&cur).unwrap().map(|r| r.location) {
        n += 1;
        cur = base;
    }
    n
}

/// The longest record chain behind any file of `commit` in `l`.
fn deepest(l: &Ledger, commit: &CommitId) -> usize {
    let tree = l.read_commit(commit).unwrap().tree;
    let mut most = 0;
    for f in l.walk_files(&tree).unwrap() {
        let row = l.locate(&f.id).unwrap().expect("stored");
        let ids: Vec<ObjectId> = match row.location {
            Location::Chunked { list } => l
                .read_chunk_list(&list)
                .unwrap()
                .chunks
                .iter()
                .map(|c| c.id)
                .collect(),
            _ => vec![f.id],
        };
        for id in ids {
            most = most.max(chain_len(l, &id));
        }
    }
    most
}

/// Check that every round's model reads back from `l` exactly; the
/// longest chain behind any of them.
fn check_rounds(l: &Ledger, rounds: &[(CommitId, Vec<u8>)]) -> usize {
    let mut most = 0;
    for (c, want) in rounds {
        most = most.max(deepest(l, c));
        let tree = l.read_commit(c).unwrap().tree;
        let f = l
            .walk_files(&tree)
            .unwrap()
            .into_iter()
            .find(|f| f.path == "model.safetensors")
            .expect("the model");
        assert_eq!(&l.read_bytes(&f.id).unwrap(), want, "round {c}");
    }
    most
}

/// Commit `model` (and a small text file) in `dir` to `l`.
fn commit_round(l: &mut Ledger, dir: &Path, model: &[u8], r: usize) -> CommitId {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("model.safetensors"), model).unwrap();
    std::fs::write(dir.join("notes.txt"), format!("round {r}\n")).unwrap();
    l.commit_dir(
        dir,
        &CommitRequest::new(format!("round {r}")),
        &NoProgress,
        &no(),
    )
    .unwrap()
    .commit
}

/// The everyday pattern: a sender that commits three rounds and runs gc,
/// a receiver that fetches after each gc. The receiver's chains are a few
/// records deeper than the sender's at most (measured: 6 records at
/// most), within its own limit, and every round reads back exactly.
#[test]
fn fetching_after_each_gc_of_the_sender_keeps_chains_short() {
    let t = tempfile::tempdir().unwrap();
    let (a_root, b_root) = (t.path().join("a"), t.path().join("b"));
    let a_dir = {
        let mut a = Ledger::init(&a_root).unwrap();
        a.config.chunk_threshold = 1024;
        a.dir().to_path_buf()
    };
    let mut b = Ledger::init(&b_root).unwrap();
    let limit = b.config.delta_max_depth as usize;
    let mut rng = Rng(7);
    let mut model = safetensors(&mut rng, 2, 6000);
    let mut rounds: Vec<(CommitId, Vec<u8>)> = Vec::new();
    let mut deepest_seen = 0;
    // Sixteen cycles of three rounds committed in A, a gc in A, a fetch
    // into B.
    for cycle in 0..16 {
        let mut a = Ledger::open_with(&a_dir, LockMode::Exclusive).unwrap();
        a.config.chunk_threshold = 1024;
        for _ in 0..3 {
            if !rounds.is_empty() {
                perturb(&mut rng, &mut model, 16);
            }
            let c = commit_round(&mut a, &t.path().join("work"), &model, rounds.len());
            rounds.push((c, model.clone()));
        }
        a.gc(&NoProgress, &no()).unwrap();
        assert!(
            deepest(&a, &rounds.last().unwrap().0) <= limit + 1,
            "the sender's own chains stay within its limit"
        );
        drop(a);
        let mut remote = DirRemote::open(&a_dir).unwrap();
        fetch(&mut b, &mut remote, "origin", None, &NoProgress, &no()).unwrap();
        for (c, _) in &rounds {
            let d = deepest(&b, c);
            deepest_seen = deepest_seen.max(d);
            assert!(
                d <= limit + 1,
                "cycle {cycle}: a chain of {d} records in the receiver (a keyframe and at most {limit} links expected)"
            );
        }
    }
    // Every round reads back exactly in the receiver, and fsck agrees.
    check_rounds(&b, &rounds);
    assert!(b.fsck(&NoProgress, &no()).unwrap().ok());
    let s = b.stats().unwrap();
    assert!(s.delta_objects > 0);
    assert!(
        deepest_seen > 2,
        "chains were built at all ({deepest_seen})"
    );
}

/// A library caller may set `delta_max_depth` above what readers follow:
/// commits then keep to `MAX_DELTA_DEPTH`, so the 70th round still commits
/// (it failed with "delta chain longer than 64 records" before) and every
/// round reads back.
#[test]
fn a_huge_delta_max_depth_is_capped_so_every_round_stays_readable() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(&t.path().join("l")).unwrap();
    l.config.chunk_threshold = 1024;
    l.config.delta_max_depth = 1000;
    assert_eq!(l.config.depth_limit(), MAX_DELTA_DEPTH);
    let mut rng = Rng(11);
    let mut model = safetensors(&mut rng, 1, 4000);
    let mut rounds = Vec::new();
    for r in 0..70 {
        if r > 0 {
            perturb(&mut rng, &mut model, 64);
        }
        let c = commit_round(&mut l, &t.path().join("work"), &model, r);
        rounds.push((c, model.clone()));
    }
    let most = check_rounds(&l, &rounds);
    assert!(
        most <= MAX_DELTA_DEPTH as usize + 1 && MAX_DELTA_DEPTH as usize + 1 < MAX_CHAIN,
        "chains of {most} records"
    );
    assert!(most > 10, "long chains were built ({most} records)");
}

/// A receiver whose chain for a version is much deeper than the sender's:
/// B commits 30 rounds with the deepest limit, A is a copy of B that runs
/// gc (which halves its chains) and commits 15 more rounds on top. Stored
/// as received, those 15 links would sit on B's chain of 30 (45 records,
/// and a few more such rounds past the 64 a reader follows); B stores a
/// version whole where its chain would pass `MAX_DELTA_DEPTH`, and every
/// round reads back exactly.
#[test]
fn a_fetch_never_stacks_a_chain_past_the_writers_limit() {
    let t = tempfile::tempdir().unwrap();
    let (a_root, b_root) = (t.path().join("a"), t.path().join("b"));
    let mut b = Ledger::init(&b_root).unwrap();
    b.config.chunk_threshold = 1024;
    b.config.delta_max_depth = MAX_DELTA_DEPTH;
    let mut rng = Rng(5);
    let mut model = safetensors(&mut rng, 1, 4000);
    let mut rounds: Vec<(CommitId, Vec<u8>)> = Vec::new();
    for r in 0..30 {
        if r > 0 {
            perturb(&mut rng, &mut model, 64);
        }
        let c = commit_round(&mut b, &t.path().join("work"), &model, r);
        rounds.push((c, model.clone()));
    }
    let b_deepest = deepest(&b, &rounds[29].0);
    assert!(
        b_deepest >= 25,
        "B built a long chain ({b_deepest} records)"
    );
    let b_dir = b.dir().to_path_buf();
    drop(b);
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&b_root)
        .arg(&a_root)
        .status()
        .unwrap();
    assert!(cp.success());
    let mut a = Ledger::open_with(&a_root.join(".bat"), LockMode::Exclusive).unwrap();
    a.config.chunk_threshold = 1024;
    a.config.delta_max_depth = MAX_DELTA_DEPTH;
    a.gc(&NoProgress, &no()).unwrap();
    let a_base = deepest(&a, &rounds[29].0);
    assert!(
        a_base < b_deepest / 2 + 3,
        "A's gc re-rooted ({a_base} records)"
    );
    for r in 30..45 {
        perturb(&mut rng, &mut model, 64);
        let c = commit_round(&mut a, &t.path().join("work"), &model, r);
        rounds.push((c, model.clone()));
    }
    drop(a);
    let mut b = Ledger::open(&b_dir).unwrap();
    let mut remote = DirRemote::open(&a_root).unwrap();
    fetch(&mut b, &mut remote, "origin", None, &NoProgress, &no()).unwrap();
    let most = check_rounds(&b, &rounds);
    assert!(
        most <= MAX_DELTA_DEPTH as usize + 1,
        "a chain of {most} records in the receiver"
    );
    assert!(b.fsck(&NoProgress, &no()).unwrap().ok());
}
