//! `bat run` owns its children: SIGTERM is forwarded to the trainer's
//! process group and a trainer that ignores it is killed after the grace
//! period; a `bat run` killed with SIGKILL leaves a run lock that keeps a
//! second run out while its orphaned trainer lives (even when bat was killed
//! before it recorded the trainer's group), and is taken over once the
//! orphan is gone. Real processes throughout (a shell-script trainer).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use run_support::*;

use crate::common::run as run_support;

/// A trainer that, for round r02 while `hang` exists, records its pid (its
/// process group: bat starts it as a group leader) and then ignores SIGTERM
/// in a long sleep; otherwise the toy trainer.
fn hanging_trainer(t: &Toy) -> std::path::PathBuf {
    let root = t.root.display();
    t.shell_trainer(&format!(
        "if [ \"$6\" = r02 ] && [ -e '{root}/hang' ]; then\n\
         trap '' TERM\n\
         echo $$ > '{root}/trainer.pid.tmp' && mv '{root}/trainer.pid.tmp' '{root}/trainer.pid'\n\
         sleep 1000\n\
         exit 7\n\
         fi"
    ))
}

fn spawn_run(t: &Toy, args: &[String]) -> std::process::Child {
    bat()
        .arg("-C")
        .arg(&t.ledger)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn trainer_pgid(t: &Toy) -> u32 {
    std::fs::read_to_string(t.root.join("trainer.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The run lock once it names the trainer's group. bat records the group
/// right after the spawn returns, which can be after the trainer has
/// already written its pid file, so the lock is read until it does.
fn wait_for_lock_pgid(t: &Toy, pgid: u32) -> serde_json::Value {
    let path = t.ledger.join(".bat/run.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let lock: Option<serde_json::Value> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match lock {
            Some(l) if l["child_pgid"] == pgid => return l,
            other => assert!(
                Instant::now() < deadline,
                "the run lock never named group {pgid}: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_is_forwarded_then_the_group_is_killed_after_the_grace_period() {
    let t = Toy::new();
    let trainer = hanging_trainer(&t);
    std::fs::write(t.root.join("hang"), "").unwrap();
    let mut args = t.run_args(&trainer, &t.evaluator, 2);
    args.extend(["--grace-period".into(), "1".into()]);
    let mut child = spawn_run(&t, &args);
    wait_for_file(&t.root.join("trainer.pid"), 120, &mut child);
    let pgid = trainer_pgid(&t);
    assert!(!group_members(pgid).is_empty(), "the trainer group runs");
    // The lock names bat and the trainer's group.
    let lock = wait_for_lock_pgid(&t, pgid);
    assert_eq!(lock["pid"], child.id());
    assert_eq!(lock["child_pgid"], pgid);
    assert_eq!(lock["child_label"], "r02/trainer");

    // The trainer ignores SIGTERM: bat waits the grace period, then kills.
    let err = terminate_expecting_grace_kill(child);
    assert!(err.contains("bat run --resume"), "{err}");
    assert!(
        group_members(pgid).is_empty(),
        "processes of the trainer group survived: {:?}",
        group_members(pgid)
    );
    assert!(!t.ledger.join(".bat/run.lock").exists(), "lock released");
    assert_eq!(logged_rounds(&t.ledger).len(), 1, "only r01 committed");
    fsck_ok(&t.ledger);

    // --resume redoes r02.
    std::fs::remove_file(t.root.join("hang")).unwrap();
    let out = ok(t.run(&["--json".into(), "run".into(), "--resume".into()]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "complete");
    let ids: Vec<String> = logged_rounds(&t.ledger)
        .iter()
        .map(|r| r["round_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["r02", "r01"]);
    fsck_ok(&t.ledger);
}

#[test]
fn a_killed_run_leaves_a_lock_that_holds_while_its_orphan_lives() {
    let t = Toy::new();
    let trainer = hanging_trainer(&t);
    std::fs::write(t.root.join("hang"), "").unwrap();
    let args = t.run_args(&trainer, &t.evaluator, 2);
    let mut child = spawn_run(&t, &args);
    wait_for_file(&t.root.join("trainer.pid"), 120, &mut child);
    let pgid = trainer_pgid(&t);
    wait_for_lock_pgid(&t, pgid);
    let bat_pid = sigkill(&mut child);
    // The orphaned trainer group lives on (it has nobody to stop it).
    assert!(!group_members(pgid).is_empty());

    // A second run on the ledger refuses, naming the lock and its holder.
    let out = t.run(&["run".into(), "--resume".into()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run.lock"), "{err}");
    assert!(err.contains(&format!("pid {bat_pid}")), "{err}");
    assert!(err.contains(&format!("process group {pgid}")), "{err}");
    assert!(err.contains("--break-lock"), "{err}");
    assert!(
        err.contains("--protocol-id toy-protocol"),
        "the command is named: {err}"
    );
    // A fresh campaign is refused as well (one run per ledger).
    let out = t.run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(logged_rounds(&t.ledger).len(), 1);

    // Once the orphan is gone the lock is stale and taken over.
    kill_group_and_wait(pgid);
    std::fs::remove_file(t.root.join("hang")).unwrap();
    let out = ok(t.run(&["run".into(), "--resume".into()]));
    let err = stderr(&out);
    assert!(err.contains("took over the stale run lock"), "{err}");
    assert!(err.contains(&format!("pid {bat_pid}")), "{err}");
    assert_eq!(logged_rounds(&t.ledger).len(), 2);
    assert!(!t.ledger.join(".bat/run.lock").exists());
    fsck_ok(&t.ledger);
}

/// Kills a bat process and a (supervised, hence own) trainer group left
/// behind by a failed assertion.
struct Cleanup {
    pid: Option<u32>,
    group: Option<u32>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.pid {
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
        if let Some(g) = self.group {
            kill_group(g);
        }
    }
}

#[test]
fn a_run_killed_between_spawn_and_lock_update_still_guards_its_orphan() {
    let t = Toy::new();
    let trainer = hanging_trainer(&t);
    std::fs::write(t.root.join("hang"), "").unwrap();
    let args = t.run_args(&trainer, &t.evaluator, 2);
    // bat sleeps right after spawning a child, before recording its group:
    // the window a SIGKILL can hit.
    let mut child = bat()
        .arg("-C")
        .arg(&t.ledger)
        .args(&args)
        .env("BAT_TEST_CHILD_RECORD_DELAY", "r02/trainer:600000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A failed assertion must not leave bat asleep or the trainer running.
    let mut cleanup = Cleanup {
        pid: Some(child.id()),
        group: None,
    };
    wait_for_file(&t.root.join("trainer.pid"), 120, &mut child);
    let pgid = trainer_pgid(&t);
    cleanup.group = Some(pgid);
    let lock_path = t.ledger.join(".bat/run.lock");
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&lock_path).unwrap()).unwrap();
    // Inside the window: the lock does not name the trainer's group.
    assert!(lock["child_pgid"].is_null(), "{lock}");
    sigkill(&mut child);
    // Reaped: its pid may be reused, so it is no longer ours to kill.
    cleanup.pid = None;
    assert!(!group_members(pgid).is_empty(), "the orphan runs");

    // The orphan may not be run over: --resume refuses and names it.
    std::fs::remove_file(t.root.join("hang")).unwrap();
    let out = t.run(&["run".into(), "--resume".into()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("run.lock"), "{err}");
    // The trainer's group, found by the token, with its pids (the trainer
    // shell and its sleep).
    let head = format!("process group {pgid} (pid ");
    let pids: Vec<u32> = err
        .split_once(&head)
        .and_then(|(_, rest)| rest.split_once(':'))
        .map(|(list, _)| list.split(", ").filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default();
    assert!(pids.contains(&pgid) && pids.len() >= 2, "{err}");
    assert!(err.contains("not yet recorded in the lock"), "{err}");
    assert!(err.contains(&format!("kill -TERM -{pgid}")), "{err}");
    assert!(!group_members(pgid).is_empty(), "the orphan was left alone");
    assert_eq!(logged_rounds(&t.ledger).len(), 1);

    // Once it is gone the lock is stale and taken over.
    kill_group_and_wait(pgid);
    cleanup.group = None;
    let out = ok(t.run(&["run".into(), "--resume".into()]));
    let err = stderr(&out);
    assert!(err.contains("took over the stale run lock"), "{err}");
    assert_eq!(logged_rounds(&t.ledger).len(), 2);
    assert!(!lock_path.exists());
    fsck_ok(&t.ledger);
}

#[test]
fn break_lock_takes_over_a_live_lock_with_a_warning() {
    let t = Toy::new();
    // A lock naming this test process, which certainly lives.
    let lock = serde_json::json!({
        "pid": std::process::id(),
        "command": "bat run --pretend",
        "started_unix": 1,
    });
    std::fs::write(
        t.ledger.join(".bat/run.lock"),
        serde_json::to_vec(&lock).unwrap(),
    )
    .unwrap();
    let args = t.run_args(&t.trainer, &t.evaluator, 1);
    let out = t.run(&args);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("bat run --pretend"),
        "{}",
        stderr(&out)
    );
    let mut args = args;
    args.push("--break-lock".into());
    let out = ok(t.run(&args));
    assert!(
        stderr(&out).contains("broke the run lock"),
        "{}",
        stderr(&out)
    );
    assert_eq!(logged_rounds(&t.ledger).len(), 1);
}

#[test]
fn sigint_stops_a_cooperative_trainer_without_waiting_for_the_grace_period() {
    let t = Toy::new();
    // The toy trainer sleeps in r02 and dies of SIGINT's default action.
    let root = t.root.display();
    let trainer = t.shell_trainer(&format!(
        "if [ \"$6\" = r02 ]; then\n\
         echo $$ > '{root}/trainer.pid.tmp' && mv '{root}/trainer.pid.tmp' '{root}/trainer.pid'\n\
         exec \"$TOY\" \"$@\" --sleep-on r02:1000\n\
         fi"
    ));
    let mut args = t.run_args(&trainer, &t.evaluator, 2);
    args.extend(["--grace-period".into(), "60".into()]);
    let mut child = spawn_run(&t, &args);
    wait_for_file(&t.root.join("trainer.pid"), 120, &mut child);
    let pgid = trainer_pgid(&t);
    let sent = Instant::now();
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "waited the grace period"
    );
    assert!(err.contains("SIGINT forwarded"), "{err}");
    assert!(!err.contains("SIGKILL"), "{err}");
    assert!(group_members(pgid).is_empty());
    assert_eq!(logged_rounds(&t.ledger).len(), 1);
    fsck_ok(&t.ledger);
}

/// SIGKILL `child` (a `bat run`) and reap it; its pid.
fn sigkill(child: &mut std::process::Child) -> u32 {
    let pid = child.id();
    assert!(Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let _ = child.wait();
    pid
}
