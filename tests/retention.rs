//! Retention: `bat gc --keep POLICY` on a real 10-round campaign (the
//! demo's sim backend), reflog expiry, tag moves and deletes, and pruning
//! under a delta chain (the kept checkpoint is re-based, byte-exact).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use bat_ledger::{CommitId, Ledger, LockMode, NoProgress, ObjectId};
use serde_json::Value;

use crate::common::bat_in as bat;
use crate::common::ledger as common;
use crate::common::serve as serve_common;
use crate::common::stderr;
use crate::common::succeeded as ok;
use crate::common::TestEnv;

fn json(cmd: &mut Command) -> Value {
    let out = ok(cmd.arg("--json").output().expect("run bat"));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

/// Files under `candidate/` of `commit`: id -> size.
fn candidate_files(l: &Ledger, commit: &str) -> HashMap<ObjectId, u64> {
    let id = CommitId(ObjectId::from_hex(commit).expect("commit id"));
    let c = l.read_commit(&id).expect("read commit");
    l.walk_files(&c.tree)
        .expect("walk")
        .into_iter()
        .filter(|f| f.path.starts_with("candidate/"))
        .map(|f| (f.id, f.size))
        .collect()
}

/// (commit id, round id) of a branch's round commits, newest first.
fn rounds(dir: &Path, branch: &str) -> Vec<(String, String)> {
    json(bat(dir).args(["log", branch]))
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .map(|e| {
            (
                e["id"].as_str().expect("id").to_string(),
                e["metadata"]["round_id"]
                    .as_str()
                    .expect("round")
                    .to_string(),
            )
        })
        .collect()
}

const GC_FIGURES: [&str; 5] = [
    "pruned_files",
    "pruned_file_bytes",
    "dropped_objects",
    "dropped_record_bytes",
    "rebased_records",
];

#[test]
fn ten_round_campaign_keeps_promoted_and_last_three_and_fetch_restores_the_rest() {
    let env = TestEnv::new();
    let demo = env.demo("campaign", 10);
    let dir = demo.dir.clone();
    assert_eq!(demo.report["rounds"], 10);
    let replay = demo.replay_branch.clone();
    // A full copy of the campaign, to fetch pruned checkpoints back from.
    let mirror = env.copy_tree(&dir, "mirror");

    // What the policy must prune, worked out here from the trees: the
    // candidates of every round but the last 3 of each branch and the
    // promoted ones, minus any file a kept candidate shares.
    let main = rounds(&dir, "main");
    let arm = rounds(&dir, &replay);
    assert_eq!((main.len(), arm.len()), (10, 10));
    let promoted: HashSet<String> = json(bat(&dir).args(["log", "main", "-n", "1"]))[0]["id"]
        .as_str()
        .map(|s| HashSet::from([s.to_string()]))
        .expect("tip");
    let (expected, expected_record_bytes) = {
        let l = Ledger::open(&dir.join(".bat")).expect("open");
        let mut kept: HashSet<ObjectId> = HashSet::new();
        let mut all: HashMap<ObjectId, u64> = HashMap::new();
        for branch in [&main, &arm] {
            for (i, (c, _)) in branch.iter().enumerate() {
                let files = candidate_files(&l, c);
                if i < 3 || promoted.contains(c) {
                    kept.extend(files.keys().copied());
                }
                all.extend(files);
            }
        }
        all.retain(|id, _| !kept.contains(id));
        let record_bytes: u64 = all
            .keys()
            .map(|id| {
                let row = l.locate(id).expect("locate").expect("stored");
                80 + row.location.record().map_or(0, |r| r.2)
            })
            .sum();
        (all, record_bytes)
    };
    assert!(
        !expected.is_empty(),
        "older candidates differ from kept ones"
    );

    let before = json(bat(&dir).arg("stats"));
    let reclaim = json(bat(&dir).args(["stats", "--reclaimable"]));
    assert_eq!(reclaim["reclaimable"]["policy"], "promoted,last=3");
    assert_eq!(reclaim["reclaimable"]["files"], expected.len() as u64);

    // Dry run: the same figures as the real run, and nothing changes.
    let dry = json(bat(&dir).args(["gc", "--keep", "promoted,last=3", "--dry-run"]));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        json(bat(&dir).arg("stats"))["pack_bytes"],
        before["pack_bytes"]
    );
    let rep = json(bat(&dir).args(["gc", "--keep", "promoted,last=3"]));
    for k in GC_FIGURES {
        assert_eq!(dry[k], rep[k], "{k}: dry run and real run disagree");
    }
    assert_eq!(rep["pruned_files"], expected.len() as u64);
    assert_eq!(
        rep["pruned_file_bytes"],
        expected.values().sum::<u64>(),
        "pruned bytes are the candidates' sizes"
    );
    assert_eq!(
        reclaim["reclaimable"]["record_bytes"],
        rep["dropped_record_bytes"]
    );
    let after = json(bat(&dir).arg("stats"));
    let freed = before["pack_bytes"].as_u64().expect("bytes") as i64
        - after["pack_bytes"].as_u64().expect("bytes") as i64;
    println!(
        "10-round demo: packs {} -> {} bytes, freed {freed}; pruned {} files ({} file bytes, {} record bytes)",
        before["pack_bytes"], after["pack_bytes"], rep["pruned_files"], rep["pruned_file_bytes"], expected_record_bytes
    );
    assert!(
        freed >= expected_record_bytes as i64,
        "freed {freed} < the pruned candidates' stored {expected_record_bytes} bytes"
    );
    assert_eq!(after["pruned_files"], expected.len() as u64);

    // fsck counts the pruned files as pruned, not as damage.
    let fsck = json(bat(&dir).arg("fsck"));
    assert_eq!(fsck["ok"], true, "{fsck}");
    assert_eq!(fsck["pruned_files"], expected.len() as u64);

    // History, metadata diffs, comparison and replay of a kept round work.
    assert_eq!(rounds(&dir, "main"), main);
    let diff = json(bat(&dir).args(["diff", "r02", "r03"]));
    let model = diff["checkpoint"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .find(|f| f["path"] == "model.safetensors")
        .cloned()
        .expect("the model file is listed");
    assert_eq!(model["status"], "changed", "ids still compare: {model}");
    assert_eq!(model["tensors_pruned"], true, "{model}");
    ok(bat(&dir)
        .args(["compare", "main", &replay])
        .output()
        .expect("compare"));
    let verify = ok(bat(&dir)
        .args(["replay", "r10", "--verify"])
        .output()
        .expect("replay"));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("reproduced bit for bit"));

    // A kept checkpoint checks out; a pruned one says so and how to get it.
    ok(bat(&dir)
        .args(["checkout", "r09", "--to"])
        .arg(env.root().join("r09"))
        .output()
        .expect("checkout"));
    let out = bat(&dir)
        .args(["checkout", "r02", "--to"])
        .arg(env.root().join("r02"))
        .output()
        .expect("checkout");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("was pruned by `gc --keep promoted,last=3`"),
        "{err}"
    );
    assert!(err.contains("bat fetch REMOTE"), "{err}");
    assert!(
        !err.contains("corrupt") && !err.contains("missing"),
        "{err}"
    );
    assert!(!env.root().join("r02").exists(), "nothing half-written");

    // Pushing history whose checkpoints are pruned here to a remote that
    // lacks them sends them as absent: the remote records them as pruned.
    let empty = env.root().join("empty");
    ok(crate::common::bat()
        .arg("init")
        .arg(&empty)
        .output()
        .expect("init"));
    ok(bat(&dir)
        .args(["remote", "add", "empty"])
        .arg(&empty)
        .output()
        .expect("remote add"));
    ok(bat(&dir)
        .args(["push", "empty", "main"])
        .output()
        .expect("push"));
    let fsck = json(bat(&empty).arg("fsck"));
    assert_eq!(fsck["ok"], true, "{fsck}");
    assert!(fsck["pruned_files"].as_u64() > Some(0), "{fsck}");

    // Fetch from a remote that has them brings them back, verified.
    ok(bat(&dir)
        .args(["remote", "add", "mirror"])
        .arg(&mirror)
        .output()
        .expect("remote add"));
    let fetched = json(bat(&dir).args(["fetch", "mirror"]));
    assert!(
        fetched["stats"]["objects_stored"].as_u64() >= Some(expected.len() as u64),
        "{fetched}"
    );
    for (who, d) in [("restored", &dir), ("mirror", &mirror)] {
        ok(bat(d)
            .args(["checkout", "r02", "--to"])
            .arg(env.root().join(format!("r02-{who}")))
            .output()
            .expect("checkout"));
    }
    let a = env.root().join("r02-restored/candidate");
    let b = env.root().join("r02-mirror/candidate");
    for e in std::fs::read_dir(&b).expect("read dir").flatten() {
        let name = e.file_name();
        if e.path().is_file() {
            assert_eq!(
                std::fs::read(a.join(&name)).expect("restored file"),
                std::fs::read(e.path()).expect("mirror file"),
                "{name:?}"
            );
        }
    }
    let fsck = json(bat(&dir).arg("fsck"));
    assert_eq!(fsck["ok"], true, "{fsck}");
    assert_eq!(fsck["pruned_files"], 0);
}

