//! Replay scratch and failures, through the real binary: a replay's work
//! folder (`.bat/replays/<id>/`) is gone after success, kept (and named)
//! after a failure whose trainer stderr is shown; `bat gc` removes stale
//! replay folders and the folders of runs that committed nothing, never a
//! replay or run in progress; `bat stats` counts scratch apart from stored
//! bytes. And reverts: the report's Reproduce command passes on a campaign
//! with a revert, and `bat run`'s closing summary names the promoted round.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common::{bat, stderr};
use crate::integrity_cli::toy_campaign;

fn run(ledger: &Path, args: &[&str]) -> Output {
    bat()
        .arg("-C")
        .arg(ledger)
        .args(args)
        .output()
        .expect("bat runs")
}

fn ok_json(ledger: &Path, args: &[&str]) -> Value {
    let out = run(ledger, &[&["--json"], args].concat());
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn subdirs(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(p) {
        Ok(rd) => rd
            .map(|e| e.expect("entry").path())
            .filter(|p| p.is_dir())
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// A replay folder with a marker, as a replay of `pid` leaves it.
fn fake_replay(dir: &Path, pid: u32, ended: bool) {
    std::fs::create_dir_all(dir.join("rounds/r01")).expect("mkdir");
    std::fs::write(dir.join("rounds/r01/model.bin"), vec![7u8; 4096]).expect("write");
    let marker = serde_json::json!({"pid": pid, "rev": "r01", "ended": ended});
    std::fs::write(dir.join("replay.lock"), marker.to_string()).expect("marker");
}

#[test]
fn replay_scratch_is_bounded_and_failures_say_why() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (ledger, script) = toy_campaign(tmp.path());
    let dot = ledger.join(".bat");
    let replays = dot.join("replays");

    // Success: nothing is left behind.
    let v = ok_json(&ledger, &["replay", "r01..r02", "--verify"]);
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["work_dir"], Value::Null);
    assert!(subdirs(&replays).is_empty(), "{:?}", subdirs(&replays));
    let stats = ok_json(&ledger, &["stats"]);
    let stored_before = stats["stored_bytes"].as_u64().expect("stored");

    // A trainer that fails: its stderr and log path are printed, the work
    // folder is kept and named.
    std::fs::write(
        &script,
        "echo 'step 1 ok'\necho 'boom: CUDA out of memory at step 2' >&2\nexit 3\n",
    )
    .expect("script");
    let out = run(&ledger, &["replay", "r01", "--verify"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the trainer exited with status 3"), "{err}");
    assert!(err.contains("boom: CUDA out of memory at step 2"), "{err}");
    assert!(err.contains("r01/trainer.stderr"), "{err}");
    let kept = subdirs(&replays);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        err.contains(&format!("work files are kept in {}", kept[0].display())),
        "{err}"
    );
    let log = kept[0].join("logs/r01/trainer.stderr");
    assert!(
        std::fs::read_to_string(&log)
            .expect("the log is kept")
            .contains("boom"),
        "{}",
        log.display()
    );

    // A replay in progress (its marker names a live process: this test)
    // and one that ended; a run that committed nothing.
    let live = replays.join("1-live");
    fake_replay(&live, std::process::id(), false);
    let ended = replays.join("2-ended");
    fake_replay(&ended, std::process::id(), true);
    let leftover = dot.join("runs/1-999999");
    std::fs::create_dir_all(leftover.join("work")).expect("mkdir");
    std::fs::write(leftover.join("work/partial.bin"), vec![1u8; 1000]).expect("write");
    let runs_before = subdirs(&dot.join("runs"));
    assert_eq!(runs_before.len(), 2, "the campaign's run and the leftover");

    // stats: scratch apart from stored bytes.
    let stats = ok_json(&ledger, &["stats"]);
    let scratch = stats["scratch_bytes"].as_u64().expect("scratch bytes");
    let dirs = stats["scratch"]["dirs"].as_array().expect("dirs");
    let sum: u64 = dirs
        .iter()
        .map(|d| d["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(scratch, sum);
    assert!(scratch > 4096 * 2 + 1000, "{stats}");
    let state = |p: &Path| {
        dirs.iter()
            .find(|d| d["path"].as_str() == Some(&p.to_string_lossy()))
            .map(|d| d["state"].as_str().expect("state").to_string())
            .unwrap_or_else(|| panic!("{} not listed: {stats}", p.display()))
    };
    assert_eq!(state(&live), "live");
    assert_eq!(state(&ended), "stale");
    assert_eq!(state(&kept[0]), "stale");
    assert_eq!(state(&leftover), "stale");
    let stored_after = stats["stored_bytes"].as_u64().expect("stored");
    assert!(
        stored_after < stored_before + 4096 * 2 + 1000,
        "stored bytes must not count scratch: {stored_before} -> {stored_after} (scratch {scratch})"
    );
    let text = String::from_utf8_lossy(&run(&ledger, &["stats"]).stdout).into_owned();
    assert!(
        text.contains(&format!("scratch bytes  {scratch} ")),
        "{text}"
    );

    // gc removes what is stale, keeps the live replay and the committed run.
    let out = run(&ledger, &["gc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("remove 3 stale scratch folders"), "{text}");
    assert_eq!(subdirs(&replays), vec![live.clone()]);
    let runs_after = subdirs(&dot.join("runs"));
    assert_eq!(runs_after.len(), 1, "{runs_after:?}");
    assert!(!leftover.exists());
    let stats = ok_json(&ledger, &["stats"]);
    let live_bytes = stats["scratch"]["dirs"]
        .as_array()
        .expect("dirs")
        .iter()
        .filter(|d| d["kind"] == "replay")
        .map(|d| d["bytes"].as_u64().expect("bytes"))
        .sum::<u64>();
    assert!(live_bytes >= 4096, "{stats}");

    // A live run lock keeps every run folder, committed or not.
    std::fs::create_dir_all(&leftover).expect("mkdir");
    let lock = serde_json::json!({
        "pid": std::process::id(),
        "command": "bat run",
        "started_unix": 0
    });
    std::fs::write(dot.join("run.lock"), lock.to_string()).expect("lock");
    let v = ok_json(&ledger, &["gc", "--dry-run"]);
    let removed = v["scratch_removed"].as_array().expect("removed");
    assert!(
        removed.iter().all(|d| d["kind"] != "run"),
        "a run folder listed while a run is live: {v}"
    );
    std::fs::remove_file(dot.join("run.lock")).expect("unlock");
    let v = ok_json(&ledger, &["gc", "--dry-run"]);
    assert_eq!(
        v["scratch_removed"][0]["path"],
        leftover.to_string_lossy().as_ref()
    );
    assert!(leftover.exists(), "--dry-run removes nothing");
}

fn sim_campaign(root: &Path, rounds: u32) -> PathBuf {
    let l = root.join("ledger");
    std::fs::create_dir_all(&l).expect("mkdir");
    assert!(bat().arg("init").arg(&l).status().expect("init").success());
    let out = run(
        &l,
        &[
            "run",
            "--backend",
            "sim",
            "--batches",
            "4",
            "--rounds",
            &rounds.to_string(),
            "--seed",
            "1",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    l
}

#[test]
fn the_reports_reproduce_command_passes_after_a_revert() {
    let tmp = tempfile::tempdir().expect("tmp");
    let l = sim_campaign(tmp.path(), 4);
    let log = ok_json(&l, &["log"]);
    let promoted: Vec<String> = log
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["metadata"]["gate_status"] == "promote")
        .map(|e| e["metadata"]["round_id"].as_str().expect("id").to_string())
        .collect();
    assert!(promoted.len() >= 2, "this seed promotes twice: {log}");
    // Undo the newest promotion, then run on from the round before it.
    let reverted = &promoted[0];
    let out = run(&l, &["revert", reverted]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&l, &["run", "--resume", "--rounds", "6"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = String::from_utf8_lossy(&out.stdout);
    let line = summary
        .lines()
        .find(|x| x.trim_start().starts_with(reverted.as_str()))
        .unwrap_or_else(|| panic!("no {reverted} in the summary:\n{summary}"));
    assert!(line.ends_with("(reverted)"), "{summary}");
    let promoted_line = summary
        .lines()
        .find(|x| x.starts_with("promoted "))
        .unwrap_or_else(|| panic!("no promoted line:\n{summary}"));
    assert!(
        !promoted_line.contains(&format!("round {reverted} ")),
        "{summary}"
    );

    // Drift is measured against what each round trained from: the round
    // after the revert against the restored round, never the reverted one.
    let log = ok_json(&l, &["log"]);
    let mut rounds: Vec<(String, String, String)> = log
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .map(|e| {
            let s = |k: &str| e["metadata"][k].as_str().expect("field").to_string();
            (
                e["id"].as_str().expect("id").to_string(),
                s("round_id"),
                s("gate_status"),
            )
        })
        .collect();
    rounds.reverse();
    let ledger = bat_ledger::Ledger::open(&l.join(".bat")).expect("open");
    let ids: Vec<bat_ledger::CommitId> = rounds
        .iter()
        .map(|(id, _, _)| ledger.resolve(id).expect("commit"))
        .collect();
    let bases = bat::inspect::drift::trained_from(&ledger, &ids).expect("bases");
    let at = |rid: &str| rounds.iter().position(|r| r.1 == rid).expect("round");
    let after = at("r05");
    let restored = promoted.get(1).map(|p| at(p));
    assert_eq!(
        bases[after],
        restored.map(|i| ids[i]),
        "the round after the revert trained from the restored round"
    );
    for (i, base) in bases.iter().enumerate().skip(1) {
        // A round never trained from a held candidate.
        if let Some(b) = base {
            let j = ids.iter().position(|x| x == b).expect("listed");
            assert_eq!(
                rounds[j].2, "promote",
                "{:?} from {:?}",
                rounds[i], rounds[j]
            );
        }
    }

    // The report's Reproduce block, run as printed.
    let html = tmp.path().join("report.html");
    let out = run(&l, &["report", "-o", &html.to_string_lossy()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).expect("report");
    let cmd = page
        .lines()
        .flat_map(|x| x.split("<pre>").flat_map(|y| y.split('\n')))
        .find(|x| x.starts_with("bat replay "))
        .unwrap_or_else(|| panic!("no replay command in the report"))
        .to_string();
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    assert!(args.contains(&"--verify"), "{cmd}");
    let out = run(&l, &args);
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}\n{}",
        stderr(&out),
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("reproduced: 6 round(s) bit for bit"),
        "{text}"
    );
}
