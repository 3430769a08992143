//! Campaign-scale history through the real binary: 2,000 commits read,
//! verified and gc'd by a `bat` whose open-file limit is 64; running out of
//! descriptors is an I/O error, never damage; SIGKILL during pack
//! consolidation leaves an fsck-clean ledger; `bat log | head` ends quietly.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use bat_ledger::{CommitRequest, Ledger, NoProgress, TreeId};
use common::*;

use crate::common::ledger as common;

/// Build a ledger: one real commit of `data/`, then `n` plain commits
/// through the library, `per_pack` commits per pack segment (1 = the
/// one-pack-per-commit layout `bat commit` produces).
fn build(dir: &Path, n: u64, per_pack: u64) -> TreeId {
    let mut l = Ledger::init(dir).unwrap();
    let d = dir.join("data");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a.txt"), b"first file\n").unwrap();
    let tree = l
        .commit_dir(
            &d,
            &CommitRequest::new("seed"),
            &NoProgress,
            &AtomicBool::new(false),
        )
        .unwrap()
        .tree;
    extend(dir, tree, 0, n, per_pack);
    tree
}

fn extend(dir: &Path, tree: TreeId, from: u64, n: u64, per_pack: u64) {
    let mut l = Ledger::open(&dir.join(".bat")).unwrap();
    let mut i = from;
    while i < from + n {
        let end = (i + per_pack).min(from + n);
        l.commit_chain(
            tree,
            (i..end).map(|k| {
                let mut r = CommitRequest::new(format!("commit {k}"));
                r.author = "tester".into();
                r.time = Some(1_700_000_000 + k as i64);
                r
            }),
        )
        .unwrap();
        i = end;
    }
}

/// `bat ARGS` in `dir` with RLIMIT_NOFILE set to `limit` (soft and hard).
fn bat_limited(dir: &Path, limit: u32, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(bat_path())
        .args(args)
        .current_dir(dir)
        .env_remove("BAT_DIR")
        .output()
        .unwrap()
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn two_thousand_commits_with_64_open_files() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    build(w, 2000, 1);
    let packs = std::fs::read_dir(w.join(".bat/packs")).unwrap().count();
    assert_eq!(packs, 2001, "one pack per commit before gc");

    let log = ok(bat_limited(w, 64, &["log"]), "log");
    assert_eq!(log.matches("\ncommit ").count() + 1, 2001);
    assert!(log.starts_with("commit ") && log.contains("    commit 1999\n"));
    let js: serde_json::Value =
        serde_json::from_str(&ok(bat_limited(w, 64, &["log", "--json"]), "log --json")).unwrap();
    let arr = js.as_array().unwrap();
    assert_eq!(arr.len(), 2001);
    assert_eq!(arr[0]["message"], "commit 1999");
    assert_eq!(arr[2000]["message"], "seed");
    let far: serde_json::Value = serde_json::from_str(&ok(
        bat_limited(w, 64, &["log", "--json", "-n", "1", "HEAD~1999"]),
        "HEAD~1999",
    ))
    .unwrap();
    assert_eq!(far[0]["message"], "commit 0");
    assert_eq!(far[0]["id"], arr[1999]["id"]);

    let fsck = ok(bat_limited(w, 64, &["fsck"]), "fsck");
    assert!(fsck.contains("2001 commits, 0 problems"), "{fsck}");
    ok(bat_limited(w, 64, &["show", "HEAD~1000"]), "show");
    assert_eq!(
        ok(bat_limited(w, 64, &["cat", "HEAD~1500:a.txt"]), "cat"),
        "first file\n"
    );

    let gc = ok(bat_limited(w, 64, &["gc"]), "gc");
    assert!(gc.contains("removed 0"), "{gc}");
    let packs = std::fs::read_dir(w.join(".bat/packs")).unwrap().count();
    assert_eq!(packs, 1, "gc consolidates the small packs");
    let fsck = ok(bat_limited(w, 64, &["fsck"]), "fsck after gc");
    assert!(fsck.contains("2001 commits, 0 problems"), "{fsck}");
    assert_eq!(ok(bat_limited(w, 64, &["log"]), "log after gc"), log);
    assert_eq!(
        ok(
            bat_limited(w, 64, &["cat", "HEAD~1999:a.txt"]),
            "cat after gc"
        ),
        "first file\n"
    );
}