fn init_with_commit(dir: &Path) -> PathBuf {
    ok(crate::common::bat()
        .arg("init")
        .arg(dir)
        .output()
        .expect("init"));
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("a.txt"), "first").expect("write");
    ok(bat(dir)
        .arg("commit")
        .arg(&data)
        .args(["-m", "first"])
        .output()
        .expect("commit"));
    data
}

#[test]
fn reflog_expiry_lets_gc_drop_a_deleted_branch() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let data = init_with_commit(dir);
    ok(bat(dir).args(["branch", "side"]).output().expect("branch"));
    ok(bat(dir).args(["switch", "side"]).output().expect("switch"));
    std::fs::write(data.join("big.bin"), vec![7u8; 300_000]).expect("write");
    std::fs::write(data.join("a.txt"), "second").expect("write");
    let side = json(bat(dir).arg("commit").arg(&data).args(["-m", "side"]));
    let side_id = side["commit"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| {
            json(bat(dir).args(["log", "side", "-n", "1"]))[0]["id"]
                .as_str()
                .expect("id")
                .to_string()
        });
    ok(bat(dir).args(["switch", "main"]).output().expect("switch"));
    ok(bat(dir)
        .args(["branch", "-d", "side"])
        .output()
        .expect("delete"));

    // The reflog still holds the branch's commit.
    let rep = json(bat(dir).arg("gc"));
    assert_eq!(rep["removed_objects"], 0, "{rep}");
    ok(bat(dir).args(["show", &side_id]).output().expect("show"));

    // A long expiry keeps it; a dry run changes nothing; `now` drops it.
    let rep = json(bat(dir).args(["gc", "--expire-reflog", "30d"]));
    assert_eq!(rep["expired_reflog_entries"], 0);
    assert_eq!(rep["removed_objects"], 0);
    let dry = json(bat(dir).args(["gc", "--expire-reflog", "now", "--dry-run"]));
    assert!(dry["expired_reflog_entries"].as_u64() > Some(0), "{dry}");
    assert!(dry["dropped_objects"].as_u64() > Some(0), "{dry}");
    ok(bat(dir).args(["show", &side_id]).output().expect("show"));
    let rep = json(bat(dir).args(["gc", "--expire-reflog", "now"]));
    assert_eq!(rep["expired_reflog_entries"], dry["expired_reflog_entries"]);
    assert_eq!(rep["dropped_objects"], dry["dropped_objects"]);
    assert_eq!(rep["dropped_record_bytes"], dry["dropped_record_bytes"]);
    assert!(
        rep["bytes_after"].as_u64() < rep["bytes_before"].as_u64(),
        "{rep}"
    );
    let out = bat(dir).args(["show", &side_id]).output().expect("show");
    assert!(!out.status.success(), "the deleted branch's commit is gone");
    assert_eq!(json(bat(dir).arg("fsck"))["ok"], true);
    // main is untouched.
    let co = tmp.path().join("co");
    ok(bat(dir)
        .args(["checkout", "main", "--to"])
        .arg(&co)
        .output()
        .expect("checkout"));
    assert_eq!(
        std::fs::read_to_string(co.join("a.txt")).expect("read"),
        "first"
    );
    let help = ok(bat(dir).args(["gc", "--help"]).output().expect("help"));
    let help = String::from_utf8_lossy(&help.stdout);
    for term in [
        "promoted",
        "last=N",
        "tagged",
        "--expire-reflog",
        "--dry-run",
    ] {
        assert!(help.contains(term), "gc --help names {term}");
    }
    let bad = bat(dir)
        .args(["gc", "--keep", "promoted,lats=3"])
        .output()
        .expect("gc");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("unknown retention term \"lats=3\""));
    let bad = bat(dir)
        .args(["gc", "--expire-reflog", "soon"])
        .output()
        .expect("gc");
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
}

