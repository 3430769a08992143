//! Every verb that needs checkpoint bytes in a partial clone
//! (`--filter no-checkpoints`) gets them through the ledger's promisor
//! layer, with the caller's credentials: a token-protected `bat serve` and
//! an S3 remote (s3s-fs) on 127.0.0.1. Each verb runs in its own fresh
//! partial clone, so each one has to fetch what it reads, and its output
//! is compared with the same verb on the full origin.

use std::path::{Path, PathBuf};

use serve_common::{Server, READ_TOKEN};

use crate::common::s3 as s3_common;
use crate::common::serve as serve_common;
use crate::common::{output_env as bat, stdout_json as json, succeeded as ok};

fn promised(dir: &Path) -> u64 {
    let f = json(bat(dir, &[], &["--json", "fsck"]));
    assert_eq!(f["ok"], true, "{f}");
    f["promised_files"].as_u64().expect("promised_files")
}

/// Every file below `root`, relative path → bytes, sorted.
fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).expect("below root");
                out.push((rel.display().to_string(), std::fs::read(&p).expect("read")));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// A three-round simulator campaign in `root/origin` whose work dir is
/// `root/work` (so a test can take it away).
fn campaign(root: &Path) -> PathBuf {
    let origin = root.join("origin");
    ok(bat(root, &[], &["init", origin.to_str().expect("utf-8")]));
    let work = root.join("work");
    ok(bat(
        &origin,
        &[],
        &[
            "run",
            "--backend",
            "sim",
            "--rounds",
            "3",
            "--batches",
            "10",
            "--work-dir",
            work.to_str().expect("utf-8"),
        ],
    ));
    origin
}

