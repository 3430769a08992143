//! Benchmark: summarise two 700-cell evaluations and gate them, in process
//! and through the `bat` binary, optionally side by side with the reference
//! Python (checked out outside the repository).
//!
//! ```text
//! cargo build --release && cargo run --release --example bench_eval -- [REFERENCE_CHECKOUT]
//! ```
//!
//! The raw evaluations are generated deterministically. When a reference
//! checkout is given, the reference's outputs are also compared byte for
//! byte with bat's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bat_contract::gate::{evaluate_gate, GateModel};
use bat_contract::json::{self, Map, Value};
use bat_contract::numeric::SumMode;
use bat_contract::pack::Pack;
use bat_contract::summary::build_summary;

const TRACKS: [&str; 7] = [
    "classification",
    "detection",
    "enhancement",
    "report",
    "segmentation",
    "synthesis",
    "vqa",
];
const CELLS: usize = 700;
const ROUNDS: usize = 50;

/// A small deterministic generator (splitmix64) so both arms are reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn raw_evaluation(seed: u64, shift: f64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let cells: Vec<Value> = (0..CELLS)
        .map(|i| {
            let mut stages = Map::new();
            for s in ["S1", "S2", "S3", "S4", "S5"] {
                stages.insert(s, Value::Float((rng.unit() * 0.8 + shift).clamp(0.0, 1.0)));
            }
            Value::Object(
                Map::new()
                    .with("valid", true)
                    .with("track", TRACKS[i % TRACKS.len()])
                    .with("task_id", format!("task-{:03}", i / TRACKS.len()))
                    .with("repeat", (i / 350) as i64)
                    .with("task_score", (rng.unit() * 0.8 + shift).clamp(0.0, 1.0))
                    .with("stages", stages),
            )
        })
        .collect();
    let doc = Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("status", "complete")
            .with("cells", cells),
    );
    json::pretty_json_file(&doc).into_bytes()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn run(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let out = cmd.output().expect("command runs");
    let el = t.elapsed();
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    el
}

