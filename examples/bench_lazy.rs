//! Lazy-checkout memory benchmark: peak RSS of `bat checkout` in a fresh
//! partial clone (`--filter no-checkpoints`, the checkpoint fetched on
//! demand from the origin on disk) for rounds 0, 1, … D links deep in
//! their delta chain, beside a checkout of the same round from the full
//! origin. Prints one row per depth: the peak RSS (`VmHWM`, polled from
//! `/proc` every 2 ms while the child runs) and wall time of each.
//!
//! Usage: cargo run --release --example bench_lazy -- WORK_DIR [--mib N] [--depth D]
//!
//! The series is generated into WORK_DIR (wiped first): one bf16
//! safetensors file of N MiB per round (default 192) in 8 tensors; each
//! round gives about 3 elements in 8 a new mantissa; D + 1 rounds (default
//! D = 3) committed with the `bat` binary beside this example.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/series.rs"]
mod series;

const TENSORS: usize = 8;

fn initial(n: usize, rng: &mut series::Xorshift) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let r = rng.next();
            let sign = ((r >> 8) & 1) as u16;
            let exp = 118 + (r >> 16) as u16 % 8;
            (sign << 15) | (exp << 7) | (r & 0x7f) as u16
        })
        .collect()
}

fn train(w: &mut [u16], rng: &mut series::Xorshift) {
    for x in w.iter_mut() {
        let r = rng.next();
        if r % 8 < 3 {
            *x = (*x & !0x7f) | ((r >> 20) & 0x7f) as u16;
        }
    }
}

fn write_safetensors(path: &Path, w: &[u16]) -> std::io::Result<()> {
    let per = w.len() / TENSORS;
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
    for part in w[..per * TENSORS].chunks(1 << 16) {
        let bytes: Vec<u8> = part.iter().flat_map(|x| x.to_le_bytes()).collect();
        out.write_all(&bytes)?;
    }
    out.flush()
}

/// Peak RSS (MB) and wall time (s) of a running child.
fn measure(mut child: Child) -> (f64, f64) {
    let start = Instant::now();
    let status = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status) {
            if let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak_kb = peak_kb.max(kb);
            }
        }
        match child.try_wait() {
            Ok(Some(st)) => {
                assert!(st.success(), "bat failed: {st:?}");
                return (peak_kb as f64 / 1024.0, start.elapsed().as_secs_f64());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => panic!("waiting for bat: {e}"),
        }
    }
}

/// `bat [-C dir] ARGS` (output to nowhere).
fn bat(dir: Option<&Path>, args: &[&str]) -> Command {
    let mut c = Command::new(series::bat_binary());
    if let Some(d) = dir {
        c.arg("-C").arg(d);
    }
    c.args(args)
        .env("BAT_AUTHOR", "bench")
        .stdout(Stdio::null());
    c
}

fn run(c: &mut Command) {
    let st = c.status().expect("spawn bat");
    assert!(st.success(), "bat failed: {c:?}");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(work) = args.first().map(PathBuf::from) else {
        eprintln!("usage: bench_lazy WORK_DIR [--mib N] [--depth D]");
        std::process::exit(2);
    };
    let flag = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (mib, depth) = (flag("--mib", 192), flag("--depth", 3));
    let _ = std::fs::remove_dir_all(&work);
    let (origin, data) = (work.join("origin"), work.join("data"));
    std::fs::create_dir_all(&data)?;
    run(bat(None, &["init"]).arg(&origin));
    let mut rng = series::Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut w = initial(mib << 19, &mut rng);
    for round in 0..=depth {
        if round > 0 {
            train(&mut w, &mut rng);
        }
        write_safetensors(&data.join("model.safetensors"), &w)?;
        let msg = format!("round {round}");
        run(bat(Some(&origin), &["commit", "--plain", "-m", &msg]).arg(&data));
    }
    drop(w);
    println!(
        "lazy checkout of a {mib} MiB bf16 round, D links deep (bat {})",
        series::bat_binary().display()
    );
    println!(
        "| depth | lazy peak RSS MB | lazy wall s | full-clone checkout peak RSS MB | wall s |"
    );
    println!("|---|---|---|---|---|");
    for d in 0..=depth {
        let rev = format!("HEAD~{}", depth - d);
        let clone = work.join(format!("clone{d}"));
        run(bat(None, &["clone", "--filter", "no-checkpoints"])
            .arg(&origin)
            .arg(&clone));
        let lazy = measure(
            bat(Some(&clone), &["checkout", &rev, "--to"])
                .arg(work.join(format!("lazy{d}")))
                .spawn()?,
        );
        let full = measure(
            bat(Some(&origin), &["checkout", &rev, "--to"])
                .arg(work.join(format!("full{d}")))
                .spawn()?,
        );
        println!(
            "| {d} | {:.0} | {:.2} | {:.0} | {:.2} |",
            lazy.0, lazy.1, full.0, full.1
        );
        for dir in [
            clone,
            work.join(format!("lazy{d}")),
            work.join(format!("full{d}")),
        ] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    Ok(())
}
