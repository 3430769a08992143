//! Round metadata of constant size and bounded run directories (issue 12):
//! the typed reader on documents written by this build and by the previous
//! format (a ledger committed under `tests/data/legacy-v0/`), commit objects
//! that do not grow with the round number, and `bat run` keeping O(1) round
//! folders under `.bat/runs` while `--resume` still works after a kill.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bat::engine::rounds::{prepare_fresh, run_loop, LedgerSink, RunOptions, Start};
use bat::round::meta::{self, LoopMeta, SummaryRef};
use bat_contract::json;
use bat_contract::pack::Pack;
use bat_ledger::{CommitId, Kind, Ledger};

use crate::common::bat;
use crate::common::copy_tree;
use crate::common::succeeded as ok;

struct Quiet;
impl bat::engine::rounds::Observer for Quiet {
    fn event(&mut self, _: &bat::engine::rounds::LoopEvent<'_>) {}
}
impl bat::engine::child::OutputSink for Quiet {
    fn output(&mut self, _: &str, _: bat::engine::child::Stream, _: &[u8]) {}
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

/// Round folders (`rNN`) in a work dir.
fn round_folders(w: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(w)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('r') && n[1..].bytes().all(|b| b.is_ascii_digit()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn round_commit_objects_do_not_grow_with_the_round_number() {
    let tmp = tempfile::tempdir().unwrap();
    let l = tmp.path().join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    let mut ledger = Ledger::init(&l).unwrap();
    let mut spec = bat::sim::SimCampaign::new(
        tmp.path().join("setup"),
        tmp.path().join("work"),
        PathBuf::from(env!("CARGO_BIN_EXE_bat")),
    );
    spec.rounds = 40;
    spec.batches = 2;
    let campaign = prepare_fresh(&bat::sim::prepare_campaign(&spec).unwrap()).unwrap();
    let pack = Pack::default_pack();
    let options = bat::round::CommitRoundOptions {
        pack: pack.clone(),
        ..Default::default()
    };
    let mut sink = LedgerSink {
        ledger: &mut ledger,
        options,
        ctx: bat::Ctx::quiet(),
    };
    run_loop(
        &campaign,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: None,
            run_id: "size",
            prune_round_dirs: true,
        },
        &mut Quiet,
        &mut sink,
    )
    .unwrap();
    drop(sink);

    let rounds = round_commits(&ledger, "HEAD");
    assert_eq!(rounds.len(), 40);
    let size = |i: usize| {
        ledger
            .read_object(&rounds[i].0 .0, Kind::Commit)
            .unwrap()
            .len()
    };
    let (r4, r40) = (size(3), size(39));
    assert!(
        (r40 as f64) <= 1.5 * r4 as f64,
        "commit object r40 {r40} B vs r04 {r4} B"
    );

    // The typed reader gives back exactly the loop state the work dir has.
    let state =
        json::parse_bytes(&std::fs::read(campaign.work_dir.join("state.json")).unwrap()).unwrap();
    let (last, last_meta) = rounds.last().unwrap();
    assert_eq!(last_meta.schema, meta::ROUND_META_SCHEMA);
    let lm = last_meta.loop_meta.as_ref().unwrap();
    let history = lm.history(&ledger, *last).unwrap();
    assert_eq!(
        json::Value::Array(history),
        *state.get("history").unwrap(),
        "history rebuilt from the chain"
    );
    let (baseline, initial) = lm
        .summaries(&ledger, *last, Path::new("/nonexistent"))
        .unwrap();
    for s in [&baseline, &initial] {
        assert!(
            ledger.contains(&s.id).unwrap(),
            "summary object in the ledger"
        );
    }
    assert_eq!(
        initial.bytes,
        std::fs::read(campaign.work_dir.join("baseline-eval/summary.json")).unwrap()
    );
    // An unchanged baseline is one object: every round names the same
    // initial summary.
    for (_, m) in &rounds {
        let l = m.loop_meta.as_ref().unwrap();
        assert_eq!(l.initial_summary, SummaryRef::Object(initial.id));
    }
    // Only the current checkpoint's round folder is left in the work dir.
    let kept = round_folders(&campaign.work_dir);
    assert!(kept.len() <= 1, "{kept:?}");
    assert_eq!(kept.first(), lm.current_checkpoint.round_id.as_ref());
}

/// The legacy fixture: a 3-round `bat run --backend sim` ledger written by
/// bat before round metadata schema 1, with the outputs that bat printed.
fn legacy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/legacy-v0")
}

fn legacy_copy(tmp: &Path) -> PathBuf {
    let l = tmp.join("legacy");
    copy_tree(&legacy().join("ledger"), &l.join(".bat"));
    l
}

#[test]
fn a_ledger_written_before_schema_1_reads_through_the_same_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let l = legacy_copy(tmp.path());
    let ledger = Ledger::open(&l.join(".bat")).unwrap();
    let rounds = round_commits(&ledger, "HEAD");
    assert_eq!(rounds.len(), 3);
    for (id, m) in &rounds {
        assert_eq!(m.schema, 0, "written before schema 1");
        let lm = m.loop_meta.as_ref().unwrap();
        assert_eq!(lm.schema_version, meta::LOOP_INLINE_VERSION);
        // The inline state and the reader's answers agree.
        let inline = lm.state.as_ref().unwrap();
        let history = lm.history(&ledger, *id).unwrap();
        assert_eq!(history.len(), inline.history.len());
        assert_eq!(lm.completed_rounds(), inline.completed_rounds);
        // The summaries come back as the committed files' bytes (objects of
        // the ledger) with the inline documents' content.
        let (baseline, initial) = lm
            .summaries(&ledger, *id, Path::new("/nonexistent"))
            .unwrap();
        for (s, inline) in [
            (&baseline, &lm.baseline_summary),
            (&initial, &lm.initial_summary),
        ] {
            assert!(ledger.contains(&s.id).unwrap());
            let SummaryRef::Inline(v) = inline else {
                panic!("legacy summaries are inline")
            };
            let parsed: serde_json::Value = serde_json::from_slice(&s.bytes).unwrap();
            assert_eq!(&parsed, v);
        }
        assert_eq!(
            lm.initial_summary_id(&ledger, *id).unwrap(),
            initial.id,
            "the first round's baseline-summary.json"
        );
    }
    // What bat printed for this ledger then, it prints now.
    for (args, expected) in [
        (vec!["log"], "log.txt"),
        (vec!["compare", "main", "main"], "compare.txt"),
        (vec!["diff", "r01", "r03"], "diff.txt"),
    ] {
        let out = ok(bat().arg("-C").arg(&l).args(&args).output().unwrap());
        let printed = String::from_utf8_lossy(&out.stdout);
        let then = std::fs::read_to_string(legacy().join(expected)).unwrap();
        if args[0] == "compare" {
            // `compare` has since added the statistics after the table it
            // printed then; the table is unchanged.
            assert!(printed.starts_with(&then), "bat {args:?}:\n{printed}");
            assert!(
                printed.contains("\nbootstrap: "),
                "bat {args:?}:\n{printed}"
            );
        } else {
            assert_eq!(printed, then, "bat {args:?}");
        }
    }
    ok(bat().arg("-C").arg(&l).arg("fsck").output().unwrap());
}

#[test]
fn a_legacy_round_replays_bit_for_bit_from_the_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let l = legacy_copy(tmp.path());
    let out = ok(bat()
        .arg("-C")
        .arg(&l)
        .args(["--json", "replay", "r02", "--verify"])
        .output()
        .unwrap());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["reproduced"], true, "{report}");
}

