//! Objects through a real `bat serve`: push and clone round trips with the
//! `Remote` trait of the HTTP client, kill -9 of the server mid-push and
//! mid-clone (both sides fsck-clean, the retry completes).

use bat::remote::http::{HttpOptions, HttpRemote};
use bat_ledger::remote::Remote;
use bat_ledger::{Ledger, ObjectId};
use serve_common::*;

use crate::common::serve as serve_common;

fn client(url: &str) -> HttpRemote {
    HttpRemote::new(
        url,
        HttpOptions {
            token: Some(WRITE_TOKEN.to_string()),
            ..Default::default()
        },
    )
    .expect("client")
}

#[test]
fn push_and_clone_round_trip_over_http() {
    let t = tempfile::tempdir().expect("tempdir");
    let (src_dir, commits) = source(t.path(), 0);
    let src = Ledger::discover(&src_dir).expect("open src");
    let (srv_dir, _) = new_ledger(t.path(), "server");
    let srv = Server::with_tokens(&srv_dir, t.path(), &[]);
    let mut r = client(&srv.url);

    // Push the first commit, then fast-forward to the last.
    push(
        &mut r,
        &src,
        commits[0],
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
        Some(commits[0]),
        &mut |_| {},
    )
    .expect("push 2");
    assert_eq!(
        r.list_refs().expect("refs"),
        vec![("refs/heads/main".to_string(), commits[2])]
    );
    let ids = objects_in_order(&src, &[commits[2]]);
    assert!(r.has(&ids).expect("has").iter().all(|h| *h));
    {
        let server = Ledger::discover(&srv_dir).expect("open server");
        assert_fsck_clean(&server);
        same_files(&src, &server, commits[2]);
    }

    // Clone into a fresh ledger: every object, asked in reverse order (the
    // server puts bases first).
    let (_, mut dst) = new_ledger(t.path(), "clone");
    let mut reversed = ids.clone();
    reversed.reverse();
    fetch(&mut r, &mut dst, &reversed, &mut |_| {}).expect("clone");
    dst.update_ref("refs/heads/main", None, Some(commits[2]), "clone")
        .expect("ref");
    assert_fsck_clean(&dst);
    same_files(&src, &dst, commits[2]);
    same_files(&src, &dst, commits[0]);

    // Asking for an object the server lacks is a clear error.
    let err = r
        .get(&[ObjectId::of_bytes(b"absent")], &mut |_| Ok(()))
        .expect_err("absent");
    assert!(err.to_string().contains("not stored"), "{err}");
}

#[test]
fn kill_9_mid_push_then_retry_completes() {
    let t = tempfile::tempdir().expect("tempdir");
    let (src_dir, commits) = source(t.path(), 24 << 20);
    let src = Ledger::discover(&src_dir).expect("open src");
    let (srv_dir, _) = new_ledger(t.path(), "server");
    let mut srv = Server::with_tokens(&srv_dir, t.path(), &["--put-batch-bytes", "1048576"]);
    let ids = objects_in_order(&src, &[commits[2]]);
    let first = ids[0];
    let probe = srv_dir.clone();
    let mut killed = false;
    let err = push(
        &mut client(&srv.url),
        &src,
        commits[2],
        "refs/heads/main",
        None,
        &mut |n| {
            // Once the server has made the first batch durable, kill it while
            // the upload is still streaming.
            if n == 12 && !killed {
                loop {
                    let l = Ledger::discover(&probe).expect("open server");
                    if l.contains(&first).expect("contains") {
                        break;
                    }
                    drop(l);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                srv.kill9();
                killed = true;
            }
        },
    )
    .expect_err("the push must fail when the server dies");
    assert!(killed, "the kill point was never reached: {err}");
    {
        let server = Ledger::discover(&srv_dir).expect("open server");
        assert_fsck_clean(&server);
        assert!(
            server.list_refs("refs/").expect("refs").is_empty(),
            "no ref moved"
        );
        assert!(server.contains(&first).expect("contains"));
    }
    assert_fsck_clean(&src);

    let srv = Server::with_tokens(&srv_dir, t.path(), &["--put-batch-bytes", "1048576"]);
    push(
        &mut client(&srv.url),
        &src,
        commits[2],
        "refs/heads/main",
        None,
        &mut |_| {},
    )
    .expect("retry");
    let server = Ledger::discover(&srv_dir).expect("open server");
    assert_eq!(server.resolve("main").expect("main"), commits[2]);
    assert_fsck_clean(&server);
    same_files(&src, &server, commits[2]);
}

#[test]
fn kill_9_mid_clone_then_retry_completes() {
    let t = tempfile::tempdir().expect("tempdir");
    // 48 MiB of incompressible data: more than loopback socket buffers hold,
    // so the server is still sending when it dies.
    let (src_dir, commits) = source(t.path(), 48 << 20);
    let srv = Server::with_tokens(&src_dir, t.path(), &["--read-only"]);
    let src = Ledger::discover(&src_dir).expect("open src");
    let ids = objects_in_order(&src, &[commits[2]]);
    let (_, mut dst) = new_ledger(t.path(), "clone");
    let mut srv = Some(srv);
    let err = fetch(
        &mut client(&srv.as_ref().expect("server").url),
        &mut dst,
        &ids,
        &mut |n| {
            if n == 1 {
                if let Some(mut s) = srv.take() {
                    s.kill9();
                }
            }
        },
    )
    .expect_err("the clone must fail when the server dies");
    assert!(srv.is_none(), "the kill point was never reached: {err}");
    assert_fsck_clean(&dst);
    assert!(dst.list_refs("refs/").expect("refs").is_empty());

    let srv = Server::with_tokens(&src_dir, t.path(), &["--read-only"]);
    fetch(&mut client(&srv.url), &mut dst, &ids, &mut |_| {}).expect("retry");
    dst.update_ref("refs/heads/main", None, Some(commits[2]), "clone")
        .expect("ref");
    assert_fsck_clean(&dst);
    same_files(&src, &dst, commits[2]);
    assert_fsck_clean(&src);
}
