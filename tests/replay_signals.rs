//! `bat replay` supervises its children as `bat run` does: the trainer runs
//! in a process group of its own, SIGTERM to bat is forwarded to that group,
//! what ignores it is killed after `--grace-period`, bat exits 143 and the
//! round in progress is not committed. Real processes throughout (a
//! shell-script trainer and its helper process).

use std::process::{Command, Stdio};

use run_support::*;

use crate::common::run as run_support;

/// Kills (one by one, never a group: unsupervised they would share the
/// test's group) the processes a failed assertion would leave behind.
struct Cleanup(Vec<u32>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

fn read_pid(p: &std::path::Path) -> u32 {
    std::fs::read_to_string(p).unwrap().trim().parse().unwrap()
}

/// Field 5 of `/proc/<pid>/stat`: the process group.
fn pgid_of(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[test]
fn sigterm_to_replay_kills_the_trainer_group_and_commits_nothing_partial() {
    let t = Toy::new();
    // Round r02, while `hang` exists: ignore SIGTERM, start a helper in the
    // same group (it inherits the ignored SIGTERM), record both pids, wait.
    let root = t.root.display();
    let trainer = t.shell_trainer(&format!(
        "if [ \"$6\" = r02 ] && [ -e '{root}/hang' ]; then\n\
         trap '' TERM\n\
         sleep 1000 &\n\
         echo $! > '{root}/helper.pid'\n\
         echo $$ > '{root}/trainer.pid.tmp' && mv '{root}/trainer.pid.tmp' '{root}/trainer.pid'\n\
         wait\n\
         exit 7\n\
         fi"
    ));
    ok(t.run(&t.run_args(&trainer, &t.evaluator, 2)));
    assert_eq!(logged_rounds(&t.ledger).len(), 2);

    std::fs::write(t.root.join("hang"), "").unwrap();
    let mut child = bat()
        .arg("-C")
        .arg(&t.ledger)
        .args([
            "replay",
            "r01..r02",
            "--branch",
            "replay/stopped",
            "--grace-period",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&t.root.join("trainer.pid"), 120, &mut child);
    let trainer_pid = read_pid(&t.root.join("trainer.pid"));
    let helper_pid = read_pid(&t.root.join("helper.pid"));
    let mut cleanup = Cleanup(vec![trainer_pid, helper_pid]);
    // The trainer leads a group of its own, and its helper is in it.
    assert_eq!(pgid_of(trainer_pid), Some(trainer_pid), "own process group");
    assert_eq!(pgid_of(helper_pid), Some(trainer_pid));

    // The group ignores SIGTERM: bat waits the grace period, then kills.
    terminate_expecting_grace_kill(child);
    assert!(
        group_members(trainer_pid).is_empty(),
        "processes of the trainer group survived: {:?}",
        group_members(trainer_pid)
    );
    // Gone: their pids may be reused, so they are no longer ours to kill.
    cleanup.0.clear();

    // The replay of r01 was committed before the signal; nothing of r02.
    let replayed = logged_rounds_on(&t.ledger, Some("replay/stopped"));
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0]["round_id"], "r01");
    assert!(replayed[0]["replay_of"].is_string());
    assert_eq!(logged_rounds(&t.ledger).len(), 2, "main branch untouched");
    fsck_ok(&t.ledger);
}