#[test]
fn tags_move_with_a_reflog_entry_and_delete() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let data = init_with_commit(dir);
    std::fs::write(data.join("a.txt"), "second").expect("write");
    ok(bat(dir)
        .arg("commit")
        .arg(&data)
        .args(["-m", "second"])
        .output()
        .expect("commit"));
    let log = json(bat(dir).arg("log"));
    let (tip, first) = (
        log[0]["id"].as_str().expect("id").to_string(),
        log[1]["id"].as_str().expect("id").to_string(),
    );
    ok(bat(dir)
        .args(["tag", "v1", "HEAD~1"])
        .output()
        .expect("tag"));
    let again = bat(dir).args(["tag", "v1"]).output().expect("tag");
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("bat tag -f v1"),
        "{}",
        stderr(&again)
    );
    let moved = json(bat(dir).args(["tag", "-f", "v1", "HEAD"]));
    assert_eq!(moved["previous"], first.as_str());
    assert_eq!(moved["commit"], tip.as_str());
    let tags = json(bat(dir).arg("tag"));
    assert_eq!(tags[0]["commit"], tip.as_str());
    let reflog = json(bat(dir).args(["reflog", "v1"]));
    assert_eq!(reflog.as_array().map(Vec::len), Some(2), "{reflog}");
    let del = json(bat(dir).args(["tag", "-d", "v1"]));
    assert_eq!(del["deleted"], tip.as_str());
    assert_eq!(json(bat(dir).arg("tag")).as_array().map(Vec::len), Some(0));
    assert!(!bat(dir)
        .args(["tag", "-d", "v1"])
        .output()
        .expect("tag")
        .status
        .success());
}

