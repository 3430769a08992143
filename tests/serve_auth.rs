//! `bat serve` against real clients: the auth matrix, ref listing,
//! compare-and-swap ref updates and many concurrent clients. Every test
//! starts its own real server child on 127.0.0.1.

use bat::remote::http::{HttpOptions, HttpRemote};
use bat_ledger::remote::{Remote, RemoteError};
use bat_ledger::{Ledger, ObjectId};
use serve_common::*;

use crate::common::serve as serve_common;

fn client(url: &str, token: Option<&str>) -> HttpRemote {
    HttpRemote::new(
        url,
        HttpOptions {
            token: token.map(str::to_string),
            ..Default::default()
        },
    )
    .expect("client")
}

/// A ledger with a line of history a <- b and a side commit c (child of a).
fn history(root: &std::path::Path) -> (std::path::PathBuf, [bat_ledger::CommitId; 3]) {
    let (dir, mut l) = new_ledger(root, "server");
    let a = commit_files(&mut l, root, &[("x", b"one")], "a");
    let b = commit_files(&mut l, root, &[("x", b"two")], "b");
    l.create_branch("side", a).expect("branch");
    l.switch("side").expect("switch");
    let c = commit_files(&mut l, root, &[("x", b"three")], "c");
    l.switch("main").expect("switch back");
    (dir, [a, b, c])
}

#[test]
fn auth_matrix() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, [a, b, _]) = history(t.path());
    let srv = Server::with_tokens(&dir, t.path(), &[]);

    // No token: refused.
    let err = client(&srv.url, None)
        .list_refs()
        .expect_err("anonymous must be refused");
    assert!(matches!(err, RemoteError::Unauthorized { .. }), "{err:?}");
    // Unknown token: refused.
    let err = client(&srv.url, Some("not-a-token-at-all"))
        .list_refs()
        .expect_err("bad token");
    assert!(matches!(err, RemoteError::Unauthorized { .. }), "{err:?}");
    // Read token: reads, cannot write.
    let mut r = client(&srv.url, Some(READ_TOKEN));
    let refs = r.list_refs().expect("read token lists refs");
    assert!(
        refs.contains(&("refs/heads/main".to_string(), b)),
        "{refs:?}"
    );
    assert_eq!(
        r.has(&[a.0, ObjectId::of_bytes(b"absent")]).expect("has"),
        vec![true, false]
    );
    let err = r
        .update_ref("refs/heads/main", Some(b), a, true)
        .expect_err("read token cannot write");
    assert!(matches!(err, RemoteError::Unauthorized { .. }), "{err:?}");
    // Write token: moves the ref.
    let mut w = client(&srv.url, Some(WRITE_TOKEN));
    w.update_ref("refs/heads/main", Some(b), a, true)
        .expect("forced move back");
    let l = Ledger::discover(&dir).expect("open");
    assert_eq!(l.resolve("main").expect("resolve"), a);
}

#[test]
fn read_only_and_anonymous_read() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, [a, b, _]) = history(t.path());
    {
        let srv = Server::with_tokens(&dir, t.path(), &["--read-only"]);
        let mut w = client(&srv.url, Some(WRITE_TOKEN));
        assert!(w.list_refs().is_ok());
        let err = w
            .update_ref("refs/heads/main", Some(b), a, true)
            .expect_err("read-only");
        assert!(
            matches!(err, RemoteError::Unauthorized { ref reason, .. } if reason.contains("read-only")),
            "{err:?}"
        );
    }
    {
        // No token file: nothing is allowed.
        let srv = Server::start(&dir, &[]);
        let err = client(&srv.url, None)
            .list_refs()
            .expect_err("default refuses");
        assert!(matches!(err, RemoteError::Unauthorized { .. }), "{err:?}");
    }
    {
        let srv = Server::start(&dir, &["--allow-anonymous-read"]);
        let mut anon = client(&srv.url, None);
        assert_eq!(anon.list_refs().expect("anonymous read").len(), 2);
        let err = anon
            .update_ref("refs/heads/main", Some(b), a, true)
            .expect_err("anonymous write");
        assert!(matches!(err, RemoteError::Unauthorized { .. }), "{err:?}");
    }
    let l = Ledger::discover(&dir).expect("open");
    assert_eq!(
        l.resolve("main").expect("resolve"),
        b,
        "no refused request moved a ref"
    );
}

