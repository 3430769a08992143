//! Time of `bat compare`'s statistics: 4 arms × 5 seeds × 10 rounds × 84
//! cells × 10,000 resamples on generated, ledger-free inputs through the
//! same library function the verb uses ([`compare_inputs`]), then one run
//! on a real ledger ([`compare_arms`]: reading the cells included).
//! Prints min / median / max over the repetitions, of wall time and of the
//! CPU time the process spent (Linux `/proc/self/schedstat`; on a shared,
//! loaded machine the CPU time is what "on one core" means). Also times
//! the per-arm statistics alone (`bat report`, `export --ci`, `query`,
//! Python) and the audit trend alone (`bat log`). Target (issue 30): under
//! 1 s on one core.
//!
//! `cargo run --release --example compare_bench [REPS] [LEDGER ARM ARM…]`
//! (default 5 repetitions; LEDGER is a ledger's folder; without one, `bat demo` makes one in a temp
//! dir with the release `bat` binary next to this example, and every
//! branch is an arm).

use std::path::{Path, PathBuf};
use std::time::Instant;

use bat::experiment::cells::{Cell, Evaluation};
use bat::experiment::compare::{
    arm_statistics, audit_trends, compare_arms, compare_inputs, ArmInput, CompareRequest,
};
use bat::experiment::stats::{stream_of, Bootstrap, SplitMix64};
use bat::Ctx;

const ARMS: usize = 4;
const SEEDS: usize = 5;
const ROUNDS: usize = 10;
const TRACKS: usize = 3;
const TASKS_PER_TRACK: usize = 14;
const REPEATS: usize = 2; // 3 × 14 × 2 = 84 cells

fn evaluation(rng: &mut SplitMix64, level: f64) -> Evaluation {
    let mut cells = Vec::with_capacity(TRACKS * TASKS_PER_TRACK * REPEATS);
    let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    for t in 0..TRACKS {
        for k in 0..TASKS_PER_TRACK {
            for r in 0..REPEATS {
                let task_score = (level + 0.3 * u() - 0.15).clamp(0.0, 1.0);
                let stages: std::collections::BTreeMap<String, f64> = (1..=5)
                    .map(|s| (format!("S{s}"), (level + 0.4 * u() - 0.2).clamp(0.0, 1.0)))
                    .collect();
                let agentic = stages.values().sum::<f64>() / 5.0;
                cells.push(Cell {
                    track: format!("track{t}"),
                    task: format!("t{t}-{k}"),
                    repeat: r.to_string(),
                    task_score,
                    agentic,
                    overall: 0.5 * task_score + 0.5 * agentic,
                    stages,
                });
            }
        }
    }
    Evaluation { cells }
}

fn generated() -> Vec<ArmInput> {
    let mut rng = SplitMix64::for_resample(42, 0, 0);
    (0..ARMS)
        .map(|a| {
            let members: Vec<String> = (0..SEEDS).map(|s| format!("arm{a}/s{s}")).collect();
            let rounds: Vec<Vec<(String, Evaluation)>> = (0..ROUNDS)
                .map(|k| {
                    let level = 0.3 + 0.02 * k as f64 + 0.01 * a as f64;
                    (0..SEEDS)
                        .map(|_| (format!("r{:02}", k + 1), evaluation(&mut rng, level)))
                        .collect()
                })
                .collect();
            let finals = rounds[ROUNDS - 1].iter().map(|(_, e)| e.clone()).collect();
            ArmInput {
                label: format!("arm{a}"),
                spec: format!("arm{a}/*"),
                final_rounds: vec![Some(format!("r{ROUNDS:02}")); SEEDS],
                members,
                finals,
                rounds,
                audits: vec![Vec::new(); ROUNDS],
            }
        })
        .collect()
}

/// CPU time of this process so far, in seconds (`None` off Linux).
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// Run `f` `reps` times; (wall, cpu) seconds of each run.
fn timed(reps: usize, mut f: impl FnMut()) -> (Vec<f64>, Vec<f64>) {
    let (mut wall, mut cpu) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        let (t, c) = (Instant::now(), cpu_seconds());
        f();
        wall.push(t.elapsed().as_secs_f64());
        cpu.push(match (c, cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        });
    }
    (wall, cpu)
}

