//! Seeds of one experiment run on different machines meet in one shared
//! remote: two clones each run another seed of the same simulator arm and
//! `bat push` it to one S3 remote (s3s-fs on 127.0.0.1); a third clone gets
//! both and `bat compare` reads them.

use std::path::Path;

use crate::common::s3 as s3_common;
use crate::common::{bat, stderr};

/// `bat -C dir ARGS` with the S3 credentials of the test server.
fn run(dir: &Path, env: &[(&str, String)], args: &[&str]) -> std::process::Output {
    let mut c = bat();
    c.arg("-C").arg(dir).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run bat")
}

fn ok(dir: &Path, env: &[(&str, String)], args: &[&str]) -> std::process::Output {
    let out = run(dir, env, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out
}

#[test]
fn two_clones_push_different_seeds_to_one_s3_remote_and_a_third_compares_them() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = s3_common::S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let env = [
        ("AWS_ACCESS_KEY_ID", s3_common::ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", s3_common::SECRET_KEY.to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ENDPOINT_URL", s3.endpoint.clone()),
    ];
    let url = format!("s3://{}/experiment", s3_common::BUCKET);
    let root = t.path();
    let sim = ["run", "--backend", "sim", "--rounds", "2", "--batches", "2"];
    // Machine A starts the experiment with seed 0 and publishes it.
    let a = root.join("a");
    ok(root, &[], &["init", a.to_str().expect("utf-8")]);
    let mut args = sim.to_vec();
    args.extend(["--branch", "exp", "--seeds", "0"]);
    ok(&a, &env, &args);
    ok(&a, &env, &["remote", "add", "origin", &url]);
    ok(&a, &env, &["push", "origin", "exp/s0"]);
    // Machine B clones it and adds seed 1.
    let b = root.join("b");
    ok(root, &env, &["clone", &url, b.to_str().expect("utf-8")]);
    let mut args = sim.to_vec();
    args.extend(["--branch", "exp", "--seeds", "1"]);
    ok(&b, &env, &args);
    ok(&b, &env, &["push", "origin", "exp/s1"]);
    // Machine C sees both seeds and compares them.
    let c = root.join("c");
    ok(root, &env, &["clone", &url, c.to_str().expect("utf-8")]);
    // A clone makes a local branch of the default branch only; the seeds
    // are the remote-tracking branches.
    let out = ok(
        &c,
        &env,
        // The simulator draws each seed's initial policy from the seed, so
        // two seeds compared as two arms differ in base checkpoint.
        &[
            "--json",
            "compare",
            "origin/exp/s0",
            "origin/exp/s1",
            "--allow-difference",
            "base-checkpoint",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("compare JSON");
    let text = v.to_string();
    assert!(text.contains("exp/s0") && text.contains("exp/s1"), "{text}");
    // The seeds are different campaigns of the same experiment.
    let seed = |rev: &str| {
        let out = ok(&c, &env, &["--json", "log", "-n", "1", rev]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("log JSON");
        v[0]["metadata"]["loop"]["campaign"]["seed"].clone()
    };
    assert_eq!(seed("origin/exp/s0"), 0);
    assert_eq!(seed("origin/exp/s1"), 1);
    ok(&c, &env, &["fsck"]);
}
