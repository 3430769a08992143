//! Simulator measurements: campaigns of the simulator backend run through
//! the real loop (child processes of the release `bat` binary), printed as
//! tables. Used to pick the simulator learning rate and to report what the
//! runs show (docs/simulator.md).
//!
//! `cargo build --release && cargo run --release --example bench_sim [ROUNDS]`

use std::path::{Path, PathBuf};
use std::time::Instant;

use bat::engine::child::Stream;
use bat::engine::rounds::{
    prepare_fresh, run_loop, CompletedRound, LoopEvent, Observer, RoundSink, RunOptions, Start,
};
use bat::sim::{self, SimCampaign};
use bat_contract::pack::Pack;
use bat_contract::vocabulary::RewardMode;

struct Quiet;
impl Observer for Quiet {
    fn event(&mut self, _: &LoopEvent<'_>) {}
}
impl bat::engine::child::OutputSink for Quiet {
    fn output(&mut self, _: &str, _: Stream, _: &[u8]) {}
}

struct Keep;
impl RoundSink for Keep {
    fn round_completed(
        &mut self,
        _: &CompletedRound<'_>,
    ) -> Result<String, bat::engine::rounds::SinkError> {
        Ok(String::new())
    }
}

fn bat_exe() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    let bat = dir.join("bat");
    assert!(
        bat.is_file(),
        "build the bat binary first: {}",
        bat.display()
    );
    bat
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json")
}

struct Outcome {
    seconds: f64,
    trajectory: Vec<f64>,
    baseline: f64,
    last: f64,
    promoted: usize,
    stages: Vec<f64>,
}

fn campaign(mode: RewardMode, lr: f64, seed: u64, rounds: i64) -> Outcome {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut spec = SimCampaign::new(tmp.path().join("setup"), tmp.path().join("work"), bat_exe());
    spec.reward_mode = mode;
    spec.learning_rate = lr;
    spec.seed = seed;
    spec.rounds = rounds;
    let start = Instant::now();
    let c = prepare_fresh(&sim::prepare_campaign(&spec).expect("setup")).expect("fresh");
    let pack = Pack::default_pack();
    let out = run_loop(
        &c,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: None,
            run_id: "bench",
            prune_round_dirs: false,
        },
        &mut Quiet,
        &mut Keep,
    )
    .expect("campaign");
    let seconds = start.elapsed().as_secs_f64();
    let state = json(&c.work_dir.join("state.json"));
    let _ = out;
    let history = state["history"].as_array().expect("history");
    let promoted = history
        .iter()
        .filter(|h| h["gate_status"] == "promote")
        .count();
    let baseline = json(&c.work_dir.join("baseline-eval/summary.json"));
    // The current (last promoted) checkpoint's summary.
    let last_promoted = history
        .iter()
        .rev()
        .find(|h| h["gate_status"] == "promote")
        .and_then(|h| h["round_id"].as_str().map(str::to_string));
    let current = match last_promoted {
        Some(r) => json(&c.work_dir.join(r).join("candidate-eval/summary.json")),
        None => baseline.clone(),
    };
    let stages = ["S1", "S2", "S3", "S4", "S5"]
        .iter()
        .map(|s| current["stage_scores"][s].as_f64().unwrap_or(f64::NAN))
        .collect();
    // Overall of the checkpoint each round ends with (held rounds keep the
    // previous one).
    let mut trajectory = Vec::new();
    let mut now = baseline["means"]["overall"].as_f64().unwrap_or(f64::NAN);
    for h in history {
        if h["gate_status"] == "promote" {
            let r = h["round_id"].as_str().unwrap_or("");
            now = json(&c.work_dir.join(r).join("candidate-eval/summary.json"))["means"]["overall"]
                .as_f64()
                .unwrap_or(f64::NAN);
        }
        trajectory.push(now);
    }
    Outcome {
        seconds,
        trajectory,
        baseline: baseline["means"]["overall"].as_f64().unwrap_or(f64::NAN),
        last: current["means"]["overall"].as_f64().unwrap_or(f64::NAN),
        promoted,
        stages,
    }
}

fn main() {
    let rounds: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    println!(
        "simulator campaigns, {rounds} rounds, {} batches/round, through the loop (no ledger)",
        sim::DEFAULT_BATCHES
    );
    println!(
        "{:<9} {:>5} {:>4} {:>8} {:>9} {:>9} {:>8}  final S1..S5",
        "mode", "lr", "seed", "wall s", "baseline", "final", "promoted"
    );
    let mut rows = Vec::new();
    for lr in [0.125, 0.25, 0.5, 1.0, 2.0] {
        rows.push((RewardMode::Stage, lr, 0));
    }
    for seed in [0, 1, 2] {
        for mode in [RewardMode::Stage, RewardMode::Terminal] {
            rows.push((mode, sim::policy::DEFAULT_LEARNING_RATE, seed));
        }
    }
    let mut trajectories = Vec::new();
    for (mode, lr, seed) in rows {
        let o = campaign(mode, lr, seed, rounds);
        if lr == sim::policy::DEFAULT_LEARNING_RATE
            && !trajectories
                .iter()
                .any(|(m, s, _, _)| *m == mode && *s == seed)
        {
            trajectories.push((mode, seed, o.baseline, o.trajectory.clone()));
        }
        let stages: Vec<String> = o.stages.iter().map(|s| format!("{s:.3}")).collect();
        println!(
            "{:<9} {:>5} {:>4} {:>8.2} {:>9.4} {:>9.4} {:>5}/{:<2}  {}",
            mode.as_str(),
            lr,
            seed,
            o.seconds,
            o.baseline,
            o.last,
            o.promoted,
            rounds,
            stages.join(" ")
        );
    }
    println!();
    println!("overall after each round (default learning rate)");
    for (mode, seed, baseline, t) in trajectories {
        let cols: Vec<String> = t.iter().map(|v| format!("{v:.3}")).collect();
        println!(
            "{:<9} seed {seed}: {baseline:.3} | {}",
            mode.as_str(),
            cols.join(" ")
        );
    }
}
