//! Delta chains over a long campaign: what `gc`'s re-rooting (FORMAT.md
//! §9.2) does to storage and to the depth of every round, against the same
//! commits without it, in one run.
//!
//! ```text
//! cargo run --release --example bench_chains -- SERIES_DIR WORK_DIR [GC_EVERY [MAX_DEPTH]]
//! ```
//!
//! SERIES_DIR holds rounds r00, r01, ... (as `make_series.py` writes them;
//! a long series, e.g. `--rounds 40 --layers 1`, shows the effect). Two
//! ledgers get the same commits, one per round, with chains bounded at
//! MAX_DEPTH (default 9, the ledger's default): "commits only" never
//! re-roots (`gc --keep-chains` once at the end, to count only live
//! records); "gc every N" runs `gc` after every N commits (GC_EVERY,
//! default one) and once at the end. Printed per ledger: stored bytes /
//! raw, the number of keyframes among the tensor pieces, the deepest and
//! mean delta depth over all rounds, the time spent in commits and in gc
//! (wall and CPU of this process), and the time to read the first, a
//! middle and the last round (median of 3, decoded to nowhere in this
//! process, warm cache). Ledgers live under WORK_DIR and are removed at
//! the end unless `BAT_BENCH_KEEP=1`.

#[path = "support/series.rs"]
mod series;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::{CommitId, CommitRequest, GcOptions, Ledger, Location, LockMode, NoProgress};
use series::{clock_ticks, load, self_cpu, series_rounds};

/// Delta depth of every tensor piece of every file of `c` (chunks of
/// chunked files; a keyframe is depth 0).
fn depths(l: &Ledger, c: &CommitId) -> Result<Vec<usize>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    let tree = l.read_commit(c)?.tree;
    for f in l.walk_files(&tree)? {
        let Some(Location::Chunked { list }) = l.locate(&f.id)?.map(|r| r.location) else {
            continue;
        };
        for ch in l.read_chunk_list(&list)?.chunks {
            let (mut depth, mut cur) = (0, ch.id);
            while let Some(Location::Delta { base, .. }) = l.locate(&cur)?.map(|r| r.location) {
                depth += 1;
                cur = base;
                if depth > bat_ledger::store::MAX_CHAIN {
                    return Err(format!("the chain of {} loops", ch.id).into());
                }
            }
            out.push(depth);
        }
    }
    Ok(out)
}

/// Median seconds of 3 reads of every file of `c` to nowhere.
fn read_time(l: &Ledger, c: &CommitId) -> Result<f64, Box<dyn std::error::Error>> {
    let cancel = AtomicBool::new(false);
    let tree = l.read_commit(c)?.tree;
    let files = l.walk_files(&tree)?;
    let mut t = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        for f in &files {
            l.read_bytes_to(&f.id, &mut std::io::sink(), &cancel)?;
        }
        t.push(start.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[1])
}

struct Run {
    name: String,
    stored: u64,
    commit_s: (f64, f64),
    gc_s: (f64, f64),
    depths: Vec<Vec<usize>>,
    reads: Vec<(usize, f64)>,
}

fn run(
    series: &Path,
    rounds: &[String],
    root: &Path,
    gc_every: Option<usize>,
    max_depth: u32,
) -> Result<Run, Box<dyn std::error::Error>> {
    let cancel = AtomicBool::new(false);
    let ticks = clock_ticks();
    let _ = std::fs::remove_dir_all(root);
    drop(Ledger::init(root)?);
    let dir = root.join(".bat");
    let mut l = Ledger::open_with(&dir, LockMode::Exclusive)?;
    l.config.delta_max_depth = max_depth;
    let (mut commit_s, mut gc_s) = ((0.0, 0.0), (0.0, 0.0));
    let mut commits = Vec::new();
    let mut gc = |l: &mut Ledger, keep: bool| -> Result<(), Box<dyn std::error::Error>> {
        let (t, c) = (Instant::now(), self_cpu(ticks));
        let opts = GcOptions {
            keep_chains: keep,
            ..Default::default()
        };
        l.gc_with(&opts, &NoProgress, &cancel)?;
        gc_s.0 += t.elapsed().as_secs_f64();
        gc_s.1 += self_cpu(ticks) - c;
        Ok(())
    };
    for (i, r) in rounds.iter().enumerate() {
        let (t, c) = (Instant::now(), self_cpu(ticks));
        let out = l.commit_dir(
            &series.join(r),
            &CommitRequest::new(r.clone()),
            &NoProgress,
            &cancel,
        )?;
        commit_s.0 += t.elapsed().as_secs_f64();
        commit_s.1 += self_cpu(ticks) - c;
        commits.push(out.commit);
        if gc_every.is_some_and(|n| (i + 1) % n == 0) {
            gc(&mut l, false)?;
        }
    }
    gc(&mut l, gc_every.is_none())?;
    let depths = commits
        .iter()
        .map(|c| depths(&l, c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut reads = Vec::new();
    for i in [0, commits.len() / 2, commits.len() - 1] {
        reads.push((i, read_time(&l, &commits[i])?));
    }
    Ok(Run {
        name: gc_every.map_or("commits only".into(), |n| format!("gc every {n}")),
        stored: l.stats()?.pack_bytes,
        commit_s,
        gc_s,
        depths,
        reads,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: bench_chains SERIES_DIR WORK_DIR [GC_EVERY [MAX_DEPTH]]");
        std::process::exit(2);
    }
    let series = Path::new(&args[1]);
    let work = Path::new(&args[2]);
    let every: usize = args.get(3).map_or(Ok(1), |a| a.parse())?;
    let max_depth: u32 = args.get(4).map_or(Ok(9), |a| a.parse())?;
    let (rounds, raw) = series_rounds(series)?;
    println!(
        "series {} ({} rounds, {:.1} MiB raw), max delta depth {max_depth}, load at start {}",
        series.display(),
        rounds.len(),
        raw as f64 / 1048576.0,
        load()
    );
    let runs = [
        run(series, &rounds, &work.join("plain"), None, max_depth)?,
        run(series, &rounds, &work.join("gc"), Some(every), max_depth)?,
    ];
    println!("\n| ledger | stored/raw | keyframes / pieces | deepest | mean depth | commits s (CPU) | gc s (CPU) | read first / middle / last s |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &runs {
        let all: Vec<usize> = r.depths.iter().flatten().copied().collect();
        let keyframes = all.iter().filter(|&&d| d == 0).count();
        let mean = all.iter().sum::<usize>() as f64 / all.len().max(1) as f64;
        let reads: Vec<String> = r
            .reads
            .iter()
            .map(|(i, s)| format!("r{i:02} {s:.2}"))
            .collect();
        println!(
            "| {} | {:.4} | {} / {} | {} | {:.2} | {:.1} ({:.1}) | {:.1} ({:.1}) | {} |",
            r.name,
            r.stored as f64 / raw as f64,
            keyframes,
            all.len(),
            all.iter().max().copied().unwrap_or(0),
            mean,
            r.commit_s.0,
            r.commit_s.1,
            r.gc_s.0,
            r.gc_s.1,
            reads.join(" / ")
        );
    }
    for r in &runs {
        let per_round: Vec<String> = r
            .depths
            .iter()
            .map(|d| d.iter().max().copied().unwrap_or(0).to_string())
            .collect();
        println!(
            "{} deepest piece per round: {}",
            r.name,
            per_round.join(" ")
        );
    }
    println!("load at end {}", load());
    if std::env::var_os("BAT_BENCH_KEEP").is_none() {
        std::fs::remove_dir_all(work)?;
    }
    Ok(())
}
