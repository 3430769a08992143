//! Ingest benchmark: commit a series of round directories (DIR/r00, r01, ...)
//! into a fresh ledger through the library, and in the same run time `b3sum`
//! (if installed) and `tar -cf - rXX | zstd -1 -T0` over the same files.
//!
//! Usage: cargo run --release --example bench_ingest -- SERIES_DIR [WORK_DIR]
//!
//! Generate the series once with
//! `python3 shared/bench/make_series.py --out SERIES_DIR --lr 2.5e-7`.
//! WORK_DIR (default: a temp dir next to SERIES_DIR) receives the ledger and
//! the tar.zst files; it is deleted at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::{CommitRequest, Ledger, NoProgress};

fn dir_bytes(p: &Path) -> u64 {
    bat_ledger::maint::dir_size(p)
}

fn sync() {
    let _ = Command::new("sync").status();
}

fn sh(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

struct Row {
    tool: String,
    secs: f64,
    cpu: f64,
    stored: Option<u64>,
}

/// (own user+system, waited-for children's user+system) CPU seconds from
/// /proc/self/stat, so the table can show CPU cost next to wall time (the
/// wall time is unreliable on a shared machine; CPU time much less so).
fn cpu_times() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // fields after the ")" of the command name; utime is field 14 overall
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let tick = 100.0; // USER_HZ on Linux
    if f.len() < 15 {
        return (f64::NAN, f64::NAN);
    }
    ((f[11] + f[12]) / tick, (f[13] + f[14]) / tick)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let series = PathBuf::from(
        args.get(1)
            .ok_or("usage: bench_ingest SERIES_DIR [WORK_DIR]")?,
    );
    let mut rounds: Vec<String> = std::fs::read_dir(&series)?
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    rounds.sort();
    if rounds.is_empty() {
        return Err("no round directories in SERIES_DIR".into());
    }
    let work_parent = args
        .get(2)
        .map(PathBuf::from)
        .unwrap_or_else(|| series.parent().unwrap_or(Path::new(".")).to_path_buf());
    std::fs::create_dir_all(&work_parent)?;
    let work = tempfile::Builder::new()
        .prefix("bench-work-")
        .tempdir_in(&work_parent)?;
    let raw: u64 = rounds.iter().map(|r| dir_bytes(&series.join(r))).sum();
    println!(
        "series {} : {} rounds, {} bytes raw ({:.1} MiB)",
        series.display(),
        rounds.len(),
        raw,
        raw as f64 / 1048576.0
    );

    // Warm the page cache so every tool reads from memory (as in ANCHORS.md).
    sh(&format!("cat {}/*/* > /dev/null", series.display()));

    let mut rows = Vec::new();
    let have_b3sum = Command::new("b3sum").arg("--version").output().is_ok();
    if !have_b3sum {
        println!("b3sum not on PATH; skipped (cargo install b3sum)");
    }

    // The machine may be shared, so the tools are interleaved round by round
    // (bat rXX, tar|zstd rXX, b3sum rXX, ...): all see the same background
    // load. Each tool's output is made durable per round: bat fsyncs its pack
    // and catalog itself; the tar.zst file gets `sync FILE` (fsync).
    let ledger_dir = work.path().join("ledger");
    let mut ledger = Ledger::init(&ledger_dir)?;
    let cancel = AtomicBool::new(false);
    let tar_dir = work.path().join("tar");
    std::fs::create_dir_all(&tar_dir)?;
    let (mut bat_secs, mut tar_secs, mut b3_secs) = (0.0, 0.0, 0.0);
    let (mut bat_cpu, mut tar_cpu, mut b3_cpu) = (0.0, 0.0, 0.0);
    println!("| round | bat s | tar+zstd s | b3sum s |");
    println!("|---|---|---|---|");
    for r in &rounds {
        // Warm this round's files before each tool: with the outputs of
        // both tools filling memory, the series may have been evicted, and
        // whichever tool ran second would otherwise read from a warm cache.
        let warm = format!("cat {}/{r}/* > /dev/null", series.display());
        sh(&warm);
        let c0 = cpu_times();
        let t0 = Instant::now();
        ledger.commit_dir(
            &series.join(r),
            &CommitRequest::new(r.clone()),
            &NoProgress,
            &cancel,
        )?;
        let b = t0.elapsed().as_secs_f64();
        let c1 = cpu_times();
        bat_cpu += c1.0 - c0.0;
        let out = tar_dir.join(format!("{r}.tar.zst"));
        let cmd = format!(
            "tar -C {} -cf - {r} | zstd -q -1 -T0 -o {} && sync {}",
            series.display(),
            out.display(),
            out.display()
        );
        sh(&warm);
        let c1 = cpu_times();
        let t0 = Instant::now();
        if !sh(&cmd) {
            return Err(format!("failed: {cmd}").into());
        }
        let tz = t0.elapsed().as_secs_f64();
        let c2 = cpu_times();
        tar_cpu += c2.1 - c1.1;
        let mut h = f64::NAN;
        if have_b3sum {
            let t0 = Instant::now();
            if sh(&format!("b3sum {}/{r}/* > /dev/null", series.display())) {
                h = t0.elapsed().as_secs_f64();
            }
            b3_cpu += cpu_times().1 - c2.1;
        }
        println!("| {r} | {b:.2} | {tz:.2} | {h:.2} |");
        bat_secs += b;
        tar_secs += tz;
        b3_secs += h;
    }
    let stats = ledger.stats()?;
    rows.push(Row {
        tool: "bat commit (library: CDC + BLAKE3 + zstd -1, fsync)".into(),
        secs: bat_secs,
        cpu: bat_cpu,
        stored: Some(stats.stored_bytes),
    });
    rows.push(Row {
        tool: "tar -cf - rXX \\| zstd -1 -T0 (+ fsync)".into(),
        secs: tar_secs,
        cpu: tar_cpu,
        stored: Some(dir_bytes(&tar_dir)),
    });
    if have_b3sum {
        rows.push(Row {
            tool: "b3sum (hash only)".into(),
            secs: b3_secs,
            cpu: b3_cpu,
            stored: None,
        });
    }

    // restore one round (warm), verified by bat itself
    let mid = &rounds[rounds.len() / 2];
    let mid_id = ledger.resolve(&format!("HEAD~{}", rounds.len() - 1 - rounds.len() / 2))?;
    let t = Instant::now();
    ledger.checkout(&mid_id, &work.path().join("restore"), &NoProgress, &cancel)?;
    sync();
    let restore_secs = t.elapsed().as_secs_f64();
    drop(ledger);

    println!();
    println!("| tool | seconds | MB/s | CPU s (user+sys) | stored bytes | ratio to raw |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        let st = r
            .stored
            .map(|s| s.to_string())
            .unwrap_or_else(|| "-".into());
        let ratio = r
            .stored
            .map(|s| format!("{:.3}", s as f64 / raw as f64))
            .unwrap_or_else(|| "-".into());
        println!(
            "| {} | {:.2} | {:.0} | {:.1} | {} | {} |",
            r.tool,
            r.secs,
            raw as f64 / 1e6 / r.secs,
            r.cpu,
            st,
            ratio
        );
    }
    println!();
    println!(
        "bat throughput / tar+zstd throughput = {:.2}x (wall); CPU cost bat / tar+zstd = {:.2}",
        tar_secs / bat_secs,
        bat_cpu / tar_cpu
    );
    println!("bat restore of {mid} (warm, verified, incl. sync): {restore_secs:.2} s");
    Ok(())
}