#[test]
fn bat_run_keeps_o1_round_folders_and_resumes_after_kill_9() {
    let tmp = tempfile::tempdir().unwrap();
    let l = tmp.path().join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    ok(bat().arg("init").arg(&l).output().unwrap());
    let args = [
        "run",
        "--backend",
        "sim",
        "--rounds",
        "6",
        "--batches",
        "2",
        "--seed",
        "3",
    ];
    let mut child = bat()
        .arg("-C")
        .arg(&l)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runs = l.join(".bat/runs");
    let work = || -> Option<PathBuf> {
        std::fs::read_dir(&runs)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path().join("work"))
            .find(|w| w.is_dir())
    };
    // Kill it somewhere after r03 has started.
    let start = Instant::now();
    loop {
        if work().is_some_and(|w| w.join("r03").exists()) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "r03 never started"
        );
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    let w = work().expect("work dir");
    // The killed run's simulator children notice they were orphaned and end
    // by themselves; wait for that, as a user would, before resuming (the
    // run lock refuses while they live, and may not yet name a child that
    // had just started when the run was killed).
    let ledger_arg = l.to_string_lossy().into_owned();
    let orphans = || {
        std::fs::read_dir("/proc")
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                    .filter(|c| {
                        let c = String::from_utf8_lossy(c);
                        c.contains(&ledger_arg) && c.contains("sim")
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    let start = Instant::now();
    while orphans() > 0 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    let out = loop {
        let out = bat()
            .arg("-C")
            .arg(&l)
            .args(["--json", "run", "--resume"])
            .output()
            .unwrap();
        let held = String::from_utf8_lossy(&out.stderr).contains("another `bat run` holds");
        if !held || start.elapsed() > Duration::from_secs(60) {
            break ok(out);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "complete");
    assert_eq!(result["history"].as_array().unwrap().len(), 6);
    let ledger = Ledger::open(&l.join(".bat")).unwrap();
    let ids: Vec<String> = round_commits(&ledger, "HEAD")
        .into_iter()
        .map(|(_, m)| m.round_id)
        .collect();
    assert_eq!(ids, ["r01", "r02", "r03", "r04", "r05", "r06"]);
    // The same campaign uninterrupted gives the same history.
    let full = tmp.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    ok(bat().arg("init").arg(&full).output().unwrap());
    let reference = ok(bat()
        .arg("-C")
        .arg(&full)
        .arg("--json")
        .args(args)
        .output()
        .unwrap());
    let reference: serde_json::Value = serde_json::from_slice(&reference.stdout).unwrap();
    assert_eq!(result["history"], reference["history"]);
    // O(1) round folders in both work dirs.
    assert!(round_folders(&w).len() <= 1, "{:?}", round_folders(&w));
    let last = round_commits(&ledger, "HEAD").pop().unwrap().1;
    assert_eq!(
        round_folders(&w).first(),
        last.loop_meta
            .as_ref()
            .unwrap()
            .current_checkpoint
            .round_id
            .as_ref()
    );
    // No round's child logs are left in the run dir after the resume: each
    // round's are in its commit (the killed round's were rewritten by the
    // resumed round and then removed).
    let round_logs: Vec<String> = std::fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .flat_map(|run| {
            std::fs::read_dir(run.path().join("logs"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('r') && n[1..].bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(round_logs, Vec::<String>::new());
    ok(bat().arg("-C").arg(&l).arg("fsck").output().unwrap());
    // A loop record parses on its own too (what `--resume` reads).
    let c = ledger
        .read_commit(&ledger.resolve("HEAD").unwrap())
        .unwrap();
    LoopMeta::from_value(&c.metadata["loop"]).unwrap();
}
