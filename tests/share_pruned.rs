//! Retention and sharing compose: a ledger pruned by `bat gc --keep`
//! bundles, pushes (directory, `bat serve`, S3) and clones, its pruned
//! checkpoints travelling as absent entries that every receiver records as
//! pruned (fsck-clean), and `bat fetch` from a full remote restores them.
//! Per-remote credentials: a partial clone of a token-protected `bat serve`
//! reads lazily with the token stored for its remote, never printed and
//! never in the ledger's objects.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::bat_in as bat;
use crate::common::s3 as s3_common;
use crate::common::serve as serve_common;
use crate::common::stderr;
use crate::common::succeeded as ok;

fn json(cmd: &mut Command) -> Value {
    let out = ok(cmd.arg("--json").output().expect("run bat"));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn init(dir: &Path) {
    ok(crate::common::bat()
        .arg("init")
        .arg(dir)
        .output()
        .expect("init"));
}

/// fsck of `dir` is clean; returns its count of pruned files.
fn fsck_pruned(dir: &Path) -> u64 {
    let f = json(bat(dir).arg("fsck"));
    assert_eq!(f["ok"], true, "{}: {f}", dir.display());
    f["pruned_files"].as_u64().expect("pruned_files")
}

/// A 3-round demo campaign pruned by `gc --keep last=1`, and a full copy
/// of it made before the gc. Returns (campaign, mirror, files pruned).
fn pruned_campaign(root: &Path) -> (PathBuf, PathBuf, u64) {
    let dir = root.join("campaign");
    json(
        crate::common::bat()
            .arg("demo")
            .arg(&dir)
            .args(["--rounds", "3"]),
    );
    let mirror = root.join("mirror");
    ok(Command::new("cp")
        .arg("-a")
        .arg(&dir)
        .arg(&mirror)
        .output()
        .expect("cp"));
    let rep = json(bat(&dir).args(["gc", "--keep", "last=1"]));
    let pruned = rep["pruned_files"].as_u64().expect("pruned_files");
    assert!(pruned > 0, "{rep}");
    assert_eq!(fsck_pruned(&dir), pruned);
    (dir, mirror, pruned)
}

/// `checkout r01` of `dir` fails as pruned (not as damage); returns stderr.
fn r01_is_pruned(dir: &Path, to: &Path) -> String {
    let out = bat(dir)
        .args(["checkout", "r01", "--to"])
        .arg(to)
        .output()
        .expect("checkout");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("was pruned by"), "{err}");
    assert!(!err.contains("corrupt"), "{err}");
    err
}

#[test]
fn pruned_ledger_bundles_clones_and_fetch_restores() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mirror, pruned) = pruned_campaign(t.path());
    let file = t.path().join("campaign.batb");
    let made = json(bat(&dir).args(["bundle", "create"]).arg(&file));
    assert!(made["summary"]["absent"].as_u64() > Some(0), "{made}");
    let verified = json(bat(&dir).args(["bundle", "verify"]).arg(&file));
    assert_eq!(
        verified["summary"]["absent"], made["summary"]["absent"],
        "{verified}"
    );

    let clone = t.path().join("from-bundle");
    json(crate::common::bat().arg("clone").arg(&file).arg(&clone));
    assert_eq!(fsck_pruned(&clone), pruned);
    let err = r01_is_pruned(&clone, &t.path().join("co-pruned"));
    assert!(err.contains("received marked absent"), "{err}");
    // The hint is true for a clone: its source pruned the file too, so
    // fetching from there again cannot restore it.
    assert!(
        err.contains("fetching from that ledger again does not restore it"),
        "{err}"
    );
    // What was kept reads back.
    ok(bat(&clone)
        .args(["checkout", "main", "--to"])
        .arg(t.path().join("co-main"))
        .output()
        .expect("checkout"));

    // A full remote restores every pruned file, verified.
    ok(bat(&clone)
        .args(["remote", "add", "mirror"])
        .arg(&mirror)
        .output()
        .expect("remote add"));
    let f = json(bat(&clone).args(["fetch", "mirror"]));
    assert!(f["stats"]["objects_stored"].as_u64() >= Some(pruned), "{f}");
    assert_eq!(fsck_pruned(&clone), 0);
    let (a, b) = (t.path().join("r01-restored"), t.path().join("r01-mirror"));
    ok(bat(&clone)
        .args(["checkout", "r01", "--to"])
        .arg(&a)
        .output()
        .expect("checkout"));
    ok(bat(&mirror)
        .args(["checkout", "r01", "--to"])
        .arg(&b)
        .output()
        .expect("checkout"));
    assert_same_tree(&a, &b);
}