/// Where the origin is served from, and the environment that reaches it.
struct Served {
    url: String,
    /// Credentials (and endpoint) the verbs need.
    env: Vec<(&'static str, String)>,
}

impl Served {
    fn env(&self) -> Vec<(&str, &str)> {
        self.env.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    /// A fresh `--filter no-checkpoints` clone in `root/name`.
    fn partial(&self, root: &Path, name: &str) -> PathBuf {
        let dest = root.join(name);
        ok(bat(
            root,
            &self.env(),
            &[
                "clone",
                "--filter",
                "no-checkpoints",
                &self.url,
                dest.to_str().expect("utf-8"),
            ],
        ));
        assert!(promised(&dest) > 0, "the clone left checkpoints behind");
        dest
    }
}

/// Drive checkout, cat, diff, replay --verify and run --resume, each in its
/// own partial clone, and compare with the origin.
fn every_verb(root: &Path, origin: &Path, served: &Served) {
    let env = served.env();
    // checkout: the whole round tree, byte for byte.
    let p = served.partial(root, "p-checkout");
    let before = promised(&p);
    let to = root.join("co-partial");
    let v = json(bat(
        &p,
        &env,
        &[
            "--json",
            "checkout",
            "r03",
            "--to",
            to.to_str().expect("utf-8"),
        ],
    ));
    assert!(v["fetched_on_demand"].as_u64().expect("count") > 0, "{v}");
    let full = root.join("co-full");
    ok(bat(
        origin,
        &[],
        &["checkout", "r03", "--to", full.to_str().expect("utf-8")],
    ));
    let want = files(&full);
    assert!(want.iter().any(|(p, _)| p.starts_with("candidate/")));
    assert_eq!(files(&to), want);
    assert!(promised(&p) < before);

    // cat: one checkpoint file to stdout.
    let p = served.partial(root, "p-cat");
    let (path, bytes) = want
        .iter()
        .find(|(p, _)| p.starts_with("candidate/") && p.ends_with(".safetensors"))
        .expect("a safetensors file in the candidate");
    let o = ok(bat(&p, &env, &["cat", &format!("r03:{path}")]));
    assert!(o.stdout == *bytes, "cat returns the checkpoint's bytes");

    // diff: the checkpoint section reads both rounds' tensors.
    let p = served.partial(root, "p-diff");
    let args = ["--json", "diff", "r01", "r03", "--section", "checkpoint"];
    let here = json(bat(&p, &env, &args));
    let there = json(bat(origin, &[], &args));
    assert_eq!(here, there);
    assert!(here["checkpoint"]["files"].is_array(), "{here}");

    // replay --verify: the starting checkpoint comes from the remote.
    let p = served.partial(root, "p-replay");
    let before = promised(&p);
    let v = json(bat(&p, &env, &["--json", "replay", "r03", "--verify"]));
    assert_eq!(v["reproduced"], true, "{v}");
    assert!(
        promised(&p) < before,
        "replay fetched its starting checkpoint"
    );

    // run --resume: the work dir is gone, so the rounds are rebuilt from
    // the ledger, their candidates fetched on demand.
    let p = served.partial(root, "p-resume");
    let work = root.join("work");
    let kept = files(&work.join("r03").join("candidate"));
    std::fs::remove_dir_all(&work).expect("remove the work dir");
    let before = promised(&p);
    let v = json(bat(&p, &env, &["--json", "run", "--resume"]));
    assert_eq!(v["status"], "complete", "{v}");
    assert!(promised(&p) < before, "resume fetched checkpoints");
    assert_eq!(files(&work.join("r03").join("candidate")), kept);
}

/// Without the credentials, a verb that needs a promised file fails with a
/// message naming the cause, and writes nothing.
fn refused(root: &Path, served: &Served, envs: &[(&str, &str)], needle: &str) {
    let p = served.partial(root, "p-refused");
    let to = root.join("co-refused");
    let o = bat(
        &p,
        envs,
        &["checkout", "r03", "--to", to.to_str().expect("utf-8")],
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("promisor remote"), "{err}");
    assert!(err.contains(needle), "{err}");
    assert!(!to.exists(), "nothing checked out");
    let o = bat(&p, envs, &["--json", "replay", "r03", "--verify"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(needle));
}

#[test]
fn partial_clone_of_a_token_protected_bat_serve() {
    let t = tempfile::tempdir().expect("tempdir");
    let origin = campaign(t.path());
    let srv = Server::with_tokens(&origin, t.path(), &[]);
    let served = Served {
        url: srv.url.clone(),
        env: vec![("BAT_TOKEN", READ_TOKEN.to_string())],
    };
    refused(
        t.path(),
        &served,
        &[],
        "this server needs a token (pass --token or set BAT_TOKEN)",
    );
    every_verb(t.path(), &origin, &served);
}

#[test]
fn partial_clone_of_an_s3_remote() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = s3_common::S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let origin = campaign(t.path());
    let url = format!("s3://{}/partial/ledger", s3_common::BUCKET);
    let served = Served {
        url: url.clone(),
        env: vec![
            ("AWS_ACCESS_KEY_ID", s3_common::ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", s3_common::SECRET_KEY.to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", s3.endpoint.clone()),
        ],
    };
    ok(bat(&origin, &[], &["remote", "add", "s3", &url]));
    ok(bat(&origin, &served.env(), &["push", "s3", "main"]));
    let wrong = [
        ("AWS_ACCESS_KEY_ID", "nobody"),
        ("AWS_SECRET_ACCESS_KEY", "wrong-secret-000"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", s3.endpoint.as_str()),
    ];
    refused(t.path(), &served, &wrong, "lacked the necessary privileges");
    every_verb(t.path(), &origin, &served);
}

/// A bf16 safetensors file of one tensor of `n` elements for each of
/// `rounds` rounds: about one element in eight moves by one code point
/// per round, as a fine-tuning step does, so each round after the first is
/// stored as delta links on the one before.
fn bf16_rounds(n: usize, rounds: usize) -> Vec<Vec<u8>> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut data: Vec<u8> = (0..2 * n).map(|_| next() as u8).collect();
    let header = format!(
        r#"{{"w":{{"dtype":"BF16","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        2 * n
    );
    let mut h = header.into_bytes();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = Vec::new();
    for _ in 0..rounds {
        let mut file = (h.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(&h);
        file.extend_from_slice(&data);
        out.push(file);
        for e in data.chunks_mut(2) {
            if next() % 8 == 0 {
                let v = u16::from_le_bytes([e[0], e[1]]).wrapping_add(1);
                e.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    out
}

/// A checkpoint stored as delta links (each round's pieces on the previous
/// round's) is promised in a partial clone; reading it must fetch the
/// bases of its links as well, down to the keyframe, even when the whole
/// transfer is smaller than one import batch. It used to fail with "delta
/// base … is neither stored nor earlier in the stream".
#[test]
fn a_partial_clone_fetches_the_delta_bases_of_a_checkpoint() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = t.path();
    let origin = root.join("origin");
    ok(bat(root, &[], &["init", origin.to_str().expect("utf-8")]));
    // 3 M elements: 6 MB, chunked into two tensor pieces, each delta-coded.
    let rounds = bf16_rounds(3 << 20, 4);
    for (i, bytes) in rounds.iter().enumerate() {
        let dir = root.join(format!("r{i}"));
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::write(dir.join("model.safetensors"), bytes).expect("write");
        ok(bat(
            &origin,
            &[],
            &[
                "commit",
                dir.to_str().expect("utf-8"),
                "-m",
                &format!("r{i}"),
            ],
        ));
    }
    let stats = json(bat(&origin, &[], &["--json", "stats"]));
    assert!(
        stats["delta_objects"].as_u64().unwrap_or(0) > 0,
        "the rounds were not stored as deltas: {stats}"
    );
    for (rev, want) in [("HEAD", &rounds[3]), ("HEAD~2", &rounds[1])] {
        let part = root.join(format!("part-{}", rev.replace('~', "-")));
        ok(bat(
            root,
            &[],
            &[
                "clone",
                "--filter",
                "no-checkpoints",
                origin.to_str().expect("utf-8"),
                part.to_str().expect("utf-8"),
            ],
        ));
        assert_eq!(promised(&part), 4, "every round's checkpoint is promised");
        let out = root.join(format!("out-{}", rev.replace('~', "-")));
        ok(bat(
            &part,
            &[],
            &["checkout", rev, "--to", out.to_str().expect("utf-8")],
        ));
        let got = std::fs::read(out.join("model.safetensors")).expect("checked out");
        assert!(got == *want, "{rev} checked out with other bytes");
        let f = json(bat(&part, &[], &["--json", "fsck"]));
        assert_eq!(f["ok"], true, "{f}");
    }
}
