//! History at campaign scale: `bat` against `git` on the same number of
//! commits, whole processes, side by side in one run.
//!
//! ```text
//! cargo build --release && cargo run --release --example bench_history [N ...] [--runs R] [--sim ROUNDS ...]
//! ```
//!
//! Default sizes: 1000 10000 100000 plain commits, 5 runs each (3 at 100k).
//! `--keep DIR` builds the ledgers under DIR and leaves them there (for
//! profiling a command by hand afterwards); a simulator campaign already
//! kept there is reused.
//! `--sim ROUNDS` adds simulator campaigns of that many rounds built by the
//! real `bat run --backend sim` (slow: minutes per thousand rounds; not in
//! the default run), set against a git repository with as many commits.
//!
//! Plain ledgers are built through the library (`Ledger::commit_chain`, a
//! library fast path: 1,000 commits per pack segment and per transaction,
//! all recording the same 3-file tree), and the git repository with
//! `git fast-import` (same commits, same tree; no commit-graph file). Every
//! figure is a whole child process (start-up included), timed with a
//! monotonic clock around spawn and wait, peak RSS from `/usr/bin/time -f
//! %M`. Runs of a bat command and its git counterpart alternate (A B A B)
//! and the ratio is the median of the per-pair ratios. Quote medians; the
//! [min-max] spread shows the noise of a shared machine. The `.bat` file
//! count is printed split into packs, catalog, run/replay folders and the
//! rest, with pack files per 64 MiB of pack data, before and after `gc`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use bat_ledger::{CommitRequest, Ledger, NoProgress};

fn bat_exe() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    let bat = dir.join("bat");
    assert!(
        bat.is_file(),
        "build the bat binary first (cargo build --release): {}",
        bat.display()
    );
    bat
}

/// One timed run: wall seconds and peak RSS in KiB.
fn run_once(dir: &Path, argv: &[String]) -> (f64, u64) {
    let rss_file = tempfile::NamedTempFile::new().expect("temp file");
    let start = Instant::now();
    let st = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(rss_file.path())
        .args(argv)
        .current_dir(dir)
        .env_remove("BAT_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn /usr/bin/time");
    let secs = start.elapsed().as_secs_f64();
    assert!(st.success(), "{argv:?} failed in {}", dir.display());
    let rss = std::fs::read_to_string(rss_file.path())
        .ok()
        .and_then(|s| s.lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    (secs, rss)
}

struct Stat {
    med: f64,
    min: f64,
    max: f64,
}

fn stat(mut v: Vec<f64>) -> Stat {
    v.sort_by(f64::total_cmp);
    Stat {
        med: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

fn ms(s: &Stat) -> String {
    format!(
        "{:>8.1} [{:.1}-{:.1}]",
        s.med * 1e3,
        s.min * 1e3,
        s.max * 1e3
    )
}

/// A bat command and optionally its git counterpart, alternated.
fn compare(
    label: &str,
    bat_dir: &Path,
    bat: Vec<String>,
    git: Option<(&Path, Vec<String>)>,
    runs: usize,
) -> (Stat, u64) {
    let (mut a, mut b, mut ratios, mut rss) = (Vec::new(), Vec::new(), Vec::new(), 0);
    // One warm-up each (page cache), not counted.
    run_once(bat_dir, &bat);
    if let Some((d, g)) = &git {
        run_once(d, g);
    }
    for _ in 0..runs {
        let (t, r) = run_once(bat_dir, &bat);
        rss = rss.max(r);
        a.push(t);
        if let Some((d, g)) = &git {
            let (tg, _) = run_once(d, g);
            ratios.push(t / tg);
            b.push(tg);
        }
    }
    let sa = stat(a);
    let line = if git.is_some() {
        let sb = stat(b);
        let sr = stat(ratios);
        format!(
            "{}  {}  {:>5.2}x [{:.2}-{:.2}]",
            ms(&sa),
            ms(&sb),
            sr.med,
            sr.min,
            sr.max
        )
    } else {
        ms(&sa)
    };
    println!("  {label:<30} {line}");
    (sa, rss)
}

fn dir_stats(p: &Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0, 0);
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                let (b, f) = dir_stats(&e.path());
                bytes += b;
                files += f;
            } else {
                bytes += md.len();
                files += 1;
            }
        }
    }
    (bytes, files)
}

