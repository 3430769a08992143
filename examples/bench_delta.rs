//! Delta-storage benchmark: in one run, store a round series (DIR/r00..)
//! with `tar -cf - rXX | zstd -1 -T0` per round and with `bat` (library
//! commits, tensor-aware delta storage), then restore round r05 and the last
//! (deepest) round from both; bat restores in a child process of this
//! example, as `bat checkout` would. Prints stored bytes / raw, ingest MB/s
//! and the restore times.
//!
//! Usage: cargo run --release --example bench_delta -- SERIES_DIR WORK_DIR [MAX_DEPTH]
//!
//! Page cache is warm for sources (both tools alike); restores include `sync`
//! and are repeated (median reported), once more to /dev/null (decode only).
//! `BAT_BENCH_COLD=1` (root) empties the page cache before every timed restore.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::{CommitRequest, Ledger, NoProgress};

fn sync() {
    let _ = Command::new("sync").status();
}

/// With `BAT_BENCH_COLD=1` (root only), empty the page cache before a timed
/// restore, so both tools read their stored bytes from disk.
fn maybe_cold(cold: bool) {
    if cold {
        let ok = sh("sync && echo 3 > /proc/sys/vm/drop_caches");
        assert!(
            ok,
            "BAT_BENCH_COLD=1 needs root (writes /proc/sys/vm/drop_caches)"
        );
    }
}

