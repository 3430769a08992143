//! Delta-storage benchmark: in one run, store a round series (DIR/r00..)
//! with `tar -cf - rXX | zstd -1 -T0` per round and with `bat` (library
//! commits, tensor-aware delta storage), then restore round r05 from both.
//! Prints stored bytes / raw, ingest MB/s and the r05 restore time.
//!
//! Usage: cargo run --release --example bench_delta -- SERIES_DIR WORK_DIR [MAX_DEPTH]
//!
//! Page cache is warm for sources (both tools alike); restores include `sync`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::{CommitRequest, Ledger, NoProgress};

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: bench_delta SERIES_DIR WORK_DIR [MAX_DEPTH]");
        std::process::exit(2);
    }
    let series = Path::new(&args[1]).canonicalize()?;
    let work = Path::new(&args[2]);
    let depth: u32 = args.get(3).map(|d| d.parse()).transpose()?.unwrap_or(4);
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
    let mut restores = Vec::new();
    for i in [idx, rounds.len() - 1] {
        let r = &rounds[i];
        let out_tz = work.join(format!("restore-tz-{r}"));
        std::fs::create_dir_all(&out_tz)?;
        let t = Instant::now();
        assert!(sh(&format!(
            "zstd -q -d -c '{}/{r}.tar.zst' | tar -C '{}' -xf -",
            tz.display(),
            out_tz.display()
        )));
        sync();
        let tz_restore = t.elapsed().as_secs_f64();
        let out_bat = work.join(format!("restore-bat-{r}"));
        std::fs::create_dir_all(&out_bat)?;
        let t = Instant::now();
        let tree = ledger.read_commit(&commits[i])?.tree;
        for f in ledger.walk_files(&tree)? {
            let p = out_bat.join(&f.path);
            let mut w = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(&p)?);
            ledger.read_bytes_to(&f.id, &mut w, &cancel)?;
            use std::io::Write;
            w.flush()?;
        }
        sync();
        let bat_restore = t.elapsed().as_secs_f64();
        let same = sh(&format!(
            "cmp -s '{}/{r}/model.safetensors' '{}/model.safetensors'",
            out_tz.display(),
            out_bat.display()
        ));
        restores.push((r.clone(), tz_restore, bat_restore, same));
    }
    let mb = raw as f64 / 1e6;
    println!(
        "series {} ({} rounds, {:.1} MiB raw), max delta depth {depth}",
        series.display(),
        rounds.len(),
        raw as f64 / 1048576.0
    );
    let (r, tz_restore, bat_restore, same) = restores[0].clone();
    println!("| tool | ingest s | ingest MB/s | stored MiB | stored/raw | restore {r} s |");
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
    for (r, tzr, br, same) in &restores[1..] {
        println!("restore {r} (deepest): zstd -d {tzr:.2} s, bat {br:.2} s, ratio {:.2}; identical: {same}", br / tzr);
    }
    if std::env::var_os("BAT_BENCH_KEEP").is_some() {
        println!("kept {}", work.display());
        return Ok(());
    }
    drop(ledger);
    std::fs::remove_dir_all(&work)?;
    Ok(())
}
