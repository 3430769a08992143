//! Transfer benchmark (a printed table, not a test). In one run:
//!
//! 1. ingest a round series (SERIES/r00..r09, library commits) into an
//!    origin ledger (not timed for the comparison);
//! 2. clone it over a directory remote (or, with a third argument, over a
//!    `http(s)://` / `s3://` URL once those backends are built in) and,
//!    for comparison, `rsync -a` the same files; each ends with `sync`;
//! 3. in the clone, commit two new rounds (r10 = r09 with about one bf16
//!    element in eight nudged, like a training step; r11 likewise from r10)
//!    and push each back: bytes sent vs the round's raw size.
//!
//! Usage: `cargo run --release --example bench_remote -- SERIES WORK [URL]`
//! (WORK must not exist). "Bytes sent" for bat is the framed wire stream
//! the objects would make (96-byte frame header + stored payload each);
//! for rsync it is its own `Total bytes sent`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::remote::transfer::{fetch, push};
use bat_ledger::remote::{DirRemote, Remote};
use bat_ledger::{CommitRequest, Ledger, NoProgress};

fn sync() {
    let _ = Command::new("sync").status();
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let m = e.metadata().expect("stat");
        n += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    n
}

/// Copy round `from` to `to`, nudging the low byte of about one bf16
/// element in eight of every safetensors file (like a training step);
/// returns the round's size.
fn nudge(from: &Path, to: &Path, seed: u64) -> Result<u64, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(to)?;
    let mut total = 0u64;
    for e in std::fs::read_dir(from)?.flatten() {
        let mut b = std::fs::read(e.path())?;
        if e.file_name().to_string_lossy().ends_with(".safetensors") {
            let n = u64::from_le_bytes(b[0..8].try_into()?) as usize + 8;
            let mut x = seed;
            for i in (n..b.len()).step_by(2) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 8 == 0 {
                    b[i] ^= 1;
                }
            }
        }
        total += b.len() as u64;
        std::fs::write(to.join(e.file_name()), &b)?;
    }
    Ok(total)
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: bench_remote SERIES WORK [URL]");
        std::process::exit(2);
    }
    let series = Path::new(&args[1]).canonicalize()?;
    let work = PathBuf::from(&args[2]);
    std::fs::create_dir_all(&work)?;
    let no = AtomicBool::new(false);
    let mut rounds: Vec<PathBuf> = std::fs::read_dir(&series)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    rounds.sort();
    let raw_total: u64 = rounds.iter().map(|r| dir_bytes(r)).sum();

    // 1. Origin.
    let origin = work.join("origin");
    let t = Instant::now();
    let mut l = Ledger::init(&origin)?;
    for r in &rounds {
        let name = r.file_name().and_then(|n| n.to_str()).unwrap_or("round");
        l.commit_dir(r, &CommitRequest::new(name), &NoProgress, &no)?;
    }
    drop(l);
    sync();
    eprintln!("origin ingest: {:.1} s", t.elapsed().as_secs_f64());

    // 2a. rsync -a.
    let t = Instant::now();
    let out = Command::new("rsync")
        .args(["-a", "--stats"])
        .arg(format!("{}/", series.display()))
        .arg(work.join("rsync-copy"))
        .output()?;
    sync();
    let rsync_s = t.elapsed().as_secs_f64();
    let text = String::from_utf8_lossy(&out.stdout);
    let rsync_sent: u64 = text
        .lines()
        .find(|l| l.starts_with("Total bytes sent:"))
        .and_then(|l| l.split(':').nth(1))
        .map(|v| v.trim().replace(',', ""))
        .and_then(|v| v.parse().ok())
        .unwrap_or(raw_total);

    // 2b. bat clone over a remote.
    let t = Instant::now();
    let clone = work.join("clone");
    let mut c = Ledger::init(&clone)?;
    let mut remote: Box<dyn Remote> = match args.get(3) {
        Some(url) => bat::remote::open_remote(url, &bat::remote::RemoteOptions::default())?,
        None => Box::new(DirRemote::open(&origin)?),
    };
    let f = fetch(&mut c, remote.as_mut(), "origin", None, &NoProgress, &no)?;
    let tip = c.resolve("refs/remotes/origin/main")?;
    c.update_ref("refs/heads/main", None, Some(tip), "clone")?;
    drop(c);
    sync();
    let clone_s = t.elapsed().as_secs_f64();
    let clone_sent = 64 + f.stats.payload_bytes + 96 * f.stats.objects_received;

    // 3. Two new rounds, each committed in the clone and pushed back: r10
    //    (a keyframe: r09 sits at the default delta depth limit) and r11 (a
    //    delta against r10).
    let mut pushes = Vec::new();
    let mut base = rounds.last().ok_or("empty series")?.clone();
    for (k, name) in ["r10", "r11"].into_iter().enumerate() {
        let new_round = work.join(name);
        let new_raw = nudge(&base, &new_round, 0x2545_F491_4F6C_DD1D + k as u64)?;
        let mut c = Ledger::open(&clone.join(".bat"))?;
        c.commit_dir(&new_round, &CommitRequest::new(name), &NoProgress, &no)?;
        let t = Instant::now();
        let p = push(
            &c,
            remote.as_mut(),
            "refs/heads/main",
            "refs/heads/main",
            false,
            &NoProgress,
            &no,
        )?;
        sync();
        let push_s = t.elapsed().as_secs_f64();
        pushes.push((
            name,
            new_raw,
            push_s,
            64 + p.payload_bytes + 96 * p.objects_sent,
            p.objects_sent,
        ));
        base = new_round;
    }
    drop(remote);

    println!(
        "series: {} rounds, {:.1} MB of files; remote: {}",
        rounds.len(),
        mb(raw_total),
        args.get(3).map_or("directory", String::as_str)
    );
    println!("| transfer | tool | seconds | MB/s (files) | bytes sent | sent / raw |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| clone of {} rounds | rsync -a | {rsync_s:.1} | {:.0} | {rsync_sent} | {:.3} |",
        rounds.len(),
        mb(raw_total) / rsync_s,
        rsync_sent as f64 / raw_total as f64
    );
    println!(
        "| clone of {} rounds | bat clone | {clone_s:.1} | {:.0} | {clone_sent} | {:.3} |",
        rounds.len(),
        mb(raw_total) / clone_s,
        clone_sent as f64 / raw_total as f64
    );
    for (name, new_raw, push_s, push_sent, _) in &pushes {
        println!(
            "| push of new round {name} | bat push | {push_s:.1} | {:.0} | {push_sent} | {:.3} |",
            mb(*new_raw) / push_s,
            *push_sent as f64 / *new_raw as f64
        );
    }
    println!(
        "ratios (bat / rsync, same run): time {:.2}x, bytes sent {:.3}x; clone stored {} objects; pushes sent {:?} objects",
        clone_s / rsync_s,
        clone_sent as f64 / rsync_sent as f64,
        f.stats.objects_stored,
        pushes.iter().map(|p| p.4).collect::<Vec<_>>()
    );
    Ok(())
}
