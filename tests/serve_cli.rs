//! The CLI end to end against real servers on 127.0.0.1: `bat push`,
//! `bat clone`, `bat pull` through `bat serve` with tokens from `--token`
//! and `BAT_TOKEN`, racing CLI pushes, and the same verbs on an s3:// remote
//! (s3s-fs) with the AWS environment variables and `--endpoint`.

use std::process::Output;

use bat_ledger::Ledger;
use serve_common::*;

use crate::common::output_env as bat;
use crate::common::s3 as s3_common;
use crate::common::serve as serve_common;

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "bat failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn push_clone_pull_through_bat_serve() {
    let t = tempfile::tempdir().expect("tempdir");
    let (src_dir, commits) = source(t.path(), 0);
    let (srv_dir, _) = new_ledger(t.path(), "server");
    let srv = Server::with_tokens(&srv_dir, t.path(), &[]);
    ok(&bat(&src_dir, &[], &["remote", "add", "origin", &srv.url]));

    // No token: refused with a clear message.
    let o = bat(&src_dir, &[], &["push", "origin", "main"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unauthorized"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A read token cannot push.
    let o = bat(
        &src_dir,
        &[("BAT_TOKEN", READ_TOKEN)],
        &["push", "origin", "main"],
    );
    assert!(!o.status.success());
    // The write token from the environment, then from --token.
    ok(&bat(
        &src_dir,
        &[("BAT_TOKEN", WRITE_TOKEN)],
        &["push", "origin", "main"],
    ));
    assert_eq!(
        Ledger::discover(&srv_dir)
            .expect("open")
            .resolve("main")
            .expect("main"),
        commits[2]
    );

    let dest = t.path().join("copy");
    let o = bat(
        t.path(),
        &[],
        &["clone", &srv.url, dest.to_str().expect("utf-8")],
    );
    assert!(!o.status.success(), "clone without a token must fail");
    ok(&bat(
        t.path(),
        &[],
        &[
            "--token",
            READ_TOKEN,
            "clone",
            &srv.url,
            dest.to_str().expect("utf-8"),
        ],
    ));
    ok(&bat(&dest, &[], &["fsck"]));
    let copy = Ledger::discover(&dest).expect("open copy");
    assert_eq!(copy.resolve("main").expect("main"), commits[2]);
    same_files(&Ledger::discover(&src_dir).expect("src"), &copy, commits[2]);
    drop(copy);

    // A new commit at the source reaches the copy through push + pull.
    let mut l = Ledger::discover(&src_dir).expect("open");
    let next = commit_files(&mut l, t.path(), &[("late.txt", b"late")], "late");
    drop(l);
    ok(&bat(&src_dir, &[], &["--token", WRITE_TOKEN, "push"]));
    ok(&bat(&dest, &[("BAT_TOKEN", READ_TOKEN)], &["pull"]));
    assert_eq!(
        Ledger::discover(&dest)
            .expect("open")
            .resolve("main")
            .expect("main"),
        next
    );
    ok(&bat(&srv_dir, &[], &["fsck"]));
}

#[test]
fn racing_cli_pushes_one_wins_the_other_is_told_to_pull() {
    let t = tempfile::tempdir().expect("tempdir");
    let (src_dir, _) = source(t.path(), 0);
    let srv = Server::with_tokens(&src_dir, t.path(), &[]);
    let token = [("BAT_TOKEN", WRITE_TOKEN)];
    let mut dirs = Vec::new();
    for i in 0..2 {
        let d = t.path().join(format!("dev{i}"));
        ok(&bat(
            t.path(),
            &token,
            &["clone", &srv.url, d.to_str().expect("utf-8")],
        ));
        let mut l = Ledger::discover(&d).expect("open");
        commit_files(
            &mut l,
            &t.path().join(format!("scratch{i}")),
            &[("mine.txt", format!("dev {i}").as_bytes())],
            "work",
        );
        dirs.push(d);
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = dirs
        .iter()
        .cloned()
        .map(|d| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                bat(&d, &[("BAT_TOKEN", WRITE_TOKEN)], &["push"])
            })
        })
        .collect();
    let outs: Vec<Output> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    let wins = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(
        wins,
        1,
        "{:?}",
        outs.iter()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .collect::<Vec<_>>()
    );
    let loser = outs.iter().find(|o| !o.status.success()).expect("a loser");
    let msg = String::from_utf8_lossy(&loser.stderr).to_lowercase();
    assert!(msg.contains("pull") || msg.contains("fetch"), "{msg}");
    ok(&bat(&src_dir, &[], &["fsck"]));
}

#[test]
fn push_and_clone_through_s3_with_aws_environment() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = s3_common::S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let (src_dir, commits) = source(t.path(), 1 << 20);
    let url = format!("s3://{}/cli/ledger", s3_common::BUCKET);
    let env = [
        ("AWS_ACCESS_KEY_ID", s3_common::ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", s3_common::SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
    ];
    ok(&bat(&src_dir, &[], &["remote", "add", "origin", &url]));
    ok(&bat(
        &src_dir,
        &env,
        &["--endpoint", &s3.endpoint, "push", "origin", "main"],
    ));
    let dest = t.path().join("copy");
    let mut env2 = env.to_vec();
    env2.push(("AWS_ENDPOINT_URL", &s3.endpoint));
    ok(&bat(
        t.path(),
        &env2,
        &["clone", &url, dest.to_str().expect("utf-8")],
    ));
    ok(&bat(&dest, &[], &["fsck"]));
    let copy = Ledger::discover(&dest).expect("open copy");
    assert_eq!(copy.resolve("main").expect("main"), commits[2]);
    same_files(&Ledger::discover(&src_dir).expect("src"), &copy, commits[2]);
    // Wrong credentials: a clear failure, nothing created.
    let bad = [
        ("AWS_ACCESS_KEY_ID", "nobody"),
        ("AWS_SECRET_ACCESS_KEY", "wrong-secret-000"),
        ("AWS_ENDPOINT_URL", s3.endpoint.as_str()),
    ];
    let o = bat(
        t.path(),
        &bad,
        &[
            "clone",
            &url,
            t.path().join("nope").to_str().expect("utf-8"),
        ],
    );
    assert!(!o.status.success());
}