/// With too few descriptors fsck either passes or fails with an I/O error
/// that says to raise the limit; it never lists damage that is not there.
#[test]
fn fsck_reports_emfile_as_io_error() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    build(w, 300, 1);
    let mut hinted = 0;
    for limit in 4..=24 {
        let out = bat_limited(w, limit, &["fsck"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Its summary line says "0 problems" when it gets through.
        let damage = stdout
            .lines()
            .any(|l| l.contains("problem") && !l.contains(", 0 problems"));
        assert!(
            !damage && !stderr.contains("corrupt") && !stderr.contains("missing"),
            "limit {limit}: fsck reported damage it did not find:\n{stdout}\n{stderr}"
        );
        if out.status.success() {
            assert!(stdout.contains("301 commits, 0 problems"), "{stdout}");
        } else if stderr.contains("Too many open files") {
            assert!(stderr.contains("ulimit -n"), "no hint: {stderr}");
            // An I/O failure, not a usage error.
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            hinted += 1;
        } else {
            // Too few to even open the catalog: still not damage.
            assert!(
                stderr.contains("catalog") || stderr.contains("open"),
                "limit {limit}: {stderr}"
            );
        }
    }
    assert!(
        hinted > 0,
        "no limit in 4..=24 made fsck run out of descriptors"
    );
}

/// SIGKILL at several instants of `bat gc` while it consolidates packs: the
/// ledger stays fsck-clean with every commit readable.
#[test]
fn sigkill_during_pack_consolidation() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let tree = build(w, 600, 1);
    // How long an uninterrupted consolidation of the same layout takes.
    let probe = tempfile::tempdir().unwrap();
    build(probe.path(), 600, 1);
    let start = Instant::now();
    ok(bat_limited(probe.path(), 1024, &["gc"]), "probe gc");
    let full = start.elapsed().max(Duration::from_millis(20));
    let mut total = 601u64;
    let mut killed = 0;
    for run in 0..8u64 {
        if run > 0 {
            extend(w, tree, total, 100, 1);
            total += 100;
        }
        let mut child = Command::new(bat_path())
            .arg("gc")
            .current_dir(w)
            .env_remove("BAT_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(full * (run as u32 + 1) / 8);
        let _ = child.kill();
        if !child.wait().unwrap().success() {
            killed += 1;
        }
        let fsck = bat_limited(w, 1024, &["fsck"]);
        let text = ok(fsck, "fsck after kill");
        assert!(
            text.contains(&format!("{total} commits, 0 problems")),
            "run {run}: {text}"
        );
        let js: serde_json::Value =
            serde_json::from_str(&ok(bat_limited(w, 1024, &["log", "--json"]), "log")).unwrap();
        assert_eq!(js.as_array().unwrap().len() as u64, total);
        ok(
            bat_limited(w, 1024, &["cat", &format!("HEAD~{}:a.txt", total - 1)]),
            "cat oldest",
        );
    }
    println!("killed {killed} of 8 gc runs");
    // Whatever was interrupted, a full gc finishes the job.
    ok(bat_limited(w, 1024, &["gc"]), "final gc");
    assert_eq!(std::fs::read_dir(w.join(".bat/packs")).unwrap().count(), 1);
    assert!(ok(bat_limited(w, 1024, &["fsck"]), "final fsck").contains("0 problems"));
}

/// `bat log | head`: the reader goes away; log stops quietly and succeeds.
#[test]
fn log_into_a_closed_pipe_is_quiet() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    build(w, 3000, 3000);
    let mut child = Command::new(bat_path())
        .arg("log")
        .current_dir(w)
        .env_remove("BAT_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    out.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"commit "));
    drop(out);
    let res = child.wait_with_output().unwrap();
    assert!(res.status.success(), "status {:?}", res.status);
    assert_eq!(String::from_utf8_lossy(&res.stderr), "");
}

/// gc re-roots delta chains whose records are spread over a hundred pack
/// segments (one per commit) with only 64 descriptors: a re-rooted chain
/// holds its packs open only while it is re-encoded.
#[test]
fn rerooting_a_hundred_commits_of_delta_chains_with_64_open_files() {
    let t = tempfile::tempdir().unwrap();
    let w = t.path();
    let d = w.join("data");
    std::fs::create_dir_all(&d).unwrap();
    let mut l = Ledger::init(w).unwrap();
    l.config.chunk_threshold = 1024;
    let mut rng = Rng(0xc4a1);
    let mut data = tensors(&mut rng, 40, 8192);
    let mut versions = Vec::new();
    for v in 0..100 {
        for t in data.iter_mut() {
            for _ in 0..64 {
                let i = (rng.next() as usize) % t.len();
                t[i] ^= 1;
            }
        }
        versions.push(commit_model(&mut l, &d, &data, v));
    }
    drop(l);
    let packs = std::fs::read_dir(w.join(".bat/packs")).unwrap().count();
    assert_eq!(packs, 100, "one pack per commit before gc");
    let rep: serde_json::Value =
        serde_json::from_str(&ok(bat_limited(w, 64, &["gc", "--json"]), "gc")).unwrap();
    assert!(rep["rerooted_trees"].as_u64().unwrap() >= 400, "{rep}");
    ok(bat_limited(w, 64, &["fsck"]), "fsck");
    for (v, want) in versions.iter().enumerate().step_by(7) {
        let out = format!("out{v}");
        ok(
            bat_limited(
                w,
                64,
                &["checkout", &format!("HEAD~{}", 99 - v), "--to", &out],
            ),
            "checkout",
        );
        assert_eq!(
            &hash_file(&w.join(&out).join("model.safetensors")),
            want,
            "v{v}"
        );
    }
}

/// Write `data` as `d/model.safetensors` and commit `d` as version `v`;
/// the file's BLAKE3.
fn commit_model(l: &mut Ledger, d: &Path, data: &[Vec<u8>], v: usize) -> blake3::Hash {
    write_model(&d.join("model.safetensors"), data);
    let hash = hash_file(&d.join("model.safetensors"));
    l.commit_dir(
        d,
        &CommitRequest::new(format!("v{v}")),
        &NoProgress,
        &AtomicBool::new(false),
    )
    .unwrap();
    hash
}

/// `n` tensors of `len` generated bytes.
fn tensors(rng: &mut Rng, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut v = vec![0u8; len];
            fill(&mut v, rng);
            v
        })
        .collect()
}

