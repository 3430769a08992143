//! Delta-storage benchmark: in one run, with the tools interleaved and
//! every measurement repeated, store a round series (DIR/r00..) with
//! `tar -cf - rXX | zstd -1 -T0` per round and with `bat` (library commits,
//! tensor-aware delta storage), then restore round r05 and the last
//! (deepest) round from both, warm and (as root) cold. bat restores in a
//! child process of this example, as `bat checkout` would, which also
//! reports its peak RSS. Prints medians with their spread (min–max).
//!
//! Usage: cargo run --release --example bench_delta -- SERIES_DIR WORK_DIR [MAX_DEPTH]
//!
//! Environment: `BAT_BENCH_REPEAT=N` repetitions (default 5);
//! `BAT_BENCH_COLD=0` skips the cold restores (run only as root: they empty
//! the page cache); `BAT_BENCH_ZSTD_LINKS=1` adds a tool "bat (zstd
//! links)": the same build writing sparse deltas as zstd frames instead of
//! jointly coded (FORMAT.md §12.3 against §12.3.1, the default), for a
//! side-by-side comparison in the same run;
//! `BAT_BENCH_HIGH_EXCEPTIONS=1` adds "bat (high exceptions)": the same
//! build storing the high plane of sparse 16-bit deltas as its exceptions
//! (FORMAT.md §12.3.2, off by default);
//! `BAT_BENCH_DECODED_BASES=0` leaves out "bat (bases decoded)", an
//! ingest of the same rounds that decodes every delta base from its chain
//! instead of reading it from the previous round's file
//! (`WriteConfig::reuse_base_files = false`: what a commit does when that
//! file is gone or changed);
//! `BAT_BENCH_GC=0` leaves out "bat after gc" (a copy of the "bat"
//! ledger after `gc`, which re-roots delta chains at their middle; its
//! ingest figures are the commits plus the gc; with the zstd links tool,
//! the same for its ledger) and the restores of r00;
//! `BAT_BENCH_KEEP=1` keeps WORK_DIR.
//!
//! Restores include `sync`; "decode only" is the same work to /dev/null.
//! Next to wall seconds it prints CPU seconds (user + system, from
//! `/proc`, of every process and thread of a tool, without the `sync`):
//! on a shared machine wall-time ratios mostly measure the load, CPU
//! ratios the work.

#[path = "support/series.rs"]
mod series;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::{CommitId, CommitRequest, Ledger, NoProgress};
use series::{children_cpu, clock_ticks, load, self_cpu, series_rounds};

fn sync() {
    let _ = Command::new("sync").status();
}

/// Empty the page cache (root only), so a restore reads its stored bytes
/// from disk.
fn drop_caches() {
    let ok = sh("sync && echo 3 > /proc/sys/vm/drop_caches");
    assert!(
        ok,
        "cold restores need root (writes /proc/sys/vm/drop_caches)"
    );
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
/// nowhere. Prints its peak RSS (`VmHWM`, kB).
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
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    println!("{hwm}");
    Ok(())
}

/// Run [`restore_child`] in a child process; its peak RSS in MB.
fn child(args: &[&str]) -> f64 {
    let out = std::env::current_exe()
        .and_then(|exe| Command::new(exe).args(args).output())
        .expect("run the restore child");
    assert!(
        out.status.success(),
        "bat restore failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kb: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0.0);
    kb / 1024.0
}

/// Median, min and max.
#[derive(Clone, Copy)]
struct Spread(f64, f64, f64);

impl Spread {
    fn of(v: &[f64]) -> Spread {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        Spread(v[v.len() / 2], v[0], v[v.len() - 1])
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2} ({:.2}–{:.2})", self.0, self.1, self.2)
    }
}

/// A bat configuration under test.
struct BatTool {
    name: &'static str,
    joint: bool,
    high_exceptions: bool,
    /// `WriteConfig::reuse_base_files`: read delta bases from the previous
    /// round's file (still in the series) instead of decoding them.
    reuse_base_files: bool,
    /// Measured for ingest only (its ledger's content is the "bat" one's).
    ingest_only: bool,
    /// A copy of the ledger of the tool at this index after `gc` (which
    /// re-roots delta chains at their middle), instead of an ingest of its
    /// own.
    gc_of: Option<usize>,
    ledger: Option<PathBuf>,
    commits: Vec<CommitId>,
    ingest: Vec<f64>,
    ingest_cpu: Vec<f64>,
    stored: u64,
}