fn sh(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The bat side of a restore, run in a child process like `bat checkout`
/// (a fresh process, as users run it, and out of the memory state the
/// ingest left in this one): `--checkout LEDGER COMMIT OUT` writes the
/// commit's tree into OUT; `--decode LEDGER COMMIT` reads every file to
/// nowhere.
fn restore_child(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let ledger = Ledger::open(Path::new(&args[2]))?;
    let commit = ledger.resolve(&args[3])?;
    let cancel = AtomicBool::new(false);
    if args[1] == "--checkout" {
        ledger.checkout(
            &commit,
            Path::new(&args[4]),
            &bat_ledger::NoProgress,
            &cancel,
        )?;
    } else {
        let tree = ledger.read_commit(&commit)?.tree;
        for f in ledger.walk_files(&tree)? {
            ledger.read_bytes_to(&f.id, &mut std::io::sink(), &cancel)?;
        }
    }
    Ok(())
}

/// Run [`restore_child`] in a child process.
fn child(args: &[&str]) -> bool {
    std::env::current_exe()
        .and_then(|exe| Command::new(exe).args(args).status())
        .map(|s| s.success())
        .unwrap_or(false)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if matches!(
        args.get(1).map(String::as_str),
        Some("--checkout" | "--decode")
    ) {
        return restore_child(&args);
    }
    if args.len() < 3 {
        eprintln!("usage: bench_delta SERIES_DIR WORK_DIR [MAX_DEPTH]");
        std::process::exit(2);
    }
    let series = Path::new(&args[1]).canonicalize()?;
    let work = Path::new(&args[2]);
    let depth: u32 = match args.get(3) {
        Some(d) => d.parse()?,
        None => bat_ledger::WriteConfig::default().delta_max_depth,
    };
    std::fs::create_dir_all(work)?;
    let work = work.canonicalize()?;
    let mut rounds: Vec<String> = std::fs::read_dir(&series)?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    rounds.sort();
    let raw: u64 = rounds
        .iter()
        .map(|r| bat_ledger::maint::dir_size(&series.join(r)))
        .sum();
    // tar + zstd -1
    let tz = work.join("tarzst");
    std::fs::create_dir_all(&tz)?;
    let t = Instant::now();
    for r in &rounds {
        let ok = sh(&format!(
            "tar -C '{}' -cf - '{r}' | zstd -q -1 -T0 -o '{}/{r}.tar.zst'",
            series.display(),
            tz.display()
        ));
        assert!(ok, "tar | zstd failed");
    }
    sync();
    let tz_secs = t.elapsed().as_secs_f64();
    let tz_bytes = bat_ledger::maint::dir_size(&tz);
    // bat
    let lroot = work.join("ledger");
    let mut ledger = Ledger::init(&lroot)?;
    ledger.config.delta_max_depth = depth;
    let cancel = AtomicBool::new(false);
    let t = Instant::now();
    let mut commits = Vec::new();
    for r in &rounds {
        let out = ledger.commit_dir(
            &series.join(r),
            &CommitRequest::new(r.clone()),
            &NoProgress,
            &cancel,
        )?;
        commits.push(out.commit);
    }
    sync();
    let bat_secs = t.elapsed().as_secs_f64();
    let st = ledger.stats()?;
    let bat_bytes = st.pack_bytes;
    // restore r05 (the figure) and the deepest round of the chain
    let idx = rounds
        .iter()
        .position(|r| r == "r05")
        .unwrap_or(rounds.len() / 2);
    // Each restore is run REPEAT times, alternating the two tools, and the
    // median is reported: single runs on a shared VM vary by tens of percent.
    const REPEAT: usize = 5;
    let cold = std::env::var_os("BAT_BENCH_COLD").is_some_and(|v| v == "1");
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut restores = Vec::new();
    for i in [idx, rounds.len() - 1] {
        let r = &rounds[i];
        let (mut tz_runs, mut bat_runs, mut tz_cpu, mut bat_cpu) = (vec![], vec![], vec![], vec![]);
        let mut same = true;
        for _ in 0..REPEAT {
            let out_tz = work.join(format!("restore-tz-{r}"));
            let out_bat = work.join(format!("restore-bat-{r}"));
            for d in [&out_tz, &out_bat] {
                let _ = std::fs::remove_dir_all(d);
                std::fs::create_dir_all(d)?;
            }
            sync();
            maybe_cold(cold);
            let t = Instant::now();
            assert!(sh(&format!(
                "zstd -q -d -c '{}/{r}.tar.zst' | tar -C '{}' -xf -",
                tz.display(),
                out_tz.display()
            )));
            sync();
            tz_runs.push(t.elapsed().as_secs_f64());
            // The library's checkout (what `bat checkout` runs): every byte
            // verified, files written into a temporary directory renamed into place.
            std::fs::remove_dir(&out_bat)?;
            maybe_cold(cold);
            let t = Instant::now();
            let (ldir, cid, out) = (
                ledger.dir().display().to_string(),
                commits[i].to_string(),
                out_bat.display().to_string(),
            );
            assert!(
                child(&["--checkout", &ldir, &cid, &out]),
                "bat checkout failed"
            );
            sync();
            bat_runs.push(t.elapsed().as_secs_f64());
            same &= sh(&format!(
                "cmp -s '{}/{r}/model.safetensors' '{}/model.safetensors'",
                out_tz.display(),
                out_bat.display()
            ));
            // The decoding work alone, without the disk: to /dev/null.
            maybe_cold(cold);
            let t = Instant::now();
            assert!(sh(&format!(
                "zstd -q -d -c '{}/{r}.tar.zst' > /dev/null",
                tz.display()
            )));
            tz_cpu.push(t.elapsed().as_secs_f64());
            maybe_cold(cold);
            let t = Instant::now();
            assert!(child(&["--decode", &ldir, &cid]), "bat decode failed");
            bat_cpu.push(t.elapsed().as_secs_f64());
        }
        restores.push((
            r.clone(),
            median(tz_runs),
            median(bat_runs),
            same,
            median(tz_cpu),
            median(bat_cpu),
        ));
    }
    let mb = raw as f64 / 1e6;
    println!(
        "series {} ({} rounds, {:.1} MiB raw), max delta depth {depth}, restores {}",
        series.display(),
        rounds.len(),
        raw as f64 / 1048576.0,
        if cold {
            "cold (page cache emptied)"
        } else {
            "warm"
        }
    );
    let (r, tz_restore, bat_restore, same, tz_cpu, bat_cpu) = restores[0].clone();
    println!("| tool | ingest s | ingest MB/s | stored MiB | stored/raw | restore {r} s (median of {REPEAT}) |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| tar + zstd -1 -T0 | {tz_secs:.1} | {:.0} | {:.1} | {:.3} | {tz_restore:.2} |",
        mb / tz_secs,
        tz_bytes as f64 / 1048576.0,
        tz_bytes as f64 / raw as f64
    );
    println!(
        "| bat (delta) | {bat_secs:.1} | {:.0} | {:.1} | {:.3} | {bat_restore:.2} |",
        mb / bat_secs,
        bat_bytes as f64 / 1048576.0,
        bat_bytes as f64 / raw as f64
    );
    println!("ingest ratio bat/tar+zstd: {:.2}x; restore ratio bat/zstd -d: {:.2}; delta objects {} ({:.1} MiB logical, {:.1} MiB stored); restored bytes identical: {same}",
        tz_secs / bat_secs, bat_restore / tz_restore, st.delta_objects, st.delta_logical_bytes as f64 / 1048576.0, st.delta_stored_bytes as f64 / 1048576.0);
    println!(
        "decode only (to /dev/null) {r}: zstd -d {tz_cpu:.2} s, bat {bat_cpu:.2} s, ratio {:.2}",
        bat_cpu / tz_cpu
    );
    for (r, tzr, br, same, tzc, bc) in &restores[1..] {
        println!("restore {r} (deepest): zstd -d {tzr:.2} s, bat {br:.2} s, ratio {:.2}; identical: {same}; decode only: zstd -d {tzc:.2} s, bat {bc:.2} s, ratio {:.2}", br / tzr, bc / tzc);
    }
    if std::env::var_os("BAT_BENCH_KEEP").is_some() {
        println!("kept {}", work.display());
        return Ok(());
    }
    drop(ledger);
    std::fs::remove_dir_all(&work)?;
    Ok(())
}