/// Commit `n` versions of `data` (each a sparse change of the last) from
/// `w/data` into the ledger at `w`, starting at version `from`; returns each
/// version's BLAKE3.
fn commit_model_versions(
    w: &Path,
    data: &mut [Vec<u8>],
    rng: &mut Rng,
    from: usize,
    n: usize,
) -> Vec<blake3::Hash> {
    let d = w.join("data");
    std::fs::create_dir_all(&d).unwrap();
    let mut l = Ledger::open(&w.join(".bat")).unwrap();
    l.config.chunk_threshold = 1024;
    l.config.delta_max_depth = 32;
    let mut versions = Vec::new();
    for v in from..from + n {
        perturb_model(data, rng, 128);
        versions.push(commit_model(&mut l, &d, data, v));
    }
    versions
}

/// A fetch from a directory remote opens two ledgers in one process. The
/// receiver holds thirty packs of chains up to 32 links deep, and the
/// sender's gc re-rooted them, so checking the received chunked files walks
/// chains across every pack of both: with 64 descriptors it succeeds, and
/// every version reads back byte-identical.
#[test]
fn fetch_deep_chains_from_a_directory_remote_with_64_open_files() {
    let t = tempfile::tempdir().unwrap();
    let (sender, receiver) = (t.path().join("sender"), t.path().join("receiver"));
    std::fs::create_dir_all(&sender).unwrap();
    Ledger::init(&sender).unwrap();
    let mut rng = Rng(0x5eed_f00d);
    let mut data = tensors(&mut rng, 40, 8192);
    let mut versions = commit_model_versions(&sender, &mut data, &mut rng, 0, 30);
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&sender)
        .arg(&receiver)
        .status()
        .unwrap();
    assert!(copied.success());
    assert_eq!(
        std::fs::read_dir(receiver.join(".bat/packs"))
            .unwrap()
            .count(),
        30
    );
    ok(bat_limited(&sender, 1024, &["gc"]), "sender gc");
    versions.extend(commit_model_versions(&sender, &mut data, &mut rng, 30, 15));
    ok(
        bat_limited(
            &receiver,
            1024,
            &["remote", "add", "origin", sender.to_str().unwrap()],
        ),
        "remote add",
    );
    ok(bat_limited(&receiver, 64, &["fetch", "origin"]), "fetch");
    let fsck = ok(bat_limited(&receiver, 64, &["fsck"]), "fsck");
    assert!(fsck.contains("45 commits, 0 problems"), "{fsck}");
    for (v, want) in versions.iter().enumerate().step_by(4) {
        let out = format!("out{v}");
        let rev = format!("origin/main~{}", 44 - v);
        ok(
            bat_limited(&receiver, 64, &["checkout", &rev, "--to", &out]),
            "checkout",
        );
        assert_eq!(
            &hash_file(&receiver.join(&out).join("model.safetensors")),
            want,
            "v{v}"
        );
    }
}

/// A partial clone of a ledger of thirty packs of deep chains reads a
/// promised checkpoint through three ledger handles in one process (the
/// reading one, the promisor's writing one and the directory remote's),
/// fetching every link's base down to its keyframe: with 64 descriptors
/// it succeeds and reads back the version byte-identical.
#[test]
fn partial_clone_reads_deep_chains_with_64_open_files() {
    let t = tempfile::tempdir().unwrap();
    let origin = t.path().join("origin");
    std::fs::create_dir_all(&origin).unwrap();
    Ledger::init(&origin).unwrap();
    let mut rng = Rng(0x0dd_c0de);
    let mut data = tensors(&mut rng, 40, 8192);
    let versions = commit_model_versions(&origin, &mut data, &mut rng, 0, 30);
    ok(
        bat_limited(
            t.path(),
            1024,
            &[
                "clone",
                "--filter",
                "no-checkpoints",
                origin.to_str().unwrap(),
                "part",
            ],
        ),
        "partial clone",
    );
    let part = t.path().join("part");
    for (back, v) in [(0, 29), (10, 19)] {
        let out = format!("out{v}");
        ok(
            bat_limited(
                &part,
                64,
                &["checkout", &format!("HEAD~{back}"), "--to", &out],
            ),
            "checkout",
        );
        assert_eq!(
            &hash_file(&part.join(&out).join("model.safetensors")),
            &versions[v],
            "v{v}"
        );
    }
    let fsck = ok(bat_limited(&part, 64, &["fsck"]), "fsck");
    assert!(fsck.contains("30 commits, 0 problems"), "{fsck}");
}