impl BatTool {
    /// The default encoding, ingested by the benchmark itself.
    fn new(name: &'static str) -> BatTool {
        BatTool {
            name,
            joint: bat_ledger::WriteConfig::default().joint_coding,
            high_exceptions: false,
            reuse_base_files: true,
            ingest_only: false,
            gc_of: None,
            ledger: None,
            commits: vec![],
            ingest: vec![],
            ingest_cpu: vec![],
            stored: 0,
        }
    }
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
    let env_is = |k: &str, v: &str| std::env::var_os(k).is_some_and(|x| x == v);
    let repeat: usize = std::env::var("BAT_BENCH_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let cold = !env_is("BAT_BENCH_COLD", "0");
    let ticks = clock_ticks();
    let series = Path::new(&args[1]).canonicalize()?;
    let work = Path::new(&args[2]);
    let depth: u32 = match args.get(3) {
        Some(d) => d.parse()?,
        None => bat_ledger::WriteConfig::default().delta_max_depth,
    };
    std::fs::create_dir_all(work)?;
    let work = work.canonicalize()?;
    let (rounds, raw) = series_rounds(&series)?;
    println!(
        "series {} ({} rounds, {:.1} MiB raw), max delta depth {depth}, {repeat} repetitions, load at start {}",
        series.display(),
        rounds.len(),
        raw as f64 / 1048576.0,
        load()
    );
    let mut bats = vec![BatTool::new("bat")];
    if !env_is("BAT_BENCH_DECODED_BASES", "0") {
        bats.push(BatTool {
            reuse_base_files: false,
            ingest_only: true,
            ..BatTool::new("bat (bases decoded)")
        });
    }
    if env_is("BAT_BENCH_ZSTD_LINKS", "1") {
        bats.push(BatTool {
            joint: false,
            ..BatTool::new("bat (zstd links)")
        });
    }
    if env_is("BAT_BENCH_HIGH_EXCEPTIONS", "1") {
        bats.push(BatTool {
            high_exceptions: true,
            ..BatTool::new("bat (high exceptions)")
        });
    }
    if !env_is("BAT_BENCH_GC", "0") {
        let zstd_links = bats.iter().position(|b| !b.joint);
        bats.push(BatTool {
            gc_of: Some(0),
            ..BatTool::new("bat after gc")
        });
        if let Some(z) = zstd_links {
            bats.push(BatTool {
                joint: false,
                gc_of: Some(z),
                ..BatTool::new("bat (zstd links) after gc")
            });
        }
    }
    let (mut gc_wall, mut gc_cpu) = (vec![], vec![]);
    // Ingest, the tools alternating; each repetition starts from nothing.
    let tz = work.join("tarzst");
    let (mut tz_ingest, mut tz_ingest_cpu, mut tz_bytes) = (vec![], vec![], 0u64);
    let cancel = AtomicBool::new(false);
    for _ in 0..repeat {
        let _ = std::fs::remove_dir_all(&tz);
        std::fs::create_dir_all(&tz)?;
        sync();
        let (t, c) = (Instant::now(), children_cpu(ticks));
        for r in &rounds {
            let ok = sh(&format!(
                "tar -C '{}' -cf - '{r}' | zstd -q -1 -T0 -o '{}/{r}.tar.zst'",
                series.display(),
                tz.display()
            ));
            assert!(ok, "tar | zstd failed");
        }
        tz_ingest_cpu.push(children_cpu(ticks) - c);
        sync();
        tz_ingest.push(t.elapsed().as_secs_f64());
        tz_bytes = bat_ledger::maint::dir_size(&tz);
        for k in 0..bats.len() {
            let lroot = work.join(format!("ledger{k}"));
            let _ = std::fs::remove_dir_all(&lroot);
            if let Some(of) = bats[k].gc_of {
                let first = &bats[of];
                let src = first.ledger.as_ref().expect("the first tool ingests");
                let src = src.parent().expect("a ledger's .bat is in its root");
                assert!(sh(&format!(
                    "cp -a '{}' '{}'",
                    src.display(),
                    lroot.display()
                )));
                let (commits, ingest, ingest_cpu) = (
                    first.commits.clone(),
                    first.ingest.clone(),
                    first.ingest_cpu.clone(),
                );
                sync();
                let (t, c) = (Instant::now(), self_cpu(ticks));
                let mut ledger =
                    Ledger::open_with(&lroot.join(".bat"), bat_ledger::LockMode::Exclusive)?;
                // Re-encoded links take the form the tool commits in.
                ledger.config.joint_coding = bats[k].joint;
                ledger.gc(&NoProgress, &cancel)?;
                let cpu = self_cpu(ticks) - c;
                sync();
                let wall = t.elapsed().as_secs_f64();
                gc_wall.push(wall);
                gc_cpu.push(cpu);
                let b = &mut bats[k];
                b.commits = commits;
                // What the ledger cost to make: the commits and the gc.
                b.ingest.push(ingest.last().copied().unwrap_or(0.0) + wall);
                b.ingest_cpu
                    .push(ingest_cpu.last().copied().unwrap_or(0.0) + cpu);
                b.stored = ledger.stats()?.pack_bytes;
                b.ledger = Some(ledger.dir().to_path_buf());
                continue;
            }
            let b = &mut bats[k];
            let mut ledger = Ledger::init(&lroot)?;
            ledger.config.delta_max_depth = depth;
            ledger.config.joint_coding = b.joint;
            ledger.config.high_exceptions = b.high_exceptions;
            ledger.config.reuse_base_files = b.reuse_base_files;
            sync();
            let (t, c) = (Instant::now(), self_cpu(ticks));
            b.commits.clear();
            for r in &rounds {
                let out = ledger.commit_dir(
                    &series.join(r),
                    &CommitRequest::new(r.clone()),
                    &NoProgress,
                    &cancel,
                )?;
                b.commits.push(out.commit);
            }
            b.ingest_cpu.push(self_cpu(ticks) - c);
            sync();
            b.ingest.push(t.elapsed().as_secs_f64());
            b.stored = ledger.stats()?.pack_bytes;
            b.ledger = Some(ledger.dir().to_path_buf());
        }
    }
    println!("load after ingest {}", load());
    if !gc_wall.is_empty() {
        println!(
            "gc of the ingested ledger (re-roots its delta chains): {} s, CPU {} s",
            Spread::of(&gc_wall),
            Spread::of(&gc_cpu)
        );
    }
    println!("\n| tool | ingest s | ingest ratio tar+zstd ÷ tool | ingest CPU s | CPU ratio tar+zstd ÷ tool | stored MiB | stored/raw |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| tar + zstd -1 -T0 | {} | 1 | {} | 1 | {:.1} | {:.3} |",
        Spread::of(&tz_ingest),
        Spread::of(&tz_ingest_cpu),
        tz_bytes as f64 / 1048576.0,
        tz_bytes as f64 / raw as f64
    );
    for b in &bats {
        let ratios: Vec<f64> = tz_ingest
            .iter()
            .zip(&b.ingest)
            .map(|(t, x)| t / x)
            .collect();
        let cpu_ratios: Vec<f64> = tz_ingest_cpu
            .iter()
            .zip(&b.ingest_cpu)
            .map(|(t, x)| t / x)
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {:.1} | {:.3} |",
            b.name,
            Spread::of(&b.ingest),
            Spread::of(&ratios),
            Spread::of(&b.ingest_cpu),
            Spread::of(&cpu_ratios),
            b.stored as f64 / 1048576.0,
            b.stored as f64 / raw as f64
        );
    }
    // Restores: r05 (the figure), the last round (the deepest as
    // committed) and the first (the deepest after gc's re-rooting).
    let idx = rounds
        .iter()
        .position(|r| r == "r05")
        .unwrap_or(rounds.len() / 2);
    println!("\nrestore: bat ÷ `zstd -d | tar -x` (each with sync); decode only: to /dev/null; ratios per repetition, median (min–max); seconds are medians; CPU = user + system seconds of all the tool's processes and threads (without the sync)");
    println!("| round | cache | tool | restore s | restore ratio | decode s | decode ratio | CPU s restore / decode | CPU ratio restore | CPU ratio decode | peak RSS MB (restore / decode) | identical |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let modes: &[bool] = if cold { &[false, true] } else { &[false] };
    let mut which = vec![idx, rounds.len() - 1];
    if !env_is("BAT_BENCH_GC", "0") {
        which.push(0);
    }
    which.dedup();
    for i in which {
        let r = &rounds[i];
        for &is_cold in modes {
            let maybe_cold = || {
                if is_cold {
                    drop_caches();
                }
            };
            let (mut tz_r, mut tz_d, mut tz_rc, mut tz_dc) = (vec![], vec![], vec![], vec![]);
            // Per tool: restore s, decode s, restore RSS, decode RSS,
            // restore CPU s, decode CPU s.
            let mut per: Vec<[Vec<f64>; 6]> = bats.iter().map(|_| Default::default()).collect();
            let mut same = true;
            for _ in 0..repeat {
                let out_tz = work.join(format!("restore-tz-{r}"));
                let _ = std::fs::remove_dir_all(&out_tz);
                std::fs::create_dir_all(&out_tz)?;
                sync();
                maybe_cold();
                let (t, c) = (Instant::now(), children_cpu(ticks));
                assert!(sh(&format!(
                    "zstd -q -d -c '{}/{r}.tar.zst' | tar -C '{}' -xf -",
                    tz.display(),
                    out_tz.display()
                )));
                tz_rc.push(children_cpu(ticks) - c);
                sync();
                tz_r.push(t.elapsed().as_secs_f64());
                for (b, m) in bats.iter().zip(per.iter_mut()).filter(|x| !x.0.ingest_only) {
                    let out_bat = work.join(format!("restore-bat-{r}"));
                    let _ = std::fs::remove_dir_all(&out_bat);
                    sync();
                    maybe_cold();
                    let (ldir, cid, out) = (
                        b.ledger.as_ref().expect("ingested").display().to_string(),
                        b.commits[i].to_string(),
                        out_bat.display().to_string(),
                    );
                    let (t, c) = (Instant::now(), children_cpu(ticks));
                    let rss = child(&["--checkout", &ldir, &cid, &out]);
                    m[4].push(children_cpu(ticks) - c);
                    sync();
                    m[0].push(t.elapsed().as_secs_f64());
                    m[2].push(rss);
                    same &= sh(&format!(
                        "cmp -s '{}/{r}/model.safetensors' '{}/model.safetensors'",
                        out_tz.display(),
                        out_bat.display()
                    ));
                }
                maybe_cold();
                let (t, c) = (Instant::now(), children_cpu(ticks));
                assert!(sh(&format!(
                    "zstd -q -d -c '{}/{r}.tar.zst' > /dev/null",
                    tz.display()
                )));
                tz_d.push(t.elapsed().as_secs_f64());
                tz_dc.push(children_cpu(ticks) - c);
                for (b, m) in bats.iter().zip(per.iter_mut()).filter(|x| !x.0.ingest_only) {
                    maybe_cold();
                    let (ldir, cid) = (
                        b.ledger.as_ref().expect("ingested").display().to_string(),
                        b.commits[i].to_string(),
                    );
                    let (t, c) = (Instant::now(), children_cpu(ticks));
                    let rss = child(&["--decode", &ldir, &cid]);
                    m[1].push(t.elapsed().as_secs_f64());
                    m[5].push(children_cpu(ticks) - c);
                    m[3].push(rss);
                }
            }
            let cache = if is_cold { "cold" } else { "warm" };
            println!(
                "| {r} | {cache} | zstd -d | {:.2} | 1 | {:.2} | 1 | {:.2} / {:.2} | 1 | 1 | | |",
                Spread::of(&tz_r).0,
                Spread::of(&tz_d).0,
                Spread::of(&tz_rc).0,
                Spread::of(&tz_dc).0
            );
            for (b, m) in bats.iter().zip(&per).filter(|x| !x.0.ingest_only) {
                let rr: Vec<f64> = m[0].iter().zip(&tz_r).map(|(x, t)| x / t).collect();
                let dr: Vec<f64> = m[1].iter().zip(&tz_d).map(|(x, t)| x / t).collect();
                let rc: Vec<f64> = m[4].iter().zip(&tz_rc).map(|(x, t)| x / t).collect();
                let dc: Vec<f64> = m[5].iter().zip(&tz_dc).map(|(x, t)| x / t).collect();
                println!(
                    "| {r} | {cache} | {} | {:.2} | {} | {:.2} | {} | {:.2} / {:.2} | {} | {} | {:.0} / {:.0} | {same} |",
                    b.name,
                    Spread::of(&m[0]).0,
                    Spread::of(&rr),
                    Spread::of(&m[1]).0,
                    Spread::of(&dr),
                    Spread::of(&m[4]).0,
                    Spread::of(&m[5]).0,
                    Spread::of(&rc),
                    Spread::of(&dc),
                    Spread::of(&m[2]).2,
                    Spread::of(&m[3]).2,
                );
            }
        }
    }
    println!("load at end {}", load());
    if std::env::var_os("BAT_BENCH_KEEP").is_some() {
        println!("kept {}", work.display());
        return Ok(());
    }
    std::fs::remove_dir_all(&work)?;
    Ok(())
}