fn assert_same_tree(a: &Path, b: &Path) {
    let mut n = 0;
    for e in walk(b) {
        let rel = e.strip_prefix(b).expect("below");
        assert_eq!(
            std::fs::read(a.join(rel)).expect("restored file"),
            std::fs::read(&e).expect("mirror file"),
            "{}",
            rel.display()
        );
        n += 1;
    }
    assert!(n > 0);
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn pruned_ledger_pushes_to_directory_http_and_s3() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mirror, pruned) = pruned_campaign(t.path());

    // A new directory remote.
    let empty = t.path().join("empty");
    init(&empty);
    ok(bat(&dir)
        .args(["remote", "add", "empty"])
        .arg(&empty)
        .output()
        .expect("remote add"));
    ok(bat(&dir)
        .args(["push", "empty", "main"])
        .output()
        .expect("push"));
    let on_dir = fsck_pruned(&empty);
    assert!(on_dir > 0 && on_dir <= pruned, "{on_dir} of {pruned}");
    r01_is_pruned(&empty, &t.path().join("co-dir"));

    // A new `bat serve` ledger.
    let served = t.path().join("served");
    init(&served);
    let srv = serve_common::Server::with_tokens(&served, t.path(), &[]);
    ok(bat(&dir)
        .args(["remote", "add", "srv", &srv.url])
        .output()
        .expect("remote add"));
    ok(bat(&dir)
        .args(["--token", serve_common::WRITE_TOKEN, "push", "srv", "main"])
        .output()
        .expect("push"));
    assert_eq!(fsck_pruned(&served), on_dir);
    // A clone over HTTP records the same marks, and fetching from the
    // full mirror restores them.
    let via_http = t.path().join("via-http");
    ok(crate::common::bat()
        .args(["--token", serve_common::READ_TOKEN, "clone", &srv.url])
        .arg(&via_http)
        .output()
        .expect("clone"));
    assert_eq!(fsck_pruned(&via_http), on_dir);
    ok(bat(&via_http)
        .args(["remote", "add", "mirror"])
        .arg(&mirror)
        .output()
        .expect("remote add"));
    json(bat(&via_http).args(["fetch", "mirror"]));
    assert_eq!(fsck_pruned(&via_http), 0);

    // S3 (s3s-fs on 127.0.0.1), when available.
    let Some(s3) = s3_common::S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let env = [
        ("AWS_ACCESS_KEY_ID", s3_common::ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", s3_common::SECRET_KEY),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", s3.endpoint.as_str()),
    ];
    let url = format!("s3://{}/pruned/ledger", s3_common::BUCKET);
    ok(bat(&dir)
        .args(["remote", "add", "s3", &url])
        .output()
        .expect("remote add"));
    ok(bat(&dir)
        .envs(env)
        .args(["push", "s3", "main"])
        .output()
        .expect("push"));
    let via_s3 = t.path().join("via-s3");
    ok(crate::common::bat()
        .envs(env)
        .args(["clone", &url])
        .arg(&via_s3)
        .output()
        .expect("clone"));
    assert_eq!(fsck_pruned(&via_s3), on_dir);
    r01_is_pruned(&via_s3, &t.path().join("co-s3"));
    // Fetching again from the pruned S3 remote restores nothing (it holds
    // only absent entries, which it never counts as stored) and changes
    // nothing; a full remote restores the files.
    let again = json(bat(&via_s3).envs(env).args(["fetch", "origin"]));
    assert_eq!(again["stats"]["objects_stored"], 0, "{again}");
    assert_eq!(fsck_pruned(&via_s3), on_dir);
    ok(bat(&via_s3)
        .args(["remote", "add", "mirror"])
        .arg(&mirror)
        .output()
        .expect("remote add"));
    json(bat(&via_s3).args(["fetch", "mirror"]));
    assert_eq!(fsck_pruned(&via_s3), 0);
}

