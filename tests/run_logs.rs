//! Child logs of committed rounds live in the ledger (issue 12, bounded run
//! directories): `bat run --backend sim` and `bat replay` commit each
//! round's trainer and evaluator logs under `logs/` of the round commit's
//! tree and then remove the files from `.bat/runs/<run-id>/logs/rNN/` (and
//! a replay's `logs/`), `bat cat REV:logs/…` gives the bytes back with the
//! sha256 the metadata records, a resume removes logs an interruption left
//! behind after their commit, and the `.bat` file count after `bat gc` does
//! not grow with the number of rounds.

use std::path::{Path, PathBuf};

use bat::engine::resume::{find_last_round, prepare_resume_with, ResumeOptions};
use bat::engine::rounds::{
    prepare_fresh, run_loop, CompletedRound, LedgerSink, RoundSink, RunOptions, SinkError, Start,
};
use bat::round::meta::{self, LOG_TREE_DIR};
use bat_contract::json::sha256_hex;
use bat_contract::pack::Pack;
use bat_ledger::{CommitId, Ledger};

use crate::common::bat_in as bat;
use crate::common::succeeded as ok;

/// A new ledger with a finished `bat run --backend sim` campaign of `rounds`.
fn sim_ledger(tmp: &Path, name: &str, rounds: u32) -> PathBuf {
    let l = tmp.join(name);
    std::fs::create_dir_all(&l).unwrap();
    ok(crate::common::bat().arg("init").arg(&l).output().unwrap());
    ok(bat(&l)
        .args(["run", "--backend", "sim", "--batches", "2", "--seed", "5"])
        .args(["--rounds", &rounds.to_string()])
        .output()
        .unwrap());
    l
}

/// Round commits on the first-parent chain from `rev`, oldest first.
fn round_commits(l: &Ledger, rev: &str) -> Vec<(CommitId, meta::RoundMeta)> {
    let mut out = Vec::new();
    let mut cur = Some(l.resolve(rev).expect("rev"));
    while let Some(id) = cur {
        let c = l.read_commit(&id).expect("commit");
        if let Some(m) = meta::read(&c.metadata).expect("readable round metadata") {
            out.push((id, m));
        }
        cur = c.parents.first().copied();
    }
    out.reverse();
    out
}

/// Regular files under `dir`, recursively (relative paths, sorted).
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(d) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Files under `<dir>/*/logs/` that belong to a round (`rNN/…`).
fn round_log_files(dir: &Path) -> Vec<String> {
    files_under(dir)
        .into_iter()
        .filter(|f| {
            let mut parts = f.split('/').skip(1);
            parts.next() == Some("logs")
                && parts.next().is_some_and(|r| {
                    r.strip_prefix('r')
                        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
        })
        .collect()
}

/// Every round's four logs are tree files whose bytes (read with `bat cat`)
/// have the sha256 the metadata records, and the files they were written to
/// are gone.
fn assert_logs_in_ledger(ledger_dir: &Path, l: &Ledger, rounds: &[(CommitId, meta::RoundMeta)]) {
    for (id, m) in rounds {
        let lm = m.loop_meta.as_ref().expect("loop record");
        assert_eq!(lm.logs.len(), 4, "{}: {:?}", m.round_id, lm.logs.keys());
        for (name, log) in &lm.logs {
            let tree = log
                .tree
                .as_deref()
                .expect("a committed log has a tree path");
            assert!(tree.starts_with(&format!("{LOG_TREE_DIR}/")), "{tree}");
            let out = ok(bat(ledger_dir)
                .arg("cat")
                .arg(format!("{id}:{tree}"))
                .output()
                .unwrap());
            assert_eq!(
                sha256_hex(&out.stdout),
                log.sha256,
                "{} {name}: bytes from the ledger",
                m.round_id
            );
            // The file outside the ledger is gone.
            assert!(!Path::new(&log.path).exists(), "{} still exists", log.path);
        }
        // The trainer's log says what it trained.
        let c = l.read_commit(id).unwrap();
        let e = l
            .lookup_path(&c.tree, "logs/trainer.stderr")
            .unwrap()
            .expect("logs/trainer.stderr in the tree");
        assert!(l.read_bytes(&e.id).is_ok());
    }
}

#[test]
fn sim_run_commits_round_logs_and_keeps_none_in_the_run_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let l = sim_ledger(tmp.path(), "a", 4);
    let runs = l.join(".bat/runs");
    assert_eq!(round_log_files(&runs), Vec::<String>::new());
    // The baseline evaluation's logs (one pair per run) stay.
    assert!(files_under(&runs)
        .iter()
        .any(|f| f.contains("/logs/baseline")));
    let ledger = Ledger::open(&l.join(".bat")).unwrap();
    let rounds = round_commits(&ledger, "HEAD");
    assert_eq!(rounds.len(), 4);
    assert_logs_in_ledger(&l, &ledger, &rounds);
    // `bat show --files` lists them; fsck is clean.
    let show = ok(bat(&l).args(["show", "--files", "HEAD"]).output().unwrap());
    let show = String::from_utf8_lossy(&show.stdout);
    for f in [
        "logs/trainer.stdout",
        "logs/trainer.stderr",
        "logs/evaluator.stdout",
        "logs/evaluator.stderr",
    ] {
        assert!(show.contains(f), "{f} in\n{show}");
    }
    ok(bat(&l).arg("fsck").output().unwrap());
    // A replay commits its arm's logs the same way, and a verify of the
    // original still passes (logs are not artifacts).
    let (verify_dir, arm_dir) = (tmp.path().join("verify"), tmp.path().join("arm"));
    let verify = ok(bat(&l)
        .args(["--json", "replay", "r02", "--verify", "--work-dir"])
        .arg(&verify_dir)
        .output()
        .unwrap());
    let verify: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(verify["reproduced"], true, "{verify}");
    let replay = ok(bat(&l)
        .args([
            "--json",
            "replay",
            "r01..r02",
            "--branch",
            "arm",
            "--work-dir",
        ])
        .arg(&arm_dir)
        .output()
        .unwrap());
    let replay: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replay["rounds"].as_array().unwrap().len(), 2, "{replay}");
    drop(ledger);
    let ledger = Ledger::open(&l.join(".bat")).unwrap();
    let arm: Vec<_> = round_commits(&ledger, "arm")
        .into_iter()
        .filter(|(_, m)| m.replay_of.is_some())
        .collect();
    assert_eq!(arm.len(), 2);
    assert_logs_in_ledger(&l, &ledger, &arm);
    // The verify committed nothing, so its logs stay; the arm's are gone.
    assert_eq!(files_under(&verify_dir.join("logs/r02")).len(), 4);
    let arm_logs = files_under(&arm_dir.join("logs"));
    assert!(!arm_logs.iter().any(|f| f.starts_with('r')), "{arm_logs:?}");
    ok(bat(&l).arg("fsck").output().unwrap());
}

