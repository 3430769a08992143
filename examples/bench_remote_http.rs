//! Remote benchmark: the object transfer of a whole round series from a
//! real `bat serve` over loopback HTTP into a fresh ledger (every object
//! verified and stored durably), against `rsync -a` of the same `.bat`
//! directory, in one run. Prints wall time, MB/s of logical (checked-out)
//! bytes, bytes sent and the ratio.
//!
//! Usage: cargo run --release --example bench_remote_http -- SERIES_DIR WORK_DIR [ROUNDS]
//!
//! SERIES_DIR holds r00, r01, … (e.g. from shared/bench/make_series.py);
//! WORK_DIR/src is ingested once and reused. The transfer asks the server
//! for the objects of every round (ids listed from the source ledger, as a
//! clone's negotiation would find them) in batches of 4096 ids, imports
//! them in 64 MiB batches and fsyncs like any import. Bytes sent over HTTP
//! are counted by a loopback TCP relay between client and server (headers
//! included). The `bat` binary is taken from beside this example.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bat::remote::http::{HttpOptions, HttpRemote};
use bat_ledger::remote::{Remote, WireObject};
use bat_ledger::{CommitId, CommitRequest, Ledger, Location, Mode, NoProgress, ObjectId, TreeId};

fn bat_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/bench_remote_http -> target/<profile>/bat
    exe.parent()
        .and_then(Path::parent)
        .map(|p| p.join("bat"))
        .expect("target directory")
}

/// Objects reachable from `tips`, each after what it needs.
fn objects_in_order(l: &Ledger, tips: &[CommitId]) -> Vec<ObjectId> {
    fn add(l: &Ledger, id: ObjectId, seen: &mut HashSet<ObjectId>, out: &mut Vec<ObjectId>) {
        if seen.contains(&id) {
            return;
        }
        let row = l.locate(&id).expect("locate").expect("stored");
        match row.location {
            Location::Delta { base, .. } => add(l, base, seen, out),
            Location::Chunked { list } => {
                add(l, list, seen, out);
                for c in l.read_chunk_list(&list).expect("list").chunks {
                    add(l, c.id, seen, out);
                }
            }
            Location::Packed { .. } => {}
        }
        if seen.insert(id) {
            out.push(id);
        }
    }
    fn add_tree(l: &Ledger, t: TreeId, seen: &mut HashSet<ObjectId>, out: &mut Vec<ObjectId>) {
        if seen.contains(&t.0) {
            return;
        }
        for e in l.read_tree(&t).expect("tree").entries {
            match e.mode {
                Mode::Tree => add_tree(l, TreeId(e.id), seen, out),
                _ => add(l, e.id, seen, out),
            }
        }
        add(l, t.0, seen, out);
    }
    let mut commits = Vec::new();
    let mut seen_c = HashSet::new();
    let mut stack = tips.to_vec();
    while let Some(c) = stack.pop() {
        if seen_c.insert(c) {
            commits.push(c);
            stack.extend(l.read_commit(&c).expect("commit").parents);
        }
    }
    commits.reverse();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for c in commits {
        add_tree(
            l,
            l.read_commit(&c).expect("commit").tree,
            &mut seen,
            &mut out,
        );
        add(l, c.0, &mut seen, &mut out);
    }
    out
}

/// A loopback relay counting the bytes the server sends.
fn relay(upstream: String, counter: Arc<AtomicU64>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            let (mut c_in, mut s_out) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_in, &mut s_out);
                let _ = s_out.shutdown(std::net::Shutdown::Write);
            });
            let counter = counter.clone();
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    match s_in.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            counter.fetch_add(n as u64, Ordering::Relaxed);
                            if c_out.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = c_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    format!("http://{addr}")
}

