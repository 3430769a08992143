//! Transfer speed benchmark (a printed table, not a test). In one run, on
//! loopback, with the `bat` binary beside this example (or `--bat PATH`):
//!
//! 1. a local copy of the origin's `.bat` (`cp -a`, then `sync`): the
//!    yardstick;
//! 2. `bat fsck` of the origin: every version decoded and hashed locally,
//!    the floor of a transfer that verifies what it receives (its MB/s is
//!    of the origin's stored bytes);
//! 3. `bat clone http://…` of the whole series from a real `bat serve`;
//! 4. `bat fetch` over HTTP of the second half of the series into a clone
//!    of the first half;
//! 5. `bat push` over HTTP of the whole series into an empty served ledger;
//! 6. `bat push` to S3 and `bat clone s3://…` back (an `s3s-fs` server,
//!    from `--s3s PATH` or `BAT_TEST_S3S_FS`; skipped without one).
//!
//! Each row: wall seconds, MB/s of stored bytes (what the receiving side's
//! `.bat` or bucket grew by, over the wall time), CPU seconds and peak RSS
//! (`VmHWM`, polled every 5 ms) of the client and of the server (a fresh
//! server per row), and the ratio of the MB/s to the local copy's.
//!
//! Usage: cargo run --release --example bench_remote_speed -- WORK
//!        [--rounds R (6)] [--shards S (2)] [--mib M (512)] [--bat PATH] [--s3s PATH]
//!        [--only ROWS]
//!
//! `--only` takes a comma-separated subset of `copy,fsck,clone,fetch,push,s3`
//! (default: all); without `clone` the pushes start from a plain copy of the
//! origin instead of a timed clone.
//!
//! The series (R rounds of S bf16 safetensors shards of M MiB; each round
//! gives about 3 elements in 8 a new mantissa) is generated into
//! WORK/origin once, tensor by tensor, and reused by later runs with the
//! same flags; the defaults store about 2 GB. Every destination is wiped
//! before its row and each row ends with `sync`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/series.rs"]
mod series;

const ACCESS_KEY: &str = "bench-access";
const SECRET_KEY: &str = "bench-secret-0123456789";
const TOKEN: &str = "bench-write-token-0123456789";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Elements per tensor of a shard (8 tensors per shard).
const TENSORS: usize = 8;

