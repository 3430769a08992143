//! Round commit size and run-directory size against the round number: one
//! simulator campaign through the real loop (child processes of the
//! release `bat` binary) committed to a fresh ledger, with bat's own work
//! dir pruning on, then a table of commit object sizes at rounds 1, 10, 100,
//! 1000 (those that exist) and the disk use of the work dir and the ledger.
//!
//! `cargo build --release && cargo run --release --example bench_round_meta [ROUNDS] [BATCHES]`
//! (defaults: 1000 rounds of 2 batches; the goal of issue 12 is "one round
//! commit object at r1000 within 1.5x of r10").

use std::path::{Path, PathBuf};
use std::time::Instant;

use bat::engine::child::Stream;
use bat::engine::rounds::{
    prepare_fresh, run_loop, LedgerSink, LoopEvent, Observer, RunOptions, Start,
};
use bat::sim::{self, SimCampaign};
use bat_contract::pack::Pack;
use bat_ledger::{CommitId, Kind, Ledger};

struct Quiet;
impl Observer for Quiet {
    fn event(&mut self, _: &LoopEvent<'_>) {}
}
impl bat::engine::child::OutputSink for Quiet {
    fn output(&mut self, _: &str, _: Stream, _: &[u8]) {}
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

fn du(p: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0, 0);
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                let (b, f) = du(&e.path());
                bytes += b;
                files += f;
            } else if let Ok(md) = e.metadata() {
                bytes += md.len();
                files += 1;
            }
        }
    }
    (bytes, files)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let batches: i64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("ledger");
    std::fs::create_dir_all(&root).expect("mkdir");
    let mut ledger = Ledger::init(&root).expect("init");
    let work = root.join(".bat/runs/bench/work");
    let mut spec = SimCampaign::new(tmp.path().join("setup"), work.clone(), bat_exe());
    spec.rounds = rounds;
    spec.batches = batches;
    let campaign = prepare_fresh(&sim::prepare_campaign(&spec).expect("setup")).expect("fresh");
    let pack = Pack::default_pack();
    let started = Instant::now();
    let mut sink = LedgerSink {
        ledger: &mut ledger,
        ctx: bat::Ctx::quiet(),
        options: bat::round::CommitRoundOptions {
            pack: pack.clone(),
            ..Default::default()
        },
    };
    run_loop(
        &campaign,
        Start::Fresh,
        &RunOptions {
            pack: &pack,
            log_dir: None,
            run_id: "bench",
            prune_round_dirs: true,
        },
        &mut Quiet,
        &mut sink,
    )
    .expect("campaign");
    drop(sink);
    let seconds = started.elapsed().as_secs_f64();

    // Round commits, oldest first.
    let mut ids: Vec<CommitId> = Vec::new();
    let mut cur = Some(ledger.resolve("HEAD").expect("HEAD"));
    while let Some(id) = cur {
        let c = ledger.read_commit(&id).expect("commit");
        if bat::round::meta::round_id_of(&c.metadata).is_some() {
            ids.push(id);
        }
        cur = c.parents.first().copied();
    }
    ids.reverse();
    let size = |n: usize| -> usize {
        ledger
            .read_object(&ids[n - 1].0, Kind::Commit)
            .expect("commit object")
            .len()
    };
    println!(
        "simulator campaign: {rounds} rounds of {batches} batches in {seconds:.1} s (library loop, bat children of the same build profile)"
    );
    println!();
    println!("| round | commit object (bytes) | vs r10 |");
    println!("|---|---|---|");
    let r10 = (ids.len() >= 10).then(|| size(10));
    for n in [1usize, 10, 100, 1000, 3000] {
        if n <= ids.len() {
            let s = size(n);
            let ratio = r10.map_or("-".to_string(), |b| format!("{:.3}x", s as f64 / b as f64));
            println!("| r{n:02} | {s} | {ratio} |");
        }
    }
    let (wb, wf) = du(&work);
    let (lb, lf) = du(&root.join(".bat"));
    println!();
    println!("| what | bytes | files |");
    println!("|---|---|---|");
    println!("| work dir (.bat/runs/bench/work) | {wb} | {wf} |");
    println!("| whole .bat (ledger + runs) | {lb} | {lf} |");
}
