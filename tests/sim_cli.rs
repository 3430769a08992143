//! The simulator backend as real child processes of the bat binary:
//! bit-identical outputs at different thread counts, evaluator output that
//! the contract's summary accepts, the two reward modes, and a full
//! `bat run --backend sim` campaign committed to a ledger.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bat_contract::json;
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::summary::build_summary;

use crate::common::bat;
use crate::common::succeeded as ok;

/// A source grid, a 50-batch round view for `target`, and an initial policy.
struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Setup {
    fn new(target: &str) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        ok(bat()
            .args(["source", "build", "--output-dir"])
            .arg(root.join("src"))
            .output()
            .unwrap());
        let source = root.join("src/source.jsonl");
        let sha = json::sha256_hex(&std::fs::read(&source).unwrap());
        ok(bat()
            .args(["round", "build", "--source"])
            .arg(&source)
            .args(["--source-sha256", &sha, "--round-id", "r01"])
            .args(["--target-stage", target, "--batches", "50", "--output-dir"])
            .arg(root.join("data"))
            .output()
            .unwrap());
        ok(bat()
            .args(["sim", "init", "--seed", "5", "--output"])
            .arg(root.join("initial"))
            .output()
            .unwrap());
        Setup { _tmp: tmp, root }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Run `bat sim train` into `<name>/candidate` and `<name>/health.json`.
    fn train(&self, name: &str, mode: &str, threads: &str) -> Output {
        std::fs::create_dir_all(self.p(name)).unwrap();
        bat()
            .args(["sim", "train", "--checkpoint"])
            .arg(self.p("initial"))
            .arg("--dataset")
            .arg(self.p("data/train.jsonl"))
            .arg("--manifest")
            .arg(self.p("data/manifest.json"))
            .arg("--output")
            .arg(self.p(&format!("{name}/candidate")))
            .arg("--health")
            .arg(self.p(&format!("{name}/health.json")))
            .args(["--round-id", "r01", "--target-stage", "S3"])
            .args(["--runtime-tool-format", "hermes", "--reward-mode", mode])
            .args(["--seed", "5", "--threads", threads])
            .output()
            .unwrap()
    }

    /// Run `bat sim evaluate` of `checkpoint` into `out`.
    fn evaluate(&self, checkpoint: &Path, out: &Path, threads: &str) -> Output {
        let request = self.p("eval-request.json");
        if !request.is_file() {
            std::fs::write(
                &request,
                r#"{"artifact_kind":"bat_eval_request","checkpoint_sha256":"x","protocol_id":"bat-sim-heldout-v1","repeats":1,"schema_version":1}"#,
            )
            .unwrap();
        }
        bat()
            .args(["sim", "evaluate", "--checkpoint"])
            .arg(checkpoint)
            .arg("--output")
            .arg(out)
            .arg("--request")
            .arg(&request)
            .args(["--seed", "5", "--threads", threads])
            .output()
            .unwrap()
    }
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn train_and_evaluate_are_bit_identical_at_one_and_two_threads() {
    let s = Setup::new("S3");
    ok(s.train("t1", "stage", "1"));
    ok(s.train("t2", "stage", "2"));
    for f in [
        "candidate/model.safetensors",
        "candidate/config.json",
        "health.json",
    ] {
        assert_eq!(
            read(&s.p(&format!("t1/{f}"))),
            read(&s.p(&format!("t2/{f}"))),
            "{f} differs between thread counts"
        );
    }
    // Training moved the weights.
    assert_ne!(
        read(&s.p("t1/candidate/model.safetensors")),
        read(&s.p("initial/model.safetensors"))
    );
    let cand = s.p("t1/candidate");
    ok(s.evaluate(&cand, &s.p("e1.json"), "1"));
    ok(s.evaluate(&cand, &s.p("e2.json"), "2"));
    assert_eq!(read(&s.p("e1.json")), read(&s.p("e2.json")));

    // The health file: status, compute counted, budget planned.
    let h: serde_json::Value = serde_json::from_slice(&read(&s.p("t1/health.json"))).unwrap();
    assert_eq!(h["status"], "passed");
    assert_eq!(h["reward_mode"], "stage");
    assert_eq!(h["seed"], 5);
    assert_eq!(h["budget"]["steps"], 50);
    assert_eq!(h["budget"]["groups_per_step"], 8);
    assert_eq!(h["budget"]["continuations_per_state"], 4);
    assert_eq!(h["compute"]["steps"], 50);
    assert_eq!(h["compute"]["rollouts"], 50 * 8 * 4);
    assert!(h["compute"]["generated_tokens"].as_u64().unwrap() > 0);
    assert_eq!(h["sim"]["kl_loss_coefficient"], 0.006);
    assert!(h.get("wall_seconds").is_none() && h["compute"].get("wall_seconds").is_none());
}

#[test]
fn evaluator_output_summarizes_and_its_tasks_are_disjoint_from_training_states() {
    let s = Setup::new("S2");
    let raw_path = s.p("raw.json");
    ok(s.evaluate(&s.p("initial"), &raw_path, "0"));
    let raw = read(&raw_path);
    let summary = build_summary(&raw, &"a".repeat(64), &Pack::default_pack(), SumMode::Plain)
        .expect("the contract's summary accepts the simulator's raw evaluation");
    let cells = summary.get("cells").and_then(|c| c.as_array()).unwrap();
    // 7 tracks × 4 held-out tasks × 3 reruns.
    assert_eq!(cells.len(), 7 * 4 * 3);
    let tracks = summary
        .get("track_scores")
        .and_then(|t| t.as_object())
        .unwrap();
    assert_eq!(tracks.len(), 7);
    let mean = |k: &str| match summary.get("means").and_then(|m| m.get(k)) {
        Some(json::Value::Float(f)) => *f,
        other => panic!("means.{k}: {other:?}"),
    };
    assert!(mean("overall") > 0.0 && mean("overall") < 1.0);
    // A mediocre start with uneven stages (so target selection means something).
    let stage = |st: &str| match summary.get("stage_scores").and_then(|m| m.get(st)) {
        Some(json::Value::Float(f)) => *f,
        other => panic!("{st}: {other:?}"),
    };
    let stages: Vec<f64> = ["S1", "S2", "S3", "S4", "S5"]
        .iter()
        .map(|x| stage(x))
        .collect();
    let (lo, hi) = stages
        .iter()
        .fold((1.0f64, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    assert!(hi - lo > 0.1, "{stages:?}");

    // Held-out task ids never occur among training state ids.
    let raw_v: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let task_ids: std::collections::BTreeSet<String> = raw_v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["task_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(task_ids.len(), 28);
    let train = String::from_utf8(read(&s.p("data/train.jsonl"))).unwrap();
    for line in train.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in ["state_id", "source_state_id"] {
            let id = row["extra_info"][key].as_str().unwrap();
            assert!(
                !task_ids.contains(id),
                "{id} is both trained on and held out"
            );
            assert!(!id.starts_with("sim-heldout-"), "{id}");
        }
    }
}

#[test]
fn terminal_and_stage_reward_modes_give_different_valid_candidates() {
    let s = Setup::new("S4");
    ok(s.train("stage", "stage", "0"));
    ok(s.train("terminal", "terminal", "0"));
    let a = read(&s.p("stage/candidate/model.safetensors"));
    let b = read(&s.p("terminal/candidate/model.safetensors"));
    assert_ne!(a, b);
    for mode in ["stage", "terminal"] {
        let h: serde_json::Value =
            serde_json::from_slice(&read(&s.p(&format!("{mode}/health.json")))).unwrap();
        assert_eq!(h["status"], "passed");
        assert_eq!(h["reward_mode"], mode);
        // Both candidates evaluate and summarize.
        let raw = s.p(&format!("{mode}-raw.json"));
        ok(s.evaluate(&s.p(&format!("{mode}/candidate")), &raw, "0"));
        build_summary(
            &read(&raw),
            &"b".repeat(64),
            &Pack::default_pack(),
            SumMode::Plain,
        )
        .expect("summary");
    }
    // The terminal ablation plays whole workflows for every row: more tokens.
    let tokens = |m: &str| {
        let h: serde_json::Value =
            serde_json::from_slice(&read(&s.p(&format!("{m}/health.json")))).unwrap();
        h["compute"]["generated_tokens"].as_u64().unwrap()
    };
    assert!(tokens("terminal") > tokens("stage"));
    // An unknown mode is refused before anything is written.
    let out = s.train("bad", "E2E", "0");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stage or terminal"));
    assert!(!s.p("bad/candidate").exists() && !s.p("bad/health.json").exists());
}

#[test]
fn init_refuses_a_filled_folder_and_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    for d in ["a", "b"] {
        ok(bat()
            .args(["sim", "init", "--seed", "9", "--output"])
            .arg(tmp.path().join(d))
            .output()
            .unwrap());
    }
    for f in ["config.json", "model.safetensors"] {
        assert_eq!(
            read(&tmp.path().join("a").join(f)),
            read(&tmp.path().join("b").join(f))
        );
    }
    let out = bat()
        .args(["sim", "init", "--output"])
        .arg(tmp.path().join("a"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}

fn logged_rounds(ledger: &Path) -> Vec<serde_json::Value> {
    let out = ok(bat()
        .arg("-C")
        .arg(ledger)
        .args(["--json", "log"])
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|c| c["metadata"]["kind"] == "bat_round")
        .cloned()
        .collect()
}

#[test]
fn run_backend_sim_commits_three_rounds_and_the_ledger_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let l = tmp.path().join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    ok(bat().arg("init").arg(&l).output().unwrap());
    let out = ok(bat()
        .arg("-C")
        .arg(&l)
        .args([
            "--json",
            "run",
            "--backend",
            "sim",
            "--rounds",
            "3",
            "--seed",
            "2",
        ])
        .arg("--work-dir")
        .arg(tmp.path().join("work"))
        .output()
        .unwrap());
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["status"], "complete");
    assert_eq!(outcome["history"].as_array().unwrap().len(), 3);

    let rounds = logged_rounds(&l);
    assert_eq!(rounds.len(), 3);
    let ids: Vec<&str> = rounds
        .iter()
        .map(|r| r["metadata"]["round_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r03", "r02", "r01"]);
    for r in &rounds {
        let f = &r["fields"];
        for k in ["scores.overall", "scores.task", "scores.S3"] {
            let v = f[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {f}"));
            assert!((0.0..=1.0).contains(&v), "{k} = {v}");
        }
        let campaign = &r["metadata"]["loop"]["campaign"];
        assert_eq!(campaign["protocol_id"], "bat-sim-heldout-v1");
        assert_eq!(campaign["trainer"][0], "{bat}");
    }
    ok(bat().arg("-C").arg(&l).args(["fsck"]).output().unwrap());
    let log = ok(bat().arg("-C").arg(&l).arg("log").output().unwrap());
    let text = String::from_utf8_lossy(&log.stdout);
    for r in ["r01", "r02", "r03"] {
        assert!(text.contains(r), "{text}");
    }

    // The work dir has the reference layout, with the simulator's health.
    let w = tmp.path().join("work");
    for rel in [
        "baseline-eval/raw-evaluation.json",
        "r01/candidate/model.safetensors",
        "r01/candidate/config.json",
        "r03/candidate-eval/summary.json",
        "r03/gate.json",
        "state.json",
    ] {
        assert!(w.join(rel).is_file(), "{rel}");
    }
    let h: serde_json::Value =
        serde_json::from_slice(&read(&w.join("r02/training-health.json"))).unwrap();
    assert_eq!(h["seed"], 2);
    assert_eq!(h["round_id"], "r02");

    // The same campaign in a second ledger gives the same candidates.
    let l2 = tmp.path().join("ledger2");
    std::fs::create_dir_all(&l2).unwrap();
    ok(bat().arg("init").arg(&l2).output().unwrap());
    let out2 = ok(bat()
        .arg("-C")
        .arg(&l2)
        .args([
            "--json",
            "run",
            "--backend",
            "sim",
            "--rounds",
            "3",
            "--seed",
            "2",
        ])
        .arg("--work-dir")
        .arg(tmp.path().join("work2"))
        .output()
        .unwrap());
    let outcome2: serde_json::Value = serde_json::from_slice(&out2.stdout).unwrap();
    assert_eq!(outcome["history"], outcome2["history"]);
}

#[test]
fn run_backend_sim_refuses_external_backend_flags() {
    let tmp = tempfile::tempdir().unwrap();
    ok(bat().arg("init").arg(tmp.path()).output().unwrap());
    let out = bat()
        .arg("-C")
        .arg(tmp.path())
        .args(["run", "--backend", "sim", "--protocol-id", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--protocol-id cannot be used"));
    let out = bat()
        .arg("-C")
        .arg(tmp.path())
        .args(["run", "--backend", "sim", "--reward-mode", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Commits rounds like `bat run`, but stops the campaign (as a crash would)
/// when `stop_at` finishes, before committing it.
struct StopAt<'l> {
    inner: bat::engine::rounds::LedgerSink<'l>,
    stop_at: &'static str,
}

impl bat::engine::rounds::RoundSink for StopAt<'_> {
    fn round_completed(
        &mut self,
        round: &bat::engine::rounds::CompletedRound<'_>,
    ) -> Result<String, bat::engine::rounds::SinkError> {
        if round.round_id == self.stop_at {
            return Err("interrupted".into());
        }
        self.inner.round_completed(round)
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
fn an_interrupted_simulator_campaign_resumes_to_the_same_rounds() {
    use bat::engine::rounds::{prepare_fresh, run_loop, LedgerSink, RunOptions, Start};
    let tmp = tempfile::tempdir().unwrap();
    let bat_exe = PathBuf::from(env!("CARGO_BIN_EXE_bat"));
    // The reference: an uninterrupted 3-round campaign.
    let full = tmp.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    ok(bat().arg("init").arg(&full).output().unwrap());
    let out = ok(bat()
        .arg("-C")
        .arg(&full)
        .args([
            "--json",
            "run",
            "--backend",
            "sim",
            "--rounds",
            "3",
            "--seed",
            "4",
        ])
        .output()
        .unwrap());
    let reference: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // The same campaign, stopped after r01 is committed.
    let l = tmp.path().join("ledger");
    std::fs::create_dir_all(&l).unwrap();
    let mut ledger = bat_ledger::Ledger::init(&l).unwrap();
    let mut spec = bat::sim::SimCampaign::new(
        l.join(".bat/runs/interrupted/sim-setup"),
        l.join(".bat/runs/interrupted/work"),
        bat_exe,
    );
    spec.rounds = 3;
    spec.seed = 4;
    let campaign = prepare_fresh(&bat::sim::prepare_campaign(&spec).unwrap()).unwrap();
    let pack = Pack::default_pack();
    let options = bat::round::CommitRoundOptions {
        pack: pack.clone(),
        command_templates: Some(bat::round::CommandTemplates {
            trainer: campaign.trainer.clone(),
            evaluator: campaign.evaluator.clone(),
        }),
        ..Default::default()
    };
    let mut sink = StopAt {
        inner: LedgerSink {
            ledger: &mut ledger,
            options,
            ctx: bat::Ctx::quiet(),
        },
        stop_at: "r02",
    };
    let err = run_loop(
        &campaign,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: None,
            run_id: "interrupted",
            prune_round_dirs: false,
        },
        &mut Quiet,
        &mut sink,
    )
    .unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    drop(sink);
    drop(ledger);
    assert_eq!(logged_rounds(&l).len(), 1);

    // `bat run --resume` redoes r02 and runs r03 with the bat binary.
    let out = ok(bat()
        .arg("-C")
        .arg(&l)
        .args(["--json", "run", "--resume"])
        .output()
        .unwrap());
    let resumed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resumed["history"], reference["history"]);
    assert_eq!(logged_rounds(&l).len(), 3);
    ok(bat().arg("-C").arg(&l).arg("fsck").output().unwrap());
}

/// Whether process `pid` is gone (or a zombie waiting for its new parent).
fn process_ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

#[test]
fn an_orphaned_simulator_trainer_ends_with_its_parent() {
    let s = Setup::new("S3");
    std::fs::create_dir_all(s.p("orphan")).unwrap();
    // The dataset is a FIFO nobody writes to: the trainer blocks reading it,
    // as a long training step would, for as long as it lives.
    let fifo = s.p("orphan/train.fifo");
    ok(Command::new("mkfifo").arg(&fifo).output().unwrap());
    // A shell stands in for `bat run`: it starts the trainer and is then
    // killed with SIGKILL, so it cannot pass anything on to its child.
    let script = r#""$0" sim train --checkpoint "$1" --dataset "$2" --manifest "$3" \
        --output "$4" --health "$5" --round-id r01 --target-stage S3 \
        --runtime-tool-format hermes --reward-mode stage --seed 5 --threads 1 &
        echo $!; wait"#;
    let mut parent = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_bat"))
        .arg(s.p("initial"))
        .arg(&fifo)
        .arg(s.p("data/manifest.json"))
        .arg(s.p("orphan/candidate"))
        .arg(s.p("orphan/health.json"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let trainer: u32 = line.trim().parse().expect("the trainer's pid");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        !process_ended(trainer),
        "the trainer did not wait on its dataset"
    );
    parent.kill().unwrap();
    parent.wait().unwrap();
    let start = std::time::Instant::now();
    while !process_ended(trainer) {
        if start.elapsed() > std::time::Duration::from_secs(10) {
            // Do not leave it behind: it holds the test harness's output.
            let _ = Command::new("kill")
                .args(["-KILL", &trainer.to_string()])
                .status();
            panic!("the orphaned trainer {trainer} still ran 10 s after its parent died");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // It ended without writing anything.
    assert!(!s.p("orphan/health.json").exists());
    assert!(!s.p("orphan/candidate").exists());
}