#[test]
fn ledger_file_count_after_gc_does_not_grow_with_rounds() {
    let tmp = tempfile::tempdir().unwrap();
    let mut counts = Vec::new();
    for (name, rounds) in [("three", 3), ("six", 6)] {
        let l = sim_ledger(tmp.path(), name, rounds);
        ok(bat(&l).arg("gc").output().unwrap());
        let all = files_under(&l.join(".bat"));
        counts.push((rounds, all.len(), all));
    }
    let (three, six) = (&counts[0], &counts[1]);
    assert!(
        six.1 <= three.1,
        "{} files after 3 rounds, {} after 6:\n{:#?}\n{:#?}",
        three.1,
        six.1,
        three.2,
        six.2
    );
}

/// The ledger sink, except that it does not claim the logs: the loop then
/// leaves them, as a kill between a round's commit and their removal does.
struct KeepLogs<'l>(LedgerSink<'l>);

impl RoundSink for KeepLogs<'_> {
    fn round_completed(&mut self, round: &CompletedRound<'_>) -> Result<String, SinkError> {
        self.0.round_completed(round)
    }
}

struct Quiet;
impl bat::engine::rounds::Observer for Quiet {
    fn event(&mut self, _: &bat::engine::rounds::LoopEvent<'_>) {}
}
impl bat::engine::child::OutputSink for Quiet {
    fn output(&mut self, _: &str, _: bat::engine::child::Stream, _: &[u8]) {}
}

#[test]
fn resume_removes_logs_left_between_commit_and_removal() {
    let tmp = tempfile::tempdir().unwrap();
    let l = tmp.path().join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    let mut ledger = Ledger::init(&l).unwrap();
    let mut spec = bat::sim::SimCampaign::new(
        tmp.path().join("setup"),
        tmp.path().join("work"),
        PathBuf::from(env!("CARGO_BIN_EXE_bat")),
    );
    spec.rounds = 2;
    spec.batches = 2;
    let campaign = prepare_fresh(&bat::sim::prepare_campaign(&spec).unwrap()).unwrap();
    let pack = Pack::default_pack();
    let logs = tmp.path().join("logs");
    let mut sink = KeepLogs(LedgerSink {
        ledger: &mut ledger,
        ctx: bat::Ctx::quiet(),
        options: bat::round::CommitRoundOptions {
            pack: pack.clone(),
            ..Default::default()
        },
    });
    run_loop(
        &campaign,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: Some(&logs),
            run_id: "keep",
            prune_round_dirs: false,
        },
        &mut Quiet,
        &mut sink,
    )
    .unwrap();
    drop(sink);
    let r02: Vec<String> = files_under(&logs.join("r02"));
    assert_eq!(r02.len(), 4, "{r02:?}");
    // An unrelated file in the round's log folder is not the ledger's.
    std::fs::write(logs.join("r02/notes.txt"), b"mine").unwrap();
    let recorded = find_last_round(&ledger, "HEAD").unwrap().unwrap();
    prepare_resume_with(
        &ledger,
        &recorded,
        &tmp.path().join("restore"),
        ResumeOptions {
            rounds: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(files_under(&logs.join("r02")), ["notes.txt"]);
    // The last round's logs are readable from its commit, byte for byte.
    let rounds = round_commits(&ledger, "HEAD");
    let (id, m) = rounds.last().unwrap();
    let c = ledger.read_commit(id).unwrap();
    for log in m.loop_meta.as_ref().unwrap().logs.values() {
        let e = ledger
            .lookup_path(&c.tree, log.tree.as_deref().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(sha256_hex(&ledger.read_bytes(&e.id).unwrap()), log.sha256);
    }
}