/// A checksum of a result's every number (its `Debug` text: each `f64`
/// printed so that it reads back bit for bit), to see that a change to the
/// engine leaves every interval as it was.
fn checksum(x: &impl std::fmt::Debug) -> String {
    format!("{:016x}", stream_of([format!("{x:?}").as_str()]))
}

fn row(name: &str, (mut wall, mut cpu): (Vec<f64>, Vec<f64>)) {
    let (a, b, c) = stats(&mut wall);
    let (d, e, f) = stats(&mut cpu);
    println!("{name:<34} {a:>7.3} {b:>7.3} {c:>7.3}   {d:>7.3} {e:>7.3} {f:>7.3}");
}

fn stats(times: &mut [f64]) -> (f64, f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[0], times[times.len() / 2], times[times.len() - 1])
}

fn bat_exe() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    dir.join("bat")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(5);
    let cfg = Bootstrap::default();
    let ctx = Ctx::quiet();
    let inputs = generated();
    println!("compare: {ARMS} arms × {SEEDS} seeds × {ROUNDS} rounds × {} cells × {} resamples, {reps} repetitions",
        TRACKS * TASKS_PER_TRACK * REPEATS, cfg.resamples);
    println!(
        "{:<34} {:>7} {:>7} {:>7}   {:>7} {:>7} {:>7}",
        "seconds", "wall min", "median", "max", "cpu min", "median", "max"
    );
    let mut sums = Vec::new();
    row(
        "generated: compare",
        timed(reps, || {
            let e = compare_inputs(&inputs, &cfg, &ctx).expect("compare");
            assert_eq!(e.pairs.len(), ARMS * (ARMS - 1) / 2);
            sums.push(("compare", checksum(&e)));
        }),
    );
    row(
        "generated: arm statistics (report)",
        timed(reps, || {
            let e = arm_statistics(&inputs, &cfg, &ctx).expect("statistics");
            assert!(e.pairs.is_empty());
            sums.push(("arm statistics", checksum(&e)));
        }),
    );
    // The same arms with every round audited: what `bat log` resamples.
    let mut rng = SplitMix64::for_resample(43, 0, 0);
    let audited: Vec<ArmInput> = inputs
        .iter()
        .map(|a| {
            let mut a = a.clone();
            a.audits = a
                .rounds
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|(_, e)| {
                            (e.clone(), "audit-v1".to_string(), evaluation(&mut rng, 0.3))
                        })
                        .collect()
                })
                .collect();
            a
        })
        .collect();
    row(
        "generated + audits: audit trend (log)",
        timed(reps, || {
            let t = audit_trends(&audited, &cfg, &ctx).expect("trends");
            assert_eq!(t.len(), ARMS);
            sums.push(("audit trend", checksum(&t)));
        }),
    );
    sums.dedup();
    for (name, sum) in &sums {
        println!("checksum of every number, {name}: {sum}");
    }

    // One real ledger.
    let tmp = tempfile::tempdir().expect("temp dir");
    let (ledger_dir, arms) = if args.len() >= 4 {
        (PathBuf::from(&args[1]), args[2..].to_vec())
    } else {
        let dir = tmp.path().join("demo");
        let bat = bat_exe();
        if !bat.is_file() {
            println!(
                "(no real-ledger run: build the bat binary first, {})",
                bat.display()
            );
            return;
        }
        let st = std::process::Command::new(&bat)
            .arg("demo")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("spawn bat demo");
        assert!(st.success(), "bat demo failed");
        let l = bat_ledger::Ledger::discover(&dir).expect("open the demo ledger");
        let branches = bat::experiment::arms::branch_names(&l).expect("branches");
        (dir, branches)
    };
    let l = bat_ledger::Ledger::discover(&ledger_dir).expect("open the ledger");
    let req = CompareRequest {
        arms: arms.clone(),
        bootstrap: cfg,
        allow: Vec::new(),
    };
    let mut cells = 0;
    let mut sum = String::new();
    let times = timed(reps, || {
        let e = compare_arms(&l, &req, &ctx).expect("compare");
        cells = e.arms.iter().map(|a| a.scores[0].runs).sum::<usize>();
        sum = checksum(&e);
    });
    row(
        &format!("ledger: {} arms, {cells} cells", arms.len()),
        times,
    );
    println!("checksum of every number, ledger: {sum}");
}
