//! Shared helpers of the `bat run` process tests: toy campaigns (the
//! `toy_trainer`/`toy_evaluator` examples), trainers wrapped in a shell
//! script, and process-group checks through /proc.

pub use super::loop_support::example;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub use super::bat;

pub use super::write_json;
use super::TestEnv;

/// A toy campaign: ledger, initial model, source grid and templates.
pub struct Toy {
    /// Owns the temp dir `root` (removed when the toy is dropped).
    _env: TestEnv,
    pub root: PathBuf,
    pub ledger: PathBuf,
    pub trainer: PathBuf,
    pub evaluator: PathBuf,
    pub source: PathBuf,
    pub initial: PathBuf,
}

/// The toy trainer's standard template elements after argv[0].
pub const TOY_TRAINER_ARGS: [&str; 7] = [
    "{checkpoint}",
    "{dataset}",
    "{output}",
    "{health}",
    "{runtime_tool_format}",
    "{round_id}",
    "{target_stage}",
];

impl Toy {
    pub fn new() -> Toy {
        let env = TestEnv::new();
        let root = env.root().to_path_buf();
        let ledger = env.init_ledger("ledger").dir().to_path_buf();
        let initial = root.join("initial");
        assert!(Command::new(example("toy_trainer"))
            .arg("--init")
            .arg(&initial)
            .status()
            .unwrap()
            .success());
        let mut t = vec![serde_json::json!(example("toy_trainer"))];
        t.extend(TOY_TRAINER_ARGS.iter().map(|s| serde_json::json!(s)));
        let trainer = write_json(&root.join("trainer.json"), serde_json::Value::Array(t));
        let evaluator = write_json(
            &root.join("evaluator.json"),
            serde_json::json!([
                example("toy_evaluator"),
                "{checkpoint}",
                "{request}",
                "{output}"
            ]),
        );
        // The source grid of the embedded pack.
        let k = bat_contract::pack::Pack::default_pack().contract().unwrap();
        let built = bat_contract::source::build_source(&k).unwrap();
        let source = root.join("source.jsonl");
        std::fs::write(&source, &built.jsonl).unwrap();
        Toy {
            _env: env,
            root,
            ledger,
            trainer,
            evaluator,
            source,
            initial,
        }
    }

    /// A trainer template running `sh SCRIPT` with the toy trainer's
    /// arguments; the script gets the toy trainer's path as `$TOY`.
    pub fn shell_trainer(&self, script: &str) -> PathBuf {
        let sh = self.root.join("trainer.sh");
        std::fs::write(
            &sh,
            format!(
                "TOY='{}'\n{script}\nexec \"$TOY\" \"$@\"\n",
                example("toy_trainer").display()
            ),
        )
        .unwrap();
        let mut t = vec![serde_json::json!("sh"), serde_json::json!(sh)];
        t.extend(TOY_TRAINER_ARGS.iter().map(|s| serde_json::json!(s)));
        write_json(
            &self.root.join("trainer-sh.json"),
            serde_json::Value::Array(t),
        )
    }

    /// `run` arguments of a fresh campaign with these templates.
    pub fn run_args(&self, trainer: &Path, evaluator: &Path, rounds: u32) -> Vec<String> {
        [
            "run",
            "--source",
            &self.source.to_string_lossy(),
            "--initial-checkpoint",
            &self.initial.to_string_lossy(),
            "--trainer",
            &trainer.to_string_lossy(),
            "--evaluator",
            &evaluator.to_string_lossy(),
            "--protocol-id",
            "toy-protocol",
            "--runtime-tool-format",
            "hermes",
            "--rounds",
            &rounds.to_string(),
            "--batches",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    pub fn run(&self, args: &[String]) -> Output {
        bat()
            .arg("-C")
            .arg(&self.ledger)
            .args(args)
            .output()
            .unwrap()
    }
}

pub fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub use super::stderr;

/// The round commits in `bat log --json` (metadata), newest first.
pub fn logged_rounds(ledger: &Path) -> Vec<serde_json::Value> {
    logged_rounds_on(ledger, None)
}

/// The round metadata of the commits `bat log [REV]` lists.
pub fn logged_rounds_on(ledger: &Path, rev: Option<&str>) -> Vec<serde_json::Value> {
    let out = ok(bat()
        .arg("-C")
        .arg(ledger)
        .args(["--json", "log"])
        .args(rev)
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.get("metadata"))
        .filter(|m| m["kind"] == "bat_round")
        .cloned()
        .collect()
}

pub fn fsck_ok(ledger: &Path) {
    ok(bat().arg("-C").arg(ledger).arg("fsck").output().unwrap());
}

/// `/proc/<pid>/stat` fields from the state on.
fn stat(pid: &str) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The live (not zombie) processes of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let want = pgid.to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            stat(&pid.to_string())
                .is_some_and(|f| f.get(2) == Some(&want) && !matches!(f[0].as_str(), "Z" | "X"))
        })
        .collect()
}

/// Wait for a file to appear (the child writes it), failing after `secs`.
pub fn wait_for_file(p: &Path, secs: u64, child: &mut std::process::Child) {
    let start = Instant::now();
    while !p.is_file()
        || std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .is_empty()
    {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "{} never appeared",
            p.display()
        );
        assert!(child.try_wait().unwrap().is_none(), "bat run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kill a whole process group (test cleanup).
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .status();
}

/// Kill a process group and wait (up to 10 s) until none of it is left.
pub fn kill_group_and_wait(pgid: u32) {
    kill_group(pgid);
    let start = Instant::now();
    while !group_members(pgid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(10), "orphan survived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Send SIGTERM to a supervising `bat` (run or replay) whose child ignores
/// it; expect bat to wait out a grace period of about a second, kill the
/// child's group and exit 143 without committing the round. Its stderr.
pub fn terminate_expecting_grace_kill(child: std::process::Child) -> String {
    let sent = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(err.contains("SIGTERM forwarded"), "{err}");
    assert!(err.contains("SIGKILL after the grace period"), "{err}");
    assert!(err.contains("not committed"), "{err}");
    err
}