#[test]
fn pruning_the_base_of_a_delta_chain_re_bases_the_kept_checkpoint() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    init_with_commit(dir);
    let data = dir.join("data");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut tensors: Vec<Vec<u8>> = (0..3)
        .map(|_| (0..(2 << 20)).map(|_| next() as u8).collect())
        .collect();
    let mut versions = Vec::new();
    for v in 0..3 {
        if v > 0 {
            for t in tensors.iter_mut() {
                for _ in 0..(t.len() / 64) {
                    let i = (next() as usize) % t.len();
                    t[i] ^= 1;
                }
            }
        }
        common::write_model(&data.join("model.safetensors"), &tensors);
        versions.push(std::fs::read(data.join("model.safetensors")).expect("read"));
        ok(bat(dir)
            .arg("commit")
            .arg(&data)
            .args(["-m", &format!("v{v}")])
            .output()
            .expect("commit"));
    }
    let stats = json(bat(dir).arg("stats"));
    assert!(stats["delta_objects"].as_u64() > Some(0), "{stats}");
    let ids: Vec<ObjectId> = versions.iter().map(|b| ObjectId::of_bytes(b)).collect();

    // Prune the two older versions (the bases of the newest one's deltas).
    let rep = {
        let mut l = Ledger::open_with(&dir.join(".bat"), LockMode::Exclusive).expect("open");
        let opts = bat_ledger::GcOptions {
            prune: ids[..2].to_vec(),
            policy: "test".into(),
            ..Default::default()
        };
        l.gc_with(
            &opts,
            &NoProgress,
            &std::sync::atomic::AtomicBool::new(false),
        )
        .expect("gc")
    };
    println!("delta chain pruning: {rep:?}");
    assert_eq!(rep.pruned_files, 2);
    assert!(rep.rebased_records > 0, "{rep:?}");
    assert!(rep.bytes_after < rep.bytes_before, "{rep:?}");
    let fsck = json(bat(dir).arg("fsck"));
    assert_eq!(fsck["ok"], true, "{fsck}");
    assert_eq!(fsck["pruned_files"], 2);
    let co = dir.join("co");
    ok(bat(dir)
        .args(["checkout", "HEAD", "--to"])
        .arg(&co)
        .output()
        .expect("checkout"));
    assert!(
        std::fs::read(co.join("model.safetensors")).expect("read") == versions[2],
        "the re-based checkpoint restores byte-exact"
    );
    let out = bat(dir)
        .args(["checkout", "HEAD~1", "--to"])
        .arg(dir.join("old"))
        .output()
        .expect("checkout");
    assert!(
        stderr(&out).contains("was pruned by `gc --keep test`"),
        "{}",
        stderr(&out)
    );
    // A later plain gc keeps everything readable.
    json(bat(dir).arg("gc"));
    assert_eq!(json(bat(dir).arg("fsck"))["ok"], true);
}