/// The `.bat` directory split by part: `packs/`, the catalog
/// (`catalog.sqlite*`), run and replay folders (`runs/`, `replays/`) and
/// the rest; each (bytes, files).
fn ledger_split(bat: &Path) -> Vec<(&'static str, u64, u64)> {
    let mut parts = vec![
        ("packs", 0, 0),
        ("catalog", 0, 0),
        ("runs+replays", 0, 0),
        ("other", 0, 0),
    ];
    let Ok(rd) = std::fs::read_dir(bat) else {
        return parts;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let i = match name.as_str() {
            "packs" => 0,
            n if n.starts_with("catalog.sqlite") => 1,
            "runs" | "replays" => 2,
            _ => 3,
        };
        let (b, f) = match e.metadata() {
            Ok(md) if md.is_dir() => dir_stats(&e.path()),
            Ok(md) => (md.len(), 1),
            Err(_) => continue,
        };
        parts[i].1 += b;
        parts[i].2 += f;
    }
    parts
}

/// One line: each part's files and size, and pack files per 64 MiB of
/// pack data (the issue's goal is at most 1 after `gc`).
fn print_split(bat: &Path) {
    let parts = ledger_split(bat);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let text: Vec<String> = parts
        .iter()
        .map(|(n, b, f)| format!("{n} {f} files {:.1} MiB", mib(*b)))
        .collect();
    let (_, pack_bytes, pack_files) = parts[0];
    let per_64 = pack_files as f64 / (mib(pack_bytes) / 64.0).max(1.0);
    println!(
        "    split: {}; pack files per 64 MiB of packs: {per_64:.2}",
        text.join(", ")
    );
}

const BASE_TIME: i64 = 1_700_000_000;

fn build_bat(dir: &Path, n: u64) {
    let mut l = Ledger::init(dir).expect("init");
    let d = dir.join("data");
    std::fs::create_dir_all(&d).expect("mkdir");
    for (name, body) in [
        ("a.txt", "alpha\n"),
        ("b.txt", "beta\n"),
        ("c.json", "{\"x\": 1}\n"),
    ] {
        std::fs::write(d.join(name), body).expect("write");
    }
    let mut first = CommitRequest::new("commit 0");
    first.author = "bench".into();
    first.time = Some(BASE_TIME);
    let tree = l
        .commit_dir(&d, &first, &NoProgress, &AtomicBool::new(false))
        .expect("commit")
        .tree;
    let mut i = 1;
    while i < n {
        let end = (i + 1000).min(n);
        l.commit_chain(
            tree,
            (i..end).map(|k| {
                let mut r = CommitRequest::new(format!("commit {k}"));
                r.author = "bench".into();
                r.time = Some(BASE_TIME + k as i64);
                r
            }),
        )
        .expect("commit chain");
        i = end;
    }
}

fn build_git(dir: &Path, n: u64) {
    build_git_with(dir, n, |k| format!("commit {k}\n"));
}

/// A git repository of `n` commits of the same 3-file tree whose `k`-th
/// commit (oldest first) has the message `message(k)`.
fn build_git_with(dir: &Path, n: u64, message: impl Fn(u64) -> String) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let st = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(dir)
        .status()
        .expect("git init");
    assert!(st.success());
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import");
    {
        let mut w = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
        let files = [
            ("a.txt", "alpha\n"),
            ("b.txt", "beta\n"),
            ("c.json", "{\"x\": 1}\n"),
        ];
        for (m, (_, body)) in files.iter().enumerate() {
            write!(w, "blob\nmark :{}\ndata {}\n{body}\n", m + 1, body.len()).expect("write");
        }
        for k in 0..n {
            let msg = message(k);
            write!(
                w,
                "commit refs/heads/main\nauthor bench <bench@example.invalid> {t} +0000\ncommitter bench <bench@example.invalid> {t} +0000\ndata {}\n{msg}",
                msg.len(),
                t = BASE_TIME + k as i64
            )
            .expect("write");
            if k == 0 {
                for (m, (name, _)) in files.iter().enumerate() {
                    writeln!(w, "M 100644 :{} {name}", m + 1).expect("write");
                }
            }
            writeln!(w).expect("write");
        }
    }
    assert!(child.wait().expect("wait").success());
}