fn du(p: &Path) -> u64 {
    bat_ledger::maint::dir_size(p)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: bench_remote_http SERIES_DIR WORK_DIR [ROUNDS]");
        std::process::exit(2);
    }
    let series = Path::new(&args[1]).canonicalize()?;
    let work = Path::new(&args[2]);
    let rounds: usize = args.get(3).map(|r| r.parse()).transpose()?.unwrap_or(10);
    std::fs::create_dir_all(work)?;
    let work = work.canonicalize()?;

    // 1. The source ledger (ingested once).
    let src = work.join("src");
    if !src.join(".bat").exists() {
        std::fs::create_dir_all(&src)?;
        let mut l = Ledger::init(&src)?;
        for r in 0..rounds {
            let dir = series.join(format!("r{r:02}"));
            let t = Instant::now();
            l.commit_dir(
                &dir,
                &CommitRequest::new(format!("round {r:02}")),
                &NoProgress,
                &AtomicBool::new(false),
            )?;
            eprintln!("ingested r{r:02} in {:.1}s", t.elapsed().as_secs_f64());
        }
    }
    let l = Ledger::discover(&src)?;
    let tip = l.resolve("main")?;
    let ids = objects_in_order(&l, &[tip]);
    let logical: u64 = {
        let mut n = 0;
        for (c, _) in l.log(tip, None)? {
            n += l
                .walk_files(&l.read_commit(&c)?.tree)?
                .iter()
                .map(|f| f.size)
                .sum::<u64>();
        }
        n
    };
    let src_bat = du(&src.join(".bat"));
    drop(l);

    // 2. HTTP: real server, relay, fresh destination ledger.
    let mut server = Command::new(bat_binary())
        .arg("-C")
        .arg(&src)
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--allow-anonymous-read",
            "--read-only",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("stdout")).read_line(&mut line)?;
    let upstream = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_string();
    let counter = Arc::new(AtomicU64::new(0));
    let url = relay(upstream, counter.clone());
    // 2a. Transfer only: every object over HTTP, decoded from the wire and
    // dropped (server export + network + wire decoding, no verification).
    let t = Instant::now();
    let mut r = HttpRemote::new(&url, HttpOptions::default())?;
    let mut payload = 0u64;
    for batch in ids.chunks(4096) {
        r.get(batch, &mut |o| {
            payload += o.payload_len();
            Ok(())
        })?;
    }
    let wire_s = t.elapsed().as_secs_f64();
    let wire_bytes = counter.swap(0, Ordering::Relaxed);
    drop(r);

    // 2b. The clone: transfer, verify, store durably.
    let dst = work.join("http-dst");
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst)?;
    let sync = || {
        let _ = Command::new("sync").status();
    };
    sync();
    let t = Instant::now();
    let mut d = Ledger::init(&dst)?;
    let mut r = HttpRemote::new(&url, HttpOptions::default())?;
    let _ = r.list_refs()?;
    for batch in ids.chunks(4096) {
        let mut pending: Vec<WireObject> = Vec::new();
        let mut bytes = 0u64;
        r.get(batch, &mut |o| {
            bytes += o.payload_len();
            pending.push(o);
            if bytes >= 64 << 20 {
                d.import_wire(std::mem::take(&mut pending))?;
                bytes = 0;
            }
            Ok(())
        })?;
        d.import_wire(pending)?;
    }
    d.update_ref("refs/heads/main", None, Some(tip), "bench clone")?;
    drop(d);
    sync();
    let http_s = t.elapsed().as_secs_f64();
    let http_bytes = counter.load(Ordering::Relaxed);
    let _ = server.kill();
    let _ = server.wait();
    let check = Ledger::discover(&dst)?;
    let rep = check.fsck(&NoProgress, &AtomicBool::new(false))?;
    assert!(
        rep.ok(),
        "the cloned ledger must be fsck-clean: {:?}",
        rep.problems
    );
    let dst_bat = du(&dst.join(".bat"));

    // 3. rsync -a of the .bat directory.
    let rdst = work.join("rsync-dst");
    let _ = std::fs::remove_dir_all(&rdst);
    std::fs::create_dir_all(&rdst)?;
    sync();
    let t = Instant::now();
    let out = Command::new("rsync")
        .args(["-a", "--stats"])
        .arg(src.join(".bat"))
        .arg(&rdst)
        .output()?;
    sync();
    let rsync_s = t.elapsed().as_secs_f64();
    let stats = String::from_utf8_lossy(&out.stdout);
    let rsync_bytes: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("Total bytes sent: "))
        .map(|v| v.replace(',', "").trim().parse().unwrap_or(0))
        .unwrap_or(0);

    let mb = |b: u64| b as f64 / 1e6;
    println!("payload bytes: {:.1} MB", mb(payload));
    println!("rounds: {rounds}, objects: {}, logical bytes (all rounds): {:.1} MB, source .bat: {:.1} MB", ids.len(), mb(logical), mb(src_bat));
    println!("| tool | s | logical MB/s | MB sent | dest .bat MB |");
    println!("|---|---|---|---|---|");
    println!(
        "| bat serve → HTTP clone (verified import) | {http_s:.2} | {:.0} | {:.1} | {:.1} |",
        mb(logical) / http_s,
        mb(http_bytes),
        mb(dst_bat)
    );
    println!(
        "| bat serve → HTTP transfer only (no verify/store) | {wire_s:.2} | {:.0} | {:.1} | – |",
        mb(logical) / wire_s,
        mb(wire_bytes)
    );
    println!(
        "| rsync -a .bat | {rsync_s:.2} | {:.0} | {:.1} | {:.1} |",
        mb(logical) / rsync_s,
        mb(rsync_bytes),
        mb(du(&rdst))
    );
    println!(
        "ratio bat/rsync: time {:.2}x, bytes sent {:.3}x",
        http_s / rsync_s,
        http_bytes as f64 / rsync_bytes.max(1) as f64
    );
    Ok(())
}