fn main() {
    let reference = std::env::args().nth(1).map(PathBuf::from);
    let work = std::env::temp_dir().join(format!("bat-bench-eval-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("work dir");
    let pack = Pack::default_pack();
    let model = GateModel::from_pack(&pack).expect("default pack");
    let base_raw = raw_evaluation(1, 0.1);
    let cand_raw = raw_evaluation(2, 0.1);
    let (bp, cp) = (
        work.join("baseline.raw.json"),
        work.join("candidate.raw.json"),
    );
    std::fs::write(&bp, &base_raw).expect("write");
    std::fs::write(&cp, &cand_raw).expect("write");
    let (bck, cck) = (
        json::sha256_hex(b"bench:baseline"),
        json::sha256_hex(b"bench:candidate"),
    );

    // In process: parse + validate + aggregate both arms, then gate.
    let mut t_sum = Vec::new();
    let mut t_gate = Vec::new();
    let mut outputs = None;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let b = build_summary(&base_raw, &bck, &pack, SumMode::Plain).expect("summary");
        let c = build_summary(&cand_raw, &cck, &pack, SumMode::Plain).expect("summary");
        let (bt, ct) = (json::pretty_json_file(&b), json::pretty_json_file(&c));
        t_sum.push(t.elapsed());
        let t = Instant::now();
        let g = evaluate_gate(&b, &c, true, &model).expect("gate");
        let docs = (
            json::pretty_json_file(&g.gate),
            json::pretty_json_file(&g.prescription),
        );
        t_gate.push(t.elapsed());
        outputs = Some((bt, ct, docs));
    }
    let (bt, ct, (gt, pt)) = outputs.expect("ran");
    for (name, text) in [
        ("b.summary.json", &bt),
        ("c.summary.json", &ct),
        ("gate.json", &gt),
        ("prescription.json", &pt),
    ] {
        std::fs::write(work.join(name), text).expect("write");
    }
    let bat_sum = median(t_sum);
    let bat_gate = median(t_gate);

    // The binary, end to end (process start included).
    let exe = std::env::current_exe().expect("exe");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("bat"))
        .filter(|p| p.is_file());
    let mut bin_sum = None;
    let mut bin_gate = None;
    if let Some(bin) = &bin {
        let mut s = Vec::new();
        let mut g = Vec::new();
        for i in 0..10 {
            let out = work.join(format!("bin-{i}.summary.json"));
            s.push(run(Command::new(bin)
                .args(["eval", "summarize", "--raw"])
                .arg(&bp)
                .args(["--checkpoint-sha256", &bck, "--output"])
                .arg(&out)));
            g.push(run(Command::new(bin)
                .arg("gate")
                .arg("--baseline")
                .arg(work.join("b.summary.json"))
                .arg("--candidate")
                .arg(work.join("c.summary.json"))
                .arg("--gate-output")
                .arg(work.join(format!("bin-{i}.gate.json")))
                .arg("--prescription-output")
                .arg(work.join(format!("bin-{i}.prescription.json")))));
        }
        bin_sum = Some(median(s));
        bin_gate = Some(median(g));
    }

    println!("700-cell evaluation: summarize baseline + candidate, then gate (median of runs)");
    println!(
        "{:<38} {:>12} {:>14} {:>9}",
        "step", "bat (ms)", "reference (ms)", "ratio"
    );
    let row = |name: &str, ours: Duration, theirs: Option<f64>| match theirs {
        Some(r) => println!(
            "{name:<38} {:>12.3} {:>14.3} {:>8.1}x",
            ms(ours),
            r,
            r / ms(ours)
        ),
        None => println!("{name:<38} {:>12.3} {:>14} {:>9}", ms(ours), "-", "-"),
    };

    let Some(reference) = reference else {
        row("summarize x2, in process", bat_sum, None);
        row("gate, in process", bat_gate, None);
        if let (Some(s), Some(g)) = (bin_sum, bin_gate) {
            row("summarize x1, process (bat binary)", s, None);
            row("gate, process (bat binary)", g, None);
        }
        println!("(pass a reference checkout path to compare)");
        return;
    };

    // The reference in process: the same work timed inside one interpreter.
    let script = format!(
        r#"
import json, time, statistics, pathlib
from scripts.summarize_bat_core_eval import build_summary
from scripts.check_bat_core_gate import evaluate_gate
bp, cp = pathlib.Path({bp:?}), pathlib.Path({cp:?})
ts, tg = [], []
for _ in range({rounds}):
    t = time.perf_counter()
    b = build_summary(bp, checkpoint_sha256={bck:?}); c = build_summary(cp, checkpoint_sha256={cck:?})
    bt = json.dumps(b, indent=2, sort_keys=True) + "\n"; ct = json.dumps(c, indent=2, sort_keys=True) + "\n"
    ts.append(time.perf_counter() - t)
    t = time.perf_counter()
    g, p = evaluate_gate(b, c, training_healthy=True)
    gt = json.dumps(g, indent=2, sort_keys=True) + "\n"; pt = json.dumps(p, indent=2, sort_keys=True) + "\n"
    tg.append(time.perf_counter() - t)
w = pathlib.Path({work:?})
for n, x in (("ref-b.summary.json", bt), ("ref-c.summary.json", ct), ("ref-gate.json", gt), ("ref-prescription.json", pt)):
    (w / n).write_text(x)
print(json.dumps({{"sum": statistics.median(ts) * 1e3, "gate": statistics.median(tg) * 1e3}}))
"#,
        bp = bp.display().to_string(),
        cp = cp.display().to_string(),
        rounds = ROUNDS / 5,
        bck = bck,
        cck = cck,
        work = work.display().to_string(),
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .current_dir(&reference)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json::parse_bytes(&out.stdout).expect("reference timing JSON");
    let f = |k: &str| match v.get(k) {
        Some(Value::Float(x)) => *x,
        _ => f64::NAN,
    };
    row("summarize x2, in process", bat_sum, Some(f("sum")));
    row("gate, in process", bat_gate, Some(f("gate")));

    // Byte identity of every output.
    for (ours, theirs) in [
        ("b.summary.json", "ref-b.summary.json"),
        ("c.summary.json", "ref-c.summary.json"),
        ("gate.json", "ref-gate.json"),
        ("prescription.json", "ref-prescription.json"),
    ] {
        let same = std::fs::read(work.join(ours)).ok() == std::fs::read(work.join(theirs)).ok();
        println!("  {ours:<20} identical to reference: {same}");
    }

    // Process wall time, interpreter start included.
    if let (Some(bs), Some(bg)) = (bin_sum, bin_gate) {
        let mut s = Vec::new();
        let mut g = Vec::new();
        for i in 0..5 {
            s.push(run(Command::new("python3")
                .args(["-m", "scripts.summarize_bat_core_eval", "--raw"])
                .arg(&bp)
                .args(["--checkpoint-sha256", &bck, "--output"])
                .arg(work.join(format!("ref-bin-{i}.summary.json")))
                .current_dir(&reference)));
            g.push(run(Command::new("python3")
                .args(["-m", "scripts.check_bat_core_gate", "--baseline"])
                .arg(work.join("b.summary.json"))
                .arg("--candidate")
                .arg(work.join("c.summary.json"))
                .arg("--gate-output")
                .arg(work.join(format!("ref-bin-{i}.gate.json")))
                .arg("--prescription-output")
                .arg(work.join(format!("ref-bin-{i}.prescription.json")))
                .current_dir(&reference)));
        }
        row("summarize x1, process (CLI)", bs, Some(ms(median(s))));
        row("gate, process (CLI)", bg, Some(ms(median(g))));
        let same = std::fs::read(work.join("bin-0.summary.json")).ok()
            == std::fs::read(work.join("ref-bin-0.summary.json")).ok();
        println!("  CLI summary identical to reference CLI: {same}");
    }
    let _ = std::fs::remove_dir_all(&work);
}