#[test]
fn ref_updates_are_compare_and_swap_and_fast_forward_only() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, [a, b, c]) = history(t.path());
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let mut w = client(&srv.url, Some(WRITE_TOKEN));

    // Stale expectation: told to pull.
    let err = w
        .update_ref("refs/heads/main", Some(a), c, false)
        .expect_err("stale");
    assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
    assert!(err.to_string().contains("pull"), "{err}");
    // Not a fast-forward (b -> c, siblings): refused without force.
    let err = w
        .update_ref("refs/heads/main", Some(b), c, false)
        .expect_err("non-ff");
    assert!(matches!(err, RemoteError::NonFastForward { .. }), "{err:?}");
    // A fast-forward on a new branch and from a to b.
    w.update_ref("refs/heads/new", None, a, false)
        .expect("create");
    let err = w
        .update_ref("refs/heads/new", None, a, false)
        .expect_err("exists already");
    assert!(matches!(err, RemoteError::RefMoved { .. }), "{err:?}");
    w.update_ref("refs/heads/new", Some(a), b, false)
        .expect("fast-forward");
    // A commit the server does not have: refused.
    let ghost = bat_ledger::CommitId(ObjectId::of_bytes(b"no such commit"));
    let err = w
        .update_ref("refs/heads/new", Some(b), ghost, true)
        .expect_err("missing");
    assert!(err.to_string().contains("not stored"), "{err}");
    // Force wins over non-ff.
    w.update_ref("refs/heads/main", Some(b), c, true)
        .expect("forced");

    let l = Ledger::discover(&dir).expect("open");
    assert_eq!(l.resolve("main").expect("main"), c);
    assert_eq!(l.resolve("new").expect("new"), b);
    assert_fsck_clean(&l);
}

#[test]
fn concurrent_pushes_to_one_branch_one_wins() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, [_, b, _]) = history(t.path());
    // Eight candidate children of b, each a different commit.
    let mut kids = Vec::new();
    {
        let mut l = Ledger::discover(&dir).expect("open");
        for i in 0..8u8 {
            l.create_branch(&format!("k{i}"), b).expect("branch");
            l.switch(&format!("k{i}")).expect("switch");
            kids.push(commit_files(
                &mut l,
                t.path(),
                &[("x", &[i; 3])],
                &format!("kid {i}"),
            ));
        }
        l.switch("main").expect("switch");
    }
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(kids.len()));
    let handles: Vec<_> = kids
        .iter()
        .map(|&k| {
            let url = srv.url.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut w = client(&url, Some(WRITE_TOKEN));
                barrier.wait();
                w.update_ref("refs/heads/main", Some(b), k, false)
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    let winners: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_ok())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for r in &results {
        if let Err(e) = r {
            assert!(
                matches!(e, RemoteError::RefMoved { .. }),
                "loser must be told to pull: {e:?}"
            );
        }
    }
    let l = Ledger::discover(&dir).expect("open");
    assert_eq!(l.resolve("main").expect("main"), kids[winners[0]]);
    assert_fsck_clean(&l);
}

#[test]
fn many_concurrent_readers() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, [a, b, c]) = history(t.path());
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let url = srv.url.clone();
            std::thread::spawn(move || {
                let mut r = client(&url, Some(READ_TOKEN));
                for _ in 0..10 {
                    let refs = r.list_refs().expect("refs");
                    assert_eq!(refs.len(), 2);
                    let probe = ObjectId::of_bytes(format!("absent {i}").as_bytes());
                    assert_eq!(
                        r.has(&[a.0, probe, b.0, c.0]).expect("has"),
                        vec![true, false, true, true]
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("reader thread");
    }
}

#[test]
fn malformed_requests_get_4xx() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, _) = history(t.path());
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let http = reqwest::Client::new();
    let post = |path: &str, body: Vec<u8>| {
        let req = http
            .post(format!("{}{path}", srv.url))
            .bearer_auth(WRITE_TOKEN)
            .body(body);
        rt.block_on(async { req.send().await.expect("send").status().as_u16() })
    };
    assert_eq!(post("/v1/has", vec![0u8; 33]), 400, "ids must be whole");
    assert_eq!(post("/v1/has", vec![0u8; 32 * 70_000]), 413, "too many ids");
    assert_eq!(post("/v1/refs/update", b"{not json".to_vec()), 400);
    assert_eq!(
        post(
            "/v1/refs/update",
            br#"{"name":"HEAD","expected":null,"new":"00"}"#.to_vec()
        ),
        400
    );
    assert_eq!(post("/v1/nope", vec![]), 404);
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, _) = history(t.path());
    let mut srv = Server::with_tokens(&dir, t.path(), &[]);
    assert!(client(&srv.url, Some(READ_TOKEN)).list_refs().is_ok());
    let st = std::process::Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
    let exit = srv.child.wait().expect("wait for the server");
    assert!(exit.success(), "graceful shutdown exits 0: {exit:?}");
    let l = Ledger::discover(&dir).expect("open");
    assert_fsck_clean(&l);
}

#[test]
fn has_accepts_more_ids_than_one_request_carries() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, [a, _, _]) = history(t.path());
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let mut r = client(&srv.url, Some(READ_TOKEN));
    // More ids than one request carries: the client splits them.
    let mut ids: Vec<ObjectId> = (0..70_000u32)
        .map(|i| ObjectId::of_bytes(&i.to_le_bytes()))
        .collect();
    ids[65_535] = a.0;
    ids[69_999] = a.0;
    let got = r.has(&ids).expect("has");
    assert_eq!(got.iter().filter(|h| **h).count(), 2);
    assert!(got[65_535] && got[69_999]);
}