fn build_sim(dir: &Path, rounds: u64) {
    let st = Command::new(bat_exe())
        .arg("init")
        .arg(dir)
        .stdout(Stdio::null())
        .status()
        .expect("bat init");
    assert!(st.success());
    let st = Command::new(bat_exe())
        .arg("-C")
        .arg(dir)
        .args(["run", "--backend", "sim", "--seed", "2", "--rounds"])
        .arg(rounds.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("bat run");
    assert!(st.success(), "bat run --backend sim failed");
}

/// The encoded size of round commits along the campaign's first-parent
/// chain (the issue's "r1000 within 1.5× of r10"): r01, r10, r100, ... and
/// the last round.
fn print_round_commit_sizes(dir: &Path) {
    let l = Ledger::discover(dir).expect("open the campaign");
    let head = l.resolve("HEAD").expect("HEAD");
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for item in l.history(head, None).expect("history") {
        let (_, c) = item.expect("commit");
        let Some(rid) = c.metadata.get("round_id").and_then(|v| v.as_str()) else {
            continue;
        };
        let n: u64 = rid.trim_start_matches('r').parse().unwrap_or(0);
        let last = sizes.is_empty();
        if last || n == 1 || n == 10 || n == 100 || n == 1000 || n == 10_000 {
            sizes.push((rid.to_string(), c.encode().expect("encodes").len()));
        }
    }
    sizes.reverse();
    let text: Vec<String> = sizes.iter().map(|(r, b)| format!("{r} {b} B")).collect();
    println!("  round commit object sizes: {}", text.join(", "));
}

/// Every commit's metadata JSON text, oldest first.
fn campaign_metadata(dir: &Path) -> Vec<String> {
    let l = Ledger::discover(dir).expect("open the campaign");
    let head = l.resolve("HEAD").expect("HEAD");
    let mut out: Vec<String> = l
        .history_raw(head, None)
        .expect("history")
        .map(|item| item.expect("commit").1.metadata.get().to_string())
        .collect();
    out.reverse();
    out
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn bench_ledger(what: &str, n: u64, bat_dir: &Path, git: Option<&Path>, runs: usize) {
    let bat = bat_exe().display().to_string();
    let b = |args: &[&str]| {
        let mut v = vec![bat.clone()];
        v.extend(s(args));
        v
    };
    let far = format!("HEAD~{}", n - 1);
    let git_fmt = "--format=%H %P %T %an %at %s";
    println!("\n{what}: {n} commits ({runs} runs; ms median [min-max]; ratio bat/git per pair)");
    println!(
        "  {:<30} {:>22}  {:>22}  {:>8}",
        "command", "bat", "git", "bat/git"
    );
    let g = |args: &[&str]| git.map(|d| (d, s(&[&["git"], args].concat())));
    compare(
        "log -n 20 (first screen)",
        bat_dir,
        b(&["log", "-n", "20"]),
        g(&["log", "-n", "20"]),
        runs,
    );
    let (_, log_rss) = compare("log (full)", bat_dir, b(&["log"]), g(&["log"]), runs);
    compare(
        "log --json / git log --format",
        bat_dir,
        b(&["log", "--json"]),
        g(&["log", git_fmt]),
        runs,
    );
    compare(
        "HEAD~(n-1) / git rev-parse",
        bat_dir,
        b(&["log", "-n", "1", &far]),
        g(&["rev-parse", &far]),
        runs,
    );
    compare(
        "show HEAD",
        bat_dir,
        b(&["show"]),
        g(&["show", "--stat"]),
        runs,
    );
    compare(
        "diff HEAD~1 HEAD",
        bat_dir,
        b(&["diff", "HEAD~1", "HEAD"]),
        g(&["diff", "HEAD~1", "HEAD"]),
        runs,
    );
    compare(
        "diff HEAD~(n-1) HEAD",
        bat_dir,
        b(&["diff", &far, "HEAD"]),
        g(&["diff", &far, "HEAD"]),
        runs,
    );
    compare("stats", bat_dir, b(&["stats"]), None, runs);
    let (bytes, files) = dir_stats(&bat_dir.join(".bat"));
    println!(
        "  ledger before gc: {:.1} MiB in {files} files",
        bytes as f64 / (1 << 20) as f64
    );
    print_split(&bat_dir.join(".bat"));
    // The first gc consolidates the packs; the later ones find nothing to do.
    let (t, _) = run_once(bat_dir, &b(&["gc"]));
    println!("  {:<30} {:>8.1} (one run)", "gc (consolidating)", t * 1e3);
    compare("gc (nothing to do)", bat_dir, b(&["gc"]), None, runs.min(3));
    compare(
        "fsck / git fsck",
        bat_dir,
        b(&["fsck"]),
        g(&["fsck", "--no-dangling"]),
        runs.min(3),
    );
    let (bytes, files) = dir_stats(&bat_dir.join(".bat"));
    println!(
        "  ledger after gc: {:.1} MiB in {files} files; peak RSS of bat log: {:.1} MiB",
        bytes as f64 / (1 << 20) as f64,
        log_rss as f64 / 1024.0
    );
    print_split(&bat_dir.join(".bat"));
    if let Some(d) = git {
        let (gb, gf) = dir_stats(&d.join(".git"));
        let (_, grss) = run_once(d, &s(&["git", "log"]));
        println!(
            "  git repository: {:.1} MiB in {gf} files; peak RSS of git log: {:.1} MiB",
            gb as f64 / (1 << 20) as f64,
            grss as f64 / 1024.0
        );
    }
}

fn main() {
    let mut sizes: Vec<u64> = Vec::new();
    let mut sims: Vec<u64> = Vec::new();
    let mut runs: Option<usize> = None;
    let mut keep: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()),
            "--keep" => keep = args.next().map(PathBuf::from),
            "--sim" => sims.extend(args.next().and_then(|v| v.parse::<u64>().ok())),
            other => sizes.push(other.parse().expect("sizes are numbers")),
        }
    }
    if sizes.is_empty() && sims.is_empty() {
        sizes = vec![1000, 10_000, 100_000];
    }
    println!(
        "bench_history: plain ledgers built through the library fast path (Ledger::commit_chain, \
         1,000 commits per pack segment), git repositories through git fast-import; \
         then every command is a whole `bat`/`git` process."
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = keep.unwrap_or_else(|| tmp.path().to_path_buf());
    for &n in &sizes {
        let (bd, gd) = (root.join(format!("bat-{n}")), root.join(format!("git-{n}")));
        let t = Instant::now();
        build_bat(&bd, n);
        let tb = t.elapsed().as_secs_f64();
        let t = Instant::now();
        build_git(&gd, n);
        let tg = t.elapsed().as_secs_f64();
        println!("\nbuilt {n} commits: bat (library) {tb:.1} s, git fast-import {tg:.1} s");
        let r = runs.unwrap_or(if n >= 100_000 { 3 } else { 5 });
        bench_ledger("plain commits", n, &bd, Some(&gd), r);
    }
    for &n in &sims {
        let bd = root.join(format!("sim-{n}"));
        if bd.join(".bat").is_dir() {
            // A campaign kept by an earlier `--keep` run: minutes to rebuild.
            println!("\nreusing the {n}-round campaign in {}", bd.display());
        } else {
            let t = Instant::now();
            build_sim(&bd, n);
            println!(
                "\nbuilt {n} simulator rounds with `bat run --backend sim` in {:.1} s",
                t.elapsed().as_secs_f64()
            );
        }
        // The git counterpart has as many commits as the campaign's history.
        let commits = Ledger::discover(&bd)
            .and_then(|l| {
                let head = l.resolve("HEAD")?;
                Ok(l.history(head, None)?.count() as u64)
            })
            .expect("count the campaign's commits");
        print_round_commit_sizes(&bd);
        let gd = root.join(format!("git-sim-{n}"));
        let _ = std::fs::remove_dir_all(&gd);
        build_git(&gd, commits);
        let r = runs.unwrap_or(3);
        bench_ledger(
            &format!("simulator rounds (git: {commits} plain commits)"),
            n,
            &bd,
            Some(&gd),
            r,
        );
        // The same listing against git commits that carry as much text: each
        // message is the metadata JSON of the bat commit at that position.
        let metas = campaign_metadata(&bd);
        let gm = root.join(format!("git-sim-meta-{n}"));
        let _ = std::fs::remove_dir_all(&gm);
        build_git_with(&gm, metas.len() as u64, |k| {
            format!("{}\n", metas[k as usize])
        });
        let bat = bat_exe().display().to_string();
        println!("  against git commits whose messages carry the same metadata JSON:");
        compare(
            "log --json / git log --format=..%B",
            &bd,
            vec![bat, "log".into(), "--json".into()],
            Some((
                gm.as_path(),
                s(&["git", "log", "--format=%H %P %T %an %at %B"]),
            )),
            r,
        );
    }
}
