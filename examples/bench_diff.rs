//! `bat diff` of two consecutive rounds: from the statistics stored with
//! the deltas (the default) beside the full decode of both checkpoints
//! (`--decode`), in one run on the same ledger. Prints one row per path:
//! median wall time and CPU seconds over R runs (range in brackets), peak
//! RSS, and the ratio; checks that both paths print the same per-tensor
//! numbers.
//!
//! Usage: cargo run --release --example bench_diff -- WORK_DIR [--mib N] [--8gb] [--reps R]
//!
//! The series is generated into WORK_DIR (wiped first): one bf16
//! safetensors file of N MiB per round (default 1024; `--8gb` gives 7630
//! MiB, the 8.0 GB of a Qwen3-4B round) in 16 tensors, generated a tensor
//! at a time; the second round changes about 13 % of the elements by a
//! code point or two (a fine-tuning step). Both rounds are committed with
//! the `bat` binary beside this example (build it first: `cargo build
//! --release`), then each path runs R times (default 3), alternating.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/series.rs"]
mod series;

const TENSORS: usize = 16;

/// Tensor `t` of round `round` (`per` elements): round 0 from its own seed,
/// round 1 the same with about one element in eight moved.
fn tensor(t: usize, per: usize, round: usize) -> Vec<u16> {
    let mut rng =
        series::Xorshift(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1).wrapping_mul(0x1234_5678_9abc));
    let mut w: Vec<u16> = (0..per)
        .map(|_| {
            let r = rng.next();
            let sign = ((r >> 8) & 1) as u16;
            let exp = 118 + (r >> 16) as u16 % 8;
            (sign << 15) | (exp << 7) | (r & 0x7f) as u16
        })
        .collect();
    if round > 0 {
        for x in w.iter_mut() {
            let r = rng.next();
            if r % 8 == 0 {
                *x = x.wrapping_add(1 + (r >> 32) as u16 % 2);
            }
        }
    }
    w
}

fn write_round(path: &Path, per: usize, round: usize) -> std::io::Result<()> {
    let mut header = String::from("{");
    for t in 0..TENSORS {
        if t > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""layer.{t}.weight":{{"dtype":"BF16","shape":[{per}],"data_offsets":[{},{}]}}"#,
            2 * per * t,
            2 * per * (t + 1)
        ));
    }
    header.push('}');
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    out.write_all(&(header.len() as u64).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    for t in 0..TENSORS {
        let w = tensor(t, per, round);
        for part in w.chunks(1 << 16) {
            let bytes: Vec<u8> = part.iter().flat_map(|x| x.to_le_bytes()).collect();
            out.write_all(&bytes)?;
        }
    }
    out.flush()
}

/// Wall time (s), CPU time (s) and peak RSS (MB) of a running child,
/// polled from `/proc` every 2 ms; its standard output.
fn measure(mut child: Child) -> (f64, f64, f64, String) {
    let start = Instant::now();
    let pid = child.id();
    let mut out = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).map(|_| s)
    });
    let (mut peak_kb, mut cpu_ticks) = (0u64, 0u64);
    loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak_kb = peak_kb.max(kb);
            }
        }
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // Fields after the command's closing parenthesis: utime and
            // stime are the 12th and 13th.
            let f: Vec<&str> = s
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            cpu_ticks = cpu_ticks.max(t(11) + t(12));
        }
        match child.try_wait() {
            Ok(Some(st)) => {
                assert!(st.success(), "bat failed: {st:?}");
                let text = reader.join().expect("reader").expect("stdout");
                // Clock ticks are 100 per second on Linux.
                return (
                    start.elapsed().as_secs_f64(),
                    cpu_ticks as f64 / 100.0,
                    peak_kb as f64 / 1024.0,
                    text,
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => panic!("waiting for bat: {e}"),
        }
    }
}

/// `bat [-C dir] ARGS`.
fn bat(dir: Option<&Path>, args: &[&str]) -> Command {
    let mut c = Command::new(series::bat_binary());
    if let Some(d) = dir {
        c.arg("-C").arg(d);
    }
    c.args(args).env("BAT_AUTHOR", "bench");
    c
}

fn run(c: &mut Command) {
    let st = c.stdout(Stdio::null()).status().expect("spawn bat");
    assert!(st.success(), "bat failed: {c:?}");
}

fn median_range(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(work) = args.first().map(PathBuf::from) else {
        eprintln!("usage: bench_diff WORK_DIR [--mib N] [--8gb] [--reps R]");
        std::process::exit(2);
    };
    let flag = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let mib = if args.iter().any(|a| a == "--8gb") {
        7630
    } else {
        flag("--mib", 1024)
    };
    let reps = flag("--reps", 3).max(1);
    if !series::bat_binary().exists() {
        eprintln!(
            "bench_diff: {} not found; build it first (cargo build --release)",
            series::bat_binary().display()
        );
        std::process::exit(2);
    }
    let _ = std::fs::remove_dir_all(&work);
    let (ledger, data) = (work.join("ledger"), work.join("data"));
    std::fs::create_dir_all(&data)?;
    run(bat(None, &["init"]).arg(&ledger));
    let per = (mib << 20) / 2 / TENSORS;
    for round in 0..2 {
        write_round(&data.join("model.safetensors"), per, round)?;
        let msg = format!("round {round}");
        run(bat(Some(&ledger), &["commit", "--plain", "-m", &msg]).arg(&data));
    }
    std::fs::remove_dir_all(&data)?;
    let diff = |decode: bool| {
        let mut a = vec!["--json", "diff", "HEAD~1", "HEAD", "--section", "files"];
        if decode {
            a.push("--decode");
        }
        let child = bat(Some(&ledger), &a)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn bat");
        measure(child)
    };
    let tensors = |text: &str| -> (serde_json::Value, serde_json::Value) {
        let v: serde_json::Value = serde_json::from_str(text).expect("diff JSON");
        let f = &v["files"]["files"][0];
        (f["tensors"].clone(), f["tensors_from"].clone())
    };
    let (mut fast, mut full) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let (w, c, m, text) = diff(false);
        let (t_fast, from) = tensors(&text);
        assert_eq!(
            from, "deltas",
            "consecutive rounds are read from the deltas"
        );
        fast.push((w, c, m));
        let (w, c, m, text) = diff(true);
        let (t_full, _) = tensors(&text);
        assert_eq!(t_fast, t_full, "both paths give the same numbers");
        full.push((w, c, m));
    }
    println!(
        "bat diff of two consecutive {mib} MiB bf16 rounds ({TENSORS} tensors, ~13 % changed), \
         {reps} runs each, median [min–max] (bat {})",
        series::bat_binary().display()
    );
    println!("| path | wall s | CPU s | peak RSS MB |");
    println!("|---|---|---|---|");
    let row = |name: &str, v: &[(f64, f64, f64)]| {
        let (w, w0, w1) = median_range(v.iter().map(|x| x.0).collect());
        let (c, c0, c1) = median_range(v.iter().map(|x| x.1).collect());
        let (m, _, _) = median_range(v.iter().map(|x| x.2).collect());
        println!("| {name} | {w:.2} [{w0:.2}–{w1:.2}] | {c:.2} [{c0:.2}–{c1:.2}] | {m:.0} |");
        w
    };
    let f = row("full decode (`--decode`)", &full);
    let d = row("from deltas (default)", &fast);
    println!(
        "ratio (full decode / from deltas, median wall): {:.1}×",
        f / d
    );
    Ok(())
}