/// One shard of round `round`: generated element by element from a seed
/// per (shard, tensor), so no round is ever held whole and round k is
/// round k-1 with about 3 elements in 8 given a new mantissa.
fn write_shard(path: &Path, shard: usize, round: usize, mib: usize) -> std::io::Result<()> {
    let per = (mib << 19) / TENSORS;
    let mut header = String::from("{");
    for t in 0..TENSORS {
        if t > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""layer.{shard}.{t}.weight":{{"dtype":"BF16","shape":[{per}],"data_offsets":[{},{}]}}"#,
            2 * per * t,
            2 * per * (t + 1)
        ));
    }
    header.push('}');
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    out.write_all(&(header.len() as u64).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    let mut buf = Vec::with_capacity(1 << 17);
    for t in 0..TENSORS {
        let seed = 0x9e37_79b9_7f4a_7c15u64 ^ ((shard as u64) << 40) ^ ((t as u64) << 32);
        let mut init = Rng(seed | 1);
        // One generator per round, so element i of round k depends only on
        // the rounds' draws for element i.
        let mut steps: Vec<Rng> = (1..=round)
            .map(|r| Rng((seed.rotate_left(17) ^ ((r as u64) * 0x2545_f491_4f6c_dd1d)) | 1))
            .collect();
        for _ in 0..per {
            let r = init.next();
            let sign = ((r >> 8) & 1) as u16;
            let exp = 118 + (r >> 16) as u16 % 8;
            let mut x = (sign << 15) | (exp << 7) | (r & 0x7f) as u16;
            for s in steps.iter_mut() {
                let r = s.next();
                if r % 8 < 3 {
                    x = (x & !0x7f) | ((r >> 20) & 0x7f) as u16;
                }
            }
            buf.extend_from_slice(&x.to_le_bytes());
            if buf.len() >= 1 << 17 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
    }
    out.write_all(&buf)?;
    out.flush()
}

fn bat_cmd(bat: &Path, dir: Option<&Path>, args: &[&str]) -> Command {
    let mut c = Command::new(bat);
    if let Some(d) = dir {
        c.arg("-C").arg(d);
    }
    c.args(args)
        .env("BAT_AUTHOR", "bench")
        .env_remove("BAT_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

fn run<C: std::borrow::BorrowMut<Command>>(mut c: C) {
    let c = c.borrow_mut();
    let st = c.status().expect("spawn");
    assert!(st.success(), "command failed: {c:?}");
}

fn vm_hwm_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// utime + stime of a live process, seconds.
fn proc_cpu(pid: u32, ticks: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / ticks
}

/// A server child (bat serve or s3s-fs) whose CPU and peak RSS are read
/// from `/proc` while it lives.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn stop(mut self, ticks: f64) -> (f64, f64) {
        let pid = self.child.id();
        let out = (proc_cpu(pid, ticks), vm_hwm_mb(pid));
        let _ = self.child.kill();
        let _ = self.child.wait();
        out
    }
}

fn serve(bat: &Path, dir: &Path, write: bool) -> Server {
    let mut c = bat_cmd(bat, Some(dir), &["serve", "--bind", "127.0.0.1:0"]);
    if write {
        let tokens = dir.join("..").join(format!(
            "tokens-{}",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("x")
        ));
        std::fs::write(&tokens, format!("write {TOKEN}\n")).expect("write the token file");
        c.arg("--token-file").arg(tokens);
    } else {
        c.args(["--allow-anonymous-read", "--read-only"]);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn bat serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the listening line");
    let url = line.trim().trim_start_matches("listening on ").to_string();
    Server { child, url }
}

fn s3s(bin: &Path, root: &Path) -> Server {
    std::fs::create_dir_all(root.join("ledgers")).expect("bucket directory");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = Command::new(bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn s3s-fs");
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..500 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Server { child, url }
}

fn s3_env(c: &mut Command, endpoint: &str) {
    c.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env_remove("AWS_SESSION_TOKEN");
}

struct Row {
    what: String,
    wall: f64,
    bytes: u64,
    client_cpu: f64,
    client_rss: f64,
    server: Option<(f64, f64)>,
}

/// Run a client command to completion: wall, CPU, peak RSS.
fn timed(mut c: Command, ticks: f64) -> (f64, f64, f64) {
    let cpu0 = series::children_cpu(ticks);
    let start = Instant::now();
    let mut child = c.spawn().expect("spawn the client");
    let pid = child.id();
    let mut peak = 0f64;
    let status = loop {
        peak = peak.max(vm_hwm_mb(pid));
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "client failed: {c:?}");
    let _ = Command::new("sync").status();
    let wall = start.elapsed().as_secs_f64();
    (wall, series::children_cpu(ticks) - cpu0, peak)
}

fn du(p: &Path) -> u64 {
    bat_ledger::maint::dir_size(p)
}

fn fresh(p: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(p);
    p.to_path_buf()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(work) = args.first().map(PathBuf::from) else {
        eprintln!(
            "usage: bench_remote_speed WORK [--rounds R] [--shards S] [--mib M] [--bat PATH] [--s3s PATH]"
        );
        std::process::exit(2);
    };
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let num = |name: &str, d: usize| opt(name).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (rounds, shards, mib) = (num("--rounds", 6), num("--shards", 2), num("--mib", 512));
    let only = opt("--only");
    let want = |row: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|r| r == row))
    };
    let bat = opt("--bat").map(PathBuf::from).unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("current exe");
        exe.parent()
            .and_then(Path::parent)
            .map(|p| p.join("bat"))
            .expect("target directory")
    });
    let s3s_bin = opt("--s3s")
        .or_else(|| std::env::var("BAT_TEST_S3S_FS").ok())
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    let ticks = series::clock_ticks();
    std::fs::create_dir_all(&work)?;
    let work = work.canonicalize()?;

    // The series: origin-half holds the first rounds, origin all of them.
    let tag = format!("r{rounds}-s{shards}-m{mib}");
    let (origin, half) = (work.join("origin"), work.join("origin-half"));
    if std::fs::read_to_string(work.join("series.done"))
        .ok()
        .as_deref()
        != Some(tag.as_str())
    {
        let _ = std::fs::remove_dir_all(&origin);
        let _ = std::fs::remove_dir_all(&half);
        let data = fresh(&work.join("data"));
        std::fs::create_dir_all(&data)?;
        run(bat_cmd(&bat, None, &["init"]).arg(&origin));
        for r in 0..rounds {
            let t = Instant::now();
            for s in 0..shards {
                let name = format!("model-{:05}-of-{shards:05}.safetensors", s + 1);
                write_shard(&data.join(name), s, r, mib)?;
            }
            let msg = format!("round {r}");
            run(bat_cmd(&bat, Some(&origin), &["commit", "--plain", "-m", &msg]).arg(&data));
            eprintln!(
                "round {r} written and committed in {:.1}s",
                t.elapsed().as_secs_f64()
            );
            if r + 1 == rounds.div_ceil(2) {
                run(Command::new("cp").arg("-a").arg(&origin).arg(&half));
            }
        }
        std::fs::remove_dir_all(&data)?;
        std::fs::write(work.join("series.done"), &tag)?;
    }
    let stored = du(&origin.join(".bat"));
    let mut rows: Vec<Row> = Vec::new();

    // 1. Local copy of the packs.
    if want("copy") {
        let dst = fresh(&work.join("copy"));
        std::fs::create_dir_all(&dst)?;
        let _ = Command::new("sync").status();
        let mut c = Command::new("cp");
        c.arg("-a").arg(origin.join(".bat")).arg(&dst);
        let (wall, cpu, rss) = timed(c, ticks);
        rows.push(Row {
            what: "local copy (cp -a .bat)".into(),
            wall,
            bytes: du(&dst),
            client_cpu: cpu,
            client_rss: rss,
            server: None,
        });
        let _ = std::fs::remove_dir_all(&dst);
    }

    // The floor of a verified transfer: decoding and hashing every version
    // of the same ledger locally (`bat fsck`), nothing moved or written.
    if want("fsck") {
        let (wall, cpu, rss) = timed(bat_cmd(&bat, Some(&origin), &["fsck"]), ticks);
        rows.push(Row {
            what: "verify locally (fsck)".into(),
            wall,
            bytes: stored,
            client_cpu: cpu,
            client_rss: rss,
            server: None,
        });
    }

    // 2. Clone over HTTP (or, when not measured, a plain copy to push from).
    let clone = fresh(&work.join("clone"));
    if want("clone") {
        let srv = serve(&bat, &origin, false);
        let mut c = bat_cmd(&bat, None, &["clone", &srv.url]);
        c.arg(&clone);
        let (wall, cpu, rss) = timed(c, ticks);
        let server = srv.stop(ticks);
        rows.push(Row {
            what: "clone over HTTP".into(),
            wall,
            bytes: du(&clone.join(".bat")),
            client_cpu: cpu,
            client_rss: rss,
            server: Some(server),
        });
    } else if want("push") || want("s3") {
        run(Command::new("cp").arg("-a").arg(&origin).arg(&clone));
    }

    // 3. Fetch over HTTP: the second half into a clone of the first half.
    if want("fetch") {
        let fetched = fresh(&work.join("fetch"));
        run(bat_cmd(&bat, None, &["clone"]).arg(&half).arg(&fetched));
        let srv = serve(&bat, &origin, false);
        run(bat_cmd(
            &bat,
            Some(&fetched),
            &["remote", "add", "full", &srv.url],
        ));
        let before = du(&fetched.join(".bat"));
        let _ = Command::new("sync").status();
        let (wall, cpu, rss) = timed(bat_cmd(&bat, Some(&fetched), &["fetch", "full"]), ticks);
        let server = srv.stop(ticks);
        rows.push(Row {
            what: format!("fetch over HTTP (rounds {}..{rounds})", rounds.div_ceil(2)),
            wall,
            bytes: du(&fetched.join(".bat")).saturating_sub(before),
            client_cpu: cpu,
            client_rss: rss,
            server: Some(server),
        });
        let _ = std::fs::remove_dir_all(&fetched);
    }

    // 4. Push over HTTP into an empty ledger.
    if want("push") {
        let target = fresh(&work.join("push-target"));
        run(bat_cmd(&bat, None, &["init"]).arg(&target));
        let before = du(&target.join(".bat"));
        let srv = serve(&bat, &target, true);
        run(bat_cmd(
            &bat,
            Some(&clone),
            &["remote", "add", "up", &srv.url],
        ));
        let mut c = bat_cmd(&bat, Some(&clone), &["push", "up", "main"]);
        c.env("BAT_TOKEN", TOKEN);
        let (wall, cpu, rss) = timed(c, ticks);
        let server = srv.stop(ticks);
        rows.push(Row {
            what: "push over HTTP".into(),
            wall,
            bytes: du(&target.join(".bat")).saturating_sub(before),
            client_cpu: cpu,
            client_rss: rss,
            server: Some(server),
        });
        let _ = std::fs::remove_dir_all(&target);
    }

    // 5. S3: push, then clone back.
    match s3s_bin.as_ref().filter(|_| want("s3")) {
        None if !want("s3") => {}
        None => eprintln!("no s3s-fs (--s3s PATH or BAT_TEST_S3S_FS): S3 rows skipped"),
        Some(bin) => {
            let root = fresh(&work.join("s3root"));
            let srv = s3s(bin, &root);
            let url = "s3://ledgers/bench";
            run(bat_cmd(&bat, Some(&clone), &["remote", "add", "s3", url]));
            let mut c = bat_cmd(&bat, Some(&clone), &["push", "s3", "main"]);
            s3_env(&mut c, &srv.url);
            let (wall, cpu, rss) = timed(c, ticks);
            let server = srv.stop(ticks);
            rows.push(Row {
                what: "push to S3 (s3s-fs)".into(),
                wall,
                bytes: du(&root),
                client_cpu: cpu,
                client_rss: rss,
                server: Some(server),
            });
            let srv = s3s(bin, &root);
            let back = fresh(&work.join("s3clone"));
            let mut c = bat_cmd(&bat, None, &["clone", url]);
            c.arg(&back);
            s3_env(&mut c, &srv.url);
            let (wall, cpu, rss) = timed(c, ticks);
            let server = srv.stop(ticks);
            rows.push(Row {
                what: "clone from S3 (s3s-fs)".into(),
                wall,
                bytes: du(&back.join(".bat")),
                client_cpu: cpu,
                client_rss: rss,
                server: Some(server),
            });
            let _ = std::fs::remove_dir_all(&back);
            let _ = std::fs::remove_dir_all(&root);
        }
    }
    let _ = std::fs::remove_dir_all(&clone);

    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "series: {rounds} rounds x {shards} shards x {mib} MiB bf16; origin .bat {:.0} MB; bat {}; load {}",
        mb(stored),
        bat.display(),
        series::load()
    );
    println!("| transfer | wall s | stored MB | MB/s | × local copy | client CPU s | client peak RSS MB | server CPU s | server peak RSS MB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let base = rows
        .first()
        .filter(|r| r.what.starts_with("local copy"))
        .map_or(f64::NAN, |r| mb(r.bytes) / r.wall.max(1e-9));
    for r in &rows {
        let rate = mb(r.bytes) / r.wall.max(1e-9);
        let (scpu, srss) = r
            .server
            .map_or(("–".to_string(), "–".to_string()), |(c, m)| {
                (format!("{c:.1}"), format!("{m:.0}"))
            });
        println!(
            "| {} | {:.1} | {:.0} | {rate:.0} | {:.2} | {:.1} | {:.0} | {scpu} | {srss} |",
            r.what,
            r.wall,
            mb(r.bytes),
            rate / base,
            r.client_cpu,
            r.client_rss
        );
    }
    Ok(())
}