/// Every byte of stdout and stderr.
fn all_output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Files under `dir` (recursively) whose bytes contain `needle`, except
/// `skip`.
fn files_containing(dir: &Path, needle: &[u8], skip: &Path) -> Vec<PathBuf> {
    walk(dir)
        .into_iter()
        .filter(|p| p != skip)
        .filter(|p| {
            std::fs::read(p)
                .map(|b| b.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn partial_clone_reads_lazily_with_a_stored_credential() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().expect("tempdir");
    let origin = t.path().join("origin");
    json(
        crate::common::bat()
            .arg("demo")
            .arg(&origin)
            .args(["--rounds", "2"]),
    );
    let srv = serve_common::Server::with_tokens(&origin, t.path(), &[]);
    let token = serve_common::READ_TOKEN;
    let token_file = t.path().join("my-token");
    std::fs::write(&token_file, format!("{token}\n")).expect("write token file");
    let dest = t.path().join("partial");
    let mut outputs = Vec::new();
    let out = ok(crate::common::bat()
        .args(["clone", "--filter", "no-checkpoints", "--token-file"])
        .arg(&token_file)
        .arg(&srv.url)
        .arg(&dest)
        .output()
        .expect("clone"));
    outputs.push(all_output(&out));
    // The token file is not needed any more.
    std::fs::remove_file(&token_file).expect("remove token file");
    let creds = dest.join(".bat/credentials");
    let mode = std::fs::metadata(&creds)
        .expect("credentials stored")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Lazy reads of promised checkpoints find the token without --token.
    let co = t.path().join("co");
    let out = ok(bat(&dest)
        .args(["checkout", "r01", "--to"])
        .arg(&co)
        .output()
        .expect("checkout"));
    outputs.push(all_output(&out));
    assert!(walk(&co)
        .iter()
        .any(|p| p.to_string_lossy().contains("candidate")));
    // Fetch too; and the remote listing says a credential is stored,
    // without it.
    for args in [
        &["fetch", "origin"][..],
        &["remote", "list"],
        &["remote", "list", "--json"],
    ] {
        let out = ok(bat(&dest).args(args).output().expect("bat"));
        outputs.push(all_output(&out));
    }
    assert!(outputs[3].contains("credential: token"), "{}", outputs[3]);

    // A helper works as well; a failing one says so without the token.
    let helper = t.path().join("helper.sh");
    std::fs::write(&helper, format!("#!/bin/sh\necho {token}\n")).expect("write helper");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    ok(bat(&dest)
        .args(["remote", "credential", "origin", "--credential-helper"])
        .arg(&helper)
        .output()
        .expect("credential"));
    let out = ok(bat(&dest)
        .args(["checkout", "r02", "--to"])
        .arg(t.path().join("co2"))
        .output()
        .expect("checkout"));
    outputs.push(all_output(&out));
    std::fs::write(&helper, format!("#!/bin/sh\necho {token}\nexit 4\n")).expect("write helper");
    let out = bat(&dest)
        .args(["fetch", "origin"])
        .output()
        .expect("fetch");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("credential helper"),
        "{}",
        stderr(&out)
    );
    outputs.push(all_output(&out));

    // Without any credential the server refuses.
    ok(bat(&dest)
        .args(["remote", "credential", "origin", "--clear"])
        .output()
        .expect("clear"));
    assert!(!creds.exists());
    let out = bat(&dest)
        .args(["fetch", "origin"])
        .output()
        .expect("fetch");
    assert!(!out.status.success());
    outputs.push(all_output(&out));

    for (i, o) in outputs.iter().enumerate() {
        assert!(!o.contains(token), "output {i} shows the token: {o}");
    }
    // Stored again, the token is in .bat/credentials and in no other file
    // of the ledger (catalog, packs, config).
    std::fs::write(&token_file, format!("{token}\n")).expect("write token file");
    ok(bat(&dest)
        .args(["remote", "credential", "origin", "--token-file"])
        .arg(&token_file)
        .output()
        .expect("credential"));
    json(bat(&dest).args(["fetch", "origin"]));
    assert!(creds.exists());
    let leaks = files_containing(&dest.join(".bat"), token.as_bytes(), &creds);
    assert!(leaks.is_empty(), "the token is in {leaks:?}");
}
