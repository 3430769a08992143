//! Delta-stored checkpoint series through every transfer path with the CLI:
//! clone and fetch from a real `bat serve`, push into one, push to and
//! clone from a real s3s-fs. The series is sharded bf16 safetensors whose
//! pieces are stored as delta chains, so the receivers get the versions of
//! each piece side by side (PROTOCOL.md §7, §8) through the read-ahead
//! thread; every result must be fsck-clean and restore every round
//! byte for byte.

use std::path::Path;
use std::process::Command;

use bat_ledger::{CommitId, Ledger, Location};
use serve_common::*;

use crate::common::s3::{S3Server, ACCESS_KEY, BUCKET, SECRET_KEY};
use crate::common::serve as serve_common;

/// One bf16 safetensors shard of `n` elements in two tensors; round `r`
/// gives about 3 elements in 8 a new mantissa relative to round `r - 1`.
fn shard(seed: u64, n: usize, r: u64) -> Vec<u8> {
    let half = n / 2;
    let header = format!(
        r#"{{"a":{{"dtype":"BF16","shape":[{half}],"data_offsets":[0,{}]}},"b":{{"dtype":"BF16","shape":[{half}],"data_offsets":[{},{}]}}}}"#,
        2 * half,
        2 * half,
        4 * half
    );
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    let base = noise(seed, 4 * half);
    let steps: Vec<Vec<u8>> = (1..=r).map(|k| noise(seed * 31 + k, 2 * half)).collect();
    for i in 0..2 * half {
        let mut x = (u16::from_le_bytes([base[2 * i], base[2 * i + 1]]) & 0x8fff) | 0x3c00;
        for s in &steps {
            if s[i] % 8 < 3 {
                x = (x & !0x7f) | u16::from(s[i] >> 1);
            }
        }
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// A ledger of `rounds` commits of two 6 MiB shards (chunked, stored as
/// pieces with delta chains).
fn series(root: &Path, rounds: u64) -> (std::path::PathBuf, Vec<CommitId>) {
    let (dir, mut l) = new_ledger(root, "src");
    let mut commits = Vec::new();
    for r in 0..rounds {
        let (a, b) = (shard(1, 3 << 20, r), shard(2, 3 << 20, r));
        let files: [(&str, &[u8]); 2] = [
            ("model-00001-of-00002.safetensors", &a),
            ("model-00002-of-00002.safetensors", &b),
        ];
        commits.push(commit_files(&mut l, root, &files, &format!("round {r}")));
    }
    // The series must exercise deltas, or the order of pieces is untested.
    let tip = *commits.last().expect("rounds > 0");
    let tree = l.read_commit(&tip).expect("tip").tree;
    let mut deltas = 0;
    for f in l.walk_files(&tree).expect("walk") {
        if let Some(Location::Chunked { list }) =
            l.locate(&f.id).expect("locate").map(|r| r.location)
        {
            for c in l.read_chunk_list(&list).expect("list").chunks {
                let row = l.locate(&c.id).expect("locate").expect("stored");
                deltas += usize::from(matches!(row.location, Location::Delta { .. }));
            }
        }
    }
    assert!(deltas >= 4, "expected delta-stored pieces, found {deltas}");
    (dir, commits)
}

fn run(c: &mut Command) {
    let out = c.output().expect("spawn bat");
    assert!(
        out.status.success(),
        "{c:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn all_rounds_equal(src: &Ledger, dir: &Path, commits: &[CommitId]) {
    let l = Ledger::discover(dir).expect("open the copy");
    assert_fsck_clean(&l);
    for c in commits {
        same_files(src, &l, *c);
    }
}

#[test]
fn delta_series_clones_fetches_and_pushes_over_http() {
    let t = tempfile::tempdir().expect("tempdir");
    let (src_dir, commits) = series(t.path(), 4);
    let src = Ledger::discover(&src_dir).expect("open src");

    // Clone over HTTP.
    let srv = Server::start(&src_dir, &["--allow-anonymous-read", "--read-only"]);
    let clone = t.path().join("clone");
    run(crate::common::bat().args(["clone", &srv.url]).arg(&clone));
    all_rounds_equal(&src, &clone, &commits);

    // Fetch the last two rounds into a clone of the first two.
    let half = t.path().join("half");
    {
        let (d, mut l) = new_ledger(t.path(), "half-src");
        for c in &commits[..2] {
            let ids = objects_in_order(&src, &[*c]);
            let mut objs = Vec::new();
            for id in ids {
                if !l.contains(&id).expect("contains") {
                    objs.push(src.export_wire(&id).expect("export"));
                }
            }
            l.import_wire(objs).expect("import");
        }
        l.update_ref("refs/heads/main", None, Some(commits[1]), "half")
            .expect("ref");
        drop(l);
        run(crate::common::bat().arg("clone").arg(&d).arg(&half));
    }
    run(crate::common::bat()
        .arg("-C")
        .arg(&half)
        .args(["remote", "add", "full", &srv.url]));
    run(crate::common::bat()
        .arg("-C")
        .arg(&half)
        .args(["fetch", "full"]));
    all_rounds_equal(&src, &half, &commits);

    // Push the whole series into an empty served ledger.
    let (target, _) = new_ledger(t.path(), "target");
    let up = Server::with_tokens(&target, t.path(), &[]);
    run(crate::common::bat()
        .arg("-C")
        .arg(&clone)
        .args(["remote", "add", "up", &up.url]));
    run(crate::common::bat()
        .arg("-C")
        .arg(&clone)
        .args(["push", "up", "main"])
        .env("BAT_TOKEN", WRITE_TOKEN));
    all_rounds_equal(&src, &target, &commits);
}

#[test]
fn delta_series_pushes_to_and_clones_from_s3() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let (src_dir, commits) = series(t.path(), 3);
    let src = Ledger::discover(&src_dir).expect("open src");
    let s3_env = |c: &mut Command| {
        c.env("AWS_ENDPOINT_URL", &s3.endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
    };
    let url = format!("s3://{BUCKET}/series");
    run(crate::common::bat()
        .arg("-C")
        .arg(&src_dir)
        .args(["remote", "add", "s3", &url]));
    let mut push = crate::common::bat();
    push.arg("-C").arg(&src_dir).args(["push", "s3", "main"]);
    s3_env(&mut push);
    run(&mut push);
    let back = t.path().join("back");
    let mut clone = crate::common::bat();
    clone.args(["clone", &url]).arg(&back);
    s3_env(&mut clone);
    run(&mut clone);
    all_rounds_equal(&src, &back, &commits);
}
