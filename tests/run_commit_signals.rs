//! Ctrl-C during a round commit of `bat run`: the commit of a large
//! candidate (a few hundred MB of generated safetensors) reports progress
//! through the CLI's renderer and stops at a safe point when SIGINT
//! arrives. Real processes: a shell-script trainer that adds the large file
//! to the toy trainer's candidate, `bat run` spawned and signalled with
//! `kill -INT` while it records round r02.
//!
//! The progress-delay hook (`BAT_TEST_PROGRESS_DELAY_MS`) sleeps in the
//! CLI's progress renderer on every step, so the signal lands inside the
//! commit on any machine speed; it only slows the run when the commit
//! reports to that renderer, which is what the progress check proves.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use run_support::*;

use crate::common::run as run_support;

const MIB: usize = 1 << 20;
/// Size of the generated tensor (bytes).
const BIG: usize = 192 * MIB;

/// The header of a safetensors file with one `U8` tensor of `n` bytes.
fn safetensors_header(n: usize) -> Vec<u8> {
    let json = format!(r#"{{"w":{{"dtype":"U8","shape":[{n}],"data_offsets":[0,{n}]}}}}"#);
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json.as_bytes());
    out
}

/// A trainer template: the toy trainer, then a fresh random
/// `big.safetensors` of [`BIG`] bytes in its candidate (`$3`, the
/// `{output}` argument), different every round so no commit can reuse the
/// previous one's bytes.
fn big_trainer(t: &Toy) -> PathBuf {
    let header = t.root.join("big.header");
    std::fs::write(&header, safetensors_header(BIG)).unwrap();
    let sh = t.root.join("big-trainer.sh");
    let toy = example("toy_trainer");
    let mut f = std::fs::File::create(&sh).unwrap();
    writeln!(f, "'{}' \"$@\" || exit $?", toy.display()).unwrap();
    writeln!(
        f,
        "cat '{}' > \"$3/big.safetensors\" || exit 1",
        header.display()
    )
    .unwrap();
    writeln!(
        f,
        "head -c {BIG} /dev/urandom >> \"$3/big.safetensors\" || exit 1"
    )
    .unwrap();
    let mut argv = vec![serde_json::json!("sh"), serde_json::json!(sh)];
    argv.extend(TOY_TRAINER_ARGS.iter().map(|s| serde_json::json!(s)));
    write_json(
        &t.root.join("big-trainer.json"),
        serde_json::Value::Array(argv),
    )
}

/// Round commits on the ledger's current branch (newest first).
fn round_ids(ledger: &Path) -> Vec<String> {
    logged_rounds(ledger)
        .iter()
        .filter_map(|r| r["round_id"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn sigint_during_a_round_commit_stops_it_and_resume_completes() {
    let t = Toy::new();
    let trainer = big_trainer(&t);
    let args = t.run_args(&trainer, &t.evaluator, 2);
    let mut child = bat()
        .arg("-C")
        .arg(&t.ledger)
        .args(&args)
        .env("BAT_TEST_PROGRESS_DELAY_MS", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr on a thread: the gate line of r02 is printed right before
    // its round is handed to the ledger.
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("r02: gate ") => break,
            Ok(_) => {}
            Err(e) => panic!("no gate line for r02 ({e}); is bat run stuck?"),
        }
    }
    // The commit of 192 MB in 4 MiB pieces at 100 ms per progress step
    // takes seconds.
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        child.try_wait().unwrap().is_none(),
        "bat run finished before the signal: its round commit did not go through the progress renderer"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    let err = reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "stderr:\n{err}");
    assert!(err.contains("interrupted:"), "{err}");
    assert!(
        err.contains("round r02 finished but was not committed"),
        "{err}"
    );
    assert!(err.contains("bat run --resume"), "{err}");
    // Nothing half-recorded: fsck is clean and r02 is not on the branch.
    fsck_ok(&t.ledger);
    assert_eq!(round_ids(&t.ledger), ["r01"]);

    // The resume redoes r02 and records it.
    let out = t.run(&["run".to_string(), "--resume".to_string()]);
    assert!(
        out.status.success(),
        "resume failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(round_ids(&t.ledger), ["r02", "r01"]);
    fsck_ok(&t.ledger);
    // The recorded candidate holds the large file, byte-complete.
    let ls = ok(bat()
        .arg("-C")
        .arg(&t.ledger)
        .args(["cat", "HEAD:candidate/big.safetensors"])
        .output()
        .unwrap());
    assert_eq!(ls.stdout.len(), safetensors_header(BIG).len() + BIG);
}

/// On a terminal, the round commit of a large candidate draws the CLI's
/// progress bar (`recording` with the byte totals of the candidate). The
/// terminal is a pseudo-terminal from `script(1)`; the test is skipped
/// where that tool is missing.
#[test]
fn a_round_commit_shows_progress_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: script(1) is not installed");
        return;
    }
    let t = Toy::new();
    let trainer = big_trainer(&t);
    let mut words = vec![
        crate::common::bat_exe().to_string_lossy().into_owned(),
        "-C".to_string(),
        t.ledger.to_string_lossy().into_owned(),
    ];
    words.extend(t.run_args(&trainer, &t.evaluator, 1));
    let quoted: Vec<String> = words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
        .collect();
    let out = Command::new("script")
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("BAT_TEST_PROGRESS_DELAY_MS", "20")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let transcript = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "bat run failed:\n{transcript}");
    // The only commit of this run with a total in MiB is the round's (the
    // toy's initial checkpoint is a few KiB).
    let bar = transcript
        .split(['\r', '\n'])
        .find(|l| l.contains("recording") && l.contains(" MiB"));
    assert!(
        bar.is_some(),
        "no progress bar of the round commit:\n{transcript}"
    );
    fsck_ok(&t.ledger);
}

/// `bat commit` of a round folder with a large candidate: SIGINT stops the
/// recording before anything is recorded (exit 130, no commit, fsck
/// clean), and the same command run again records the round.
#[test]
fn sigint_during_bat_commit_of_a_round_records_nothing() {
    let t = Toy::new();
    let trainer = big_trainer(&t);
    let work = t.root.join("work");
    let mut args = t.run_args(&trainer, &t.evaluator, 1);
    args.extend([
        "--work-dir".to_string(),
        work.to_string_lossy().into_owned(),
    ]);
    ok(t.run(&args));
    // A second ledger records the campaign's round folder again.
    let other = t.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    ok(bat().arg("init").arg(&other).output().unwrap());
    let round = work.join("r01");
    let commit_args = [
        "-C".to_string(),
        other.to_string_lossy().into_owned(),
        "commit".to_string(),
        round.to_string_lossy().into_owned(),
        "--no-code-repo".to_string(),
    ];
    let mut child = bat()
        .args(&commit_args)
        .env("BAT_TEST_PROGRESS_DELAY_MS", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Validation reads the candidate first; the recording follows.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "bat commit finished before the signal"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "stderr:\n{err}");
    assert!(
        err.contains("stopped before anything was recorded"),
        "{err}"
    );
    assert!(err.contains("to finish, run again: bat "), "{err}");
    fsck_ok(&other);
    // Still no commit: the ledger has no HEAD commit to list.
    let log = bat()
        .arg("-C")
        .arg(&other)
        .args(["--json", "log"])
        .output()
        .unwrap();
    assert!(
        !log.status.success(),
        "an interrupted commit left a commit: {}",
        String::from_utf8_lossy(&log.stdout)
    );
    ok(bat().args(&commit_args).output().unwrap());
    assert_eq!(round_ids(&other), ["r01"]);
    fsck_ok(&other);
}