#[test]
fn sigkill_during_a_pruning_gc_leaves_an_fsck_clean_ledger() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let pristine = tmp.path().join("pristine");
    json(
        crate::common::bat()
            .arg("demo")
            .arg(&pristine)
            .args(["--rounds", "6", "--seeds", "1"]),
    );
    let copy = |to: &Path| {
        let _ = std::fs::remove_dir_all(to);
        ok(Command::new("cp")
            .arg("-a")
            .arg(&pristine)
            .arg(to)
            .output()
            .expect("cp"));
    };
    // How long an uninterrupted pruning gc takes here, and what it prunes.
    let probe = tmp.path().join("probe");
    copy(&probe);
    let start = std::time::Instant::now();
    let full = json(bat(&probe).args(["gc", "--keep", "last=1"]));
    let took = start.elapsed();
    let pruned = full["pruned_files"].as_u64().expect("count");
    assert!(pruned > 0, "{full}");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos() as u64;
    println!("gc took {took:?}; kill seed {seed}");
    let mut x = seed | 1;
    let (mut killed, mut finished) = (0, 0);
    for run in 0..12 {
        let dir = tmp.path().join("victim");
        copy(&dir);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = took.mul_f64((x % 1000) as f64 / 800.0);
        let mut child = bat(&dir)
            .args(["gc", "--keep", "last=1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn gc");
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let status = child.wait().expect("wait");
        if status.success() {
            finished += 1;
        } else {
            killed += 1;
        }
        let fsck = json(bat(&dir).arg("fsck"));
        assert_eq!(fsck["ok"], true, "run {run} (killed after {at:?}): {fsck}");
        let n = fsck["pruned_files"].as_u64();
        assert!(
            n == Some(0) || n == Some(pruned),
            "run {run}: all or nothing, found {n:?} pruned"
        );
        // The next gc finishes the job; the kept checkpoint reads back.
        json(bat(&dir).args(["gc", "--keep", "last=1"]));
        let fsck = json(bat(&dir).arg("fsck"));
        assert_eq!(fsck["ok"], true, "{fsck}");
        assert_eq!(fsck["pruned_files"].as_u64(), Some(pruned));
        let co = tmp.path().join(format!("co{run}"));
        ok(bat(&dir)
            .args(["checkout", "main", "--to"])
            .arg(&co)
            .output()
            .expect("checkout"));
    }
    println!("{killed} killed, {finished} finished");
}

#[test]
fn fetch_over_bat_serve_restores_pruned_checkpoints() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("campaign");
    json(
        crate::common::bat()
            .arg("demo")
            .arg(&dir)
            .args(["--rounds", "3", "--seeds", "1"]),
    );
    let mirror = tmp.path().join("mirror");
    ok(Command::new("cp")
        .arg("-a")
        .arg(&dir)
        .arg(&mirror)
        .output()
        .expect("cp"));
    let rep = json(bat(&dir).args(["gc", "--keep", "last=1"]));
    assert!(rep["pruned_files"].as_u64() > Some(0), "{rep}");
    let out = bat(&dir)
        .args(["checkout", "r01", "--to"])
        .arg(tmp.path().join("before"))
        .output()
        .expect("checkout");
    assert!(stderr(&out).contains("was pruned by `gc --keep last=1`"));
    let server = serve_common::Server::start(&mirror, &["--allow-anonymous-read"]);
    ok(bat(&dir)
        .args(["remote", "add", "srv", &server.url])
        .output()
        .expect("remote add"));
    json(bat(&dir).args(["fetch", "srv"]));
    ok(bat(&dir)
        .args(["checkout", "r01", "--to"])
        .arg(tmp.path().join("after"))
        .output()
        .expect("checkout"));
    let fsck = json(bat(&dir).arg("fsck"));
    assert_eq!(
        (fsck["ok"].clone(), fsck["pruned_files"].clone()),
        (Value::Bool(true), 0.into())
    );
}
