//! Hostile input, bounded (issue 35, parts 3–6), each test written as the
//! attack: SQL that never ends or grows without bound, values wider than a
//! terminal table, endless input streams for every verb that reads a file
//! or stdin, output targets inside the ledger's own directory, and a
//! bundle whose branch records one round id twice.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::ledger::{bat, fails, ledger_state, new_ledger};
use crate::common::{bat_in, isolate, stderr, text};

/// A ledger with one plain commit (`data/a.txt`) on `main`.
fn one_commit() -> tempfile::TempDir {
    let t = new_ledger();
    let d = t.path().join("data");
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(d.join("a.txt"), b"a").expect("write");
    bat(t.path())
        .args(["commit", "data", "-m", "one"])
        .assert()
        .success();
    t
}

/// The resident set of a running process in KiB (0 once it is gone).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// What a child did: its exit code, stderr, the largest resident set seen
/// while it ran (sampled every 10 ms) and how long it took.
struct Watched {
    code: Option<i32>,
    stderr: String,
    peak_mib: u64,
    took: Duration,
}

/// Wait for `child` (stdout discarded, stderr piped), sampling its memory;
/// killed after `limit` so a regression fails instead of hanging.
fn watch(mut child: Child, limit: Duration) -> Watched {
    let started = Instant::now();
    let pid = child.id();
    let mut peak = 0;
    let status = loop {
        peak = peak.max(rss_kib(pid));
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    Watched {
        code: status.code(),
        stderr: err,
        peak_mib: peak / 1024,
        took,
    }
}

fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bat")
}

fn query(dir: &Path, args: &[&str]) -> Command {
    let mut c = bat_in(dir);
    c.arg("query").args(args);
    c
}

const ENDLESS_COUNT: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

#[test]
fn a_recursive_cte_without_end_stops_at_the_time_limit() {
    let t = one_commit();
    let w = watch(
        spawn(query(t.path(), &[ENDLESS_COUNT, "--timeout", "1s"])),
        Duration::from_secs(60),
    );
    assert_eq!(w.code, Some(1), "{}", w.stderr);
    assert!(
        w.stderr.contains("time limit of 1s") && w.stderr.contains("--timeout"),
        "{}",
        w.stderr
    );
    assert!(w.took < Duration::from_secs(20), "took {:?}", w.took);
    println!("endless CTE stopped after {:?}", w.took);
}

#[test]
fn a_string_building_cte_stops_at_the_memory_limit_with_memory_bounded() {
    let t = one_commit();
    // Doubles a string each step: SQLite's heap is what grows.
    let doubling =
        "WITH RECURSIVE s(x) AS (SELECT 'ab' UNION ALL SELECT x || x FROM s) SELECT length(x) FROM s";
    // 100 kB rows without end: the result held for printing is what grows.
    let rows = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) \
                SELECT printf('%.*c', 100000, 'x') FROM c";
    for (sql, what) in [
        (doubling, "SQLite's working memory"),
        (rows, "the rows of the result"),
    ] {
        let w = watch(
            spawn(query(
                t.path(),
                &[sql, "--max-memory", "64MiB", "--timeout", "5m"],
            )),
            Duration::from_secs(120),
        );
        assert_eq!(w.code, Some(1), "{}", w.stderr);
        assert!(
            w.stderr.contains("memory limit of 64 MiB")
                && w.stderr.contains(what)
                && w.stderr.contains("--max-memory"),
            "{}",
            w.stderr
        );
        // The limit plus the process itself and one value in flight.
        assert!(w.peak_mib < 400, "peak RSS {} MiB for {what}", w.peak_mib);
        println!(
            "{what}: refused after {:?}, peak RSS {} MiB",
            w.took, w.peak_mib
        );
    }
}

#[test]
fn ctrl_c_stops_a_running_query() {
    let t = one_commit();
    let child = spawn(query(t.path(), &[ENDLESS_COUNT, "--timeout", "1h"]));
    std::thread::sleep(Duration::from_millis(800));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let w = watch(child, Duration::from_secs(30));
    assert_eq!(w.code, Some(130), "{}", w.stderr);
    assert!(w.stderr.contains("interrupted"), "{}", w.stderr);
}

#[test]
fn limit_flags_refuse_nonsense() {
    let t = one_commit();
    for args in [
        ["SELECT 1", "--timeout", "0s"],
        ["SELECT 1", "--timeout", "soon"],
        ["SELECT 1", "--max-memory", "12"],
        ["SELECT 1", "--max-memory", "lots"],
    ] {
        let out = fails(bat(t.path()).arg("query").args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    let out = bat(t.path())
        .args([
            "query",
            "SELECT 41 + 1 AS n",
            "--timeout",
            "2m",
            "--max-memory",
            "2GiB",
        ])
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text(&out.stdout).contains("42"));
}

#[test]
fn a_value_wider_than_a_table_is_cut_short_in_text_and_whole_in_json() {
    let t = one_commit();
    let long: String = "m".repeat(99_995) + "-tail";
    let d = t.path().join("data");
    std::fs::write(d.join("b.txt"), b"b").expect("write");
    bat(t.path())
        .args(["commit", "data", "-m", &long])
        .assert()
        .success();
    let sql = "SELECT message, length(message) AS n FROM commits ORDER BY n DESC";
    let out = bat(t.path()).args(["query", sql]).output().expect("spawn");
    assert!(out.status.success(), "{}", stderr(&out));
    let table = text(&out.stdout);
    assert!(
        table.contains("… (100000 chars; use --json for the full value)"),
        "{}",
        table.chars().take(600).collect::<String>()
    );
    assert!(
        !table.contains("-tail"),
        "the text table printed the whole value"
    );
    assert!(
        table.lines().all(|l| l.chars().count() < 400),
        "a line runs on"
    );
    let out = bat(t.path())
        .args(["--json", "query", sql])
        .output()
        .expect("spawn");
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v[0]["message"].as_str(), Some(long.as_str()));
    assert_eq!(v[0]["n"], 100_000);
}

/// One verb fed an endless stream: its arguments (`{zero}` is the endless
/// path), whether the stream comes on stdin instead, and what its error
/// must say (the cap, for a reader that reads the stream).
struct Endless {
    name: &'static str,
    args: &'static [&'static str],
    stdin: bool,
    says: &'static str,
}

/// What a capped JSON reader's refusal says.
const CAP: &str = "larger than 512 MiB";

/// Every verb that reads a file or stdin given by the user. A new verb that
/// reads one gets a row here.
const ENDLESS: &[Endless] = &[
    Endless {
        name: "reward score FILE",
        args: &["reward", "score", "{zero}"],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "reward score -",
        args: &["reward", "score", "-"],
        stdin: true,
        says: CAP,
    },
    Endless {
        name: "reward score --pack",
        args: &["reward", "score", "in.jsonl", "--pack", "{zero}"],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "eval summarize --raw",
        args: &[
            "eval",
            "summarize",
            "--raw",
            "{zero}",
            "--checkpoint-sha256",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "--output",
            "s.json",
        ],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "eval attach --summary",
        args: &[
            "eval",
            "attach",
            "HEAD",
            "--summary",
            "{zero}",
            "--role",
            "audit",
            "--protocol-id",
            "p1",
        ],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "gate --baseline",
        args: &[
            "gate",
            "--baseline",
            "{zero}",
            "--candidate",
            "{zero}",
            "--gate-output",
            "g.json",
            "--prescription-output",
            "p.json",
        ],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "firewall scan",
        args: &["firewall", "scan", "{zero}"],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "firewall scan --heldout-markers",
        args: &[
            "firewall",
            "scan",
            "in.jsonl",
            "--heldout-markers",
            "{zero}",
        ],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "commit --meta",
        args: &["commit", "data", "-m", "x", "--meta", "{zero}"],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "round build --source",
        args: &[
            "round",
            "build",
            "--source",
            "{zero}",
            "--source-sha256",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "--round-id",
            "r01",
            "--output-dir",
            "round-out",
        ],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "source build --pack",
        args: &[
            "source",
            "build",
            "--output-dir",
            "src-out",
            "--pack",
            "{zero}",
        ],
        stdin: false,
        says: CAP,
    },
    Endless {
        name: "serve --token-file",
        args: &["serve", "--bind", "127.0.0.1:0", "--token-file", "{zero}"],
        stdin: false,
        says: "larger than 1 MiB",
    },
    Endless {
        name: "bundle verify",
        args: &["bundle", "verify", "{zero}"],
        stdin: false,
        says: "bundle truncated",
    },
    Endless {
        name: "clone BUNDLE",
        args: &["clone", "{zero}", "cloned"],
        stdin: false,
        says: "no bat ledger",
    },
];

#[test]
fn every_reader_refuses_an_endless_stream_within_bounded_memory() {
    let t = one_commit();
    std::fs::write(t.path().join("in.jsonl"), b"{}\n").expect("write");
    println!(
        "{:<34} {:>5} {:>9} {:>9}",
        "verb", "exit", "seconds", "peak MiB"
    );
    for case in ENDLESS {
        let mut c = Command::new(crate::common::bat_exe());
        isolate(&mut c);
        c.current_dir(t.path());
        c.args(case.args.iter().map(|a| a.replace("{zero}", "/dev/zero")));
        if case.stdin {
            c.stdin(std::fs::File::open("/dev/zero").expect("/dev/zero"));
        } else {
            c.stdin(Stdio::null());
        }
        let w = watch(spawn(c), Duration::from_secs(120));
        println!(
            "{:<34} {:>5} {:>9.2} {:>9}",
            case.name,
            w.code.map_or("sig".into(), |c| c.to_string()),
            w.took.as_secs_f64(),
            w.peak_mib
        );
        assert!(
            matches!(w.code, Some(c) if c != 0 && c < 100),
            "{}: exit {:?}: {}",
            case.name,
            w.code,
            w.stderr
        );
        assert!(
            w.stderr.starts_with("error: "),
            "{}: {}",
            case.name,
            w.stderr
        );
        // A reader that read the stream names the cap; one that refused
        // it from its first bytes (a bundle's framing) says what it is not.
        assert!(w.stderr.contains(case.says), "{}: {}", case.name, w.stderr);
        // The cap (512 MiB) once, plus the process: never the stream.
        assert!(
            w.peak_mib < 1200,
            "{}: peak RSS {} MiB",
            case.name,
            w.peak_mib
        );
    }
    assert!(!t.path().join("cloned").exists());
}

/// Every verb that writes a path the user names, aimed inside `.bat`.
#[test]
fn no_verb_writes_its_output_inside_the_ledger_directory() {
    let t = one_commit();
    let w = t.path();
    std::os::unix::fs::symlink(w.join(".bat/packs"), w.join("packs-link")).expect("symlink");
    let bundle = w.join("ok.bundle");
    bat(w)
        .args(["bundle", "create"])
        .arg(&bundle)
        .assert()
        .success();
    let bundle = bundle.to_str().expect("utf-8").to_string();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("--to", vec!["checkout", "HEAD", "--to", ".bat/packs/x"]),
        ("--to", vec!["checkout", "HEAD", "--to", "packs-link/x"]),
        (
            "--to",
            vec!["checkout", "HEAD", "--to", "data/../.bat/new/dir"],
        ),
        ("-o", vec!["report", "-o", ".bat/report.html"]),
        ("-o", vec!["export", "-o", ".bat/rounds.csv"]),
        ("bundle file", vec!["bundle", "create", ".bat/b.bundle"]),
        ("destination", vec!["clone", &bundle, ".bat/clone"]),
        ("-o", vec!["man", "-o", ".bat/man"]),
        ("the demo directory", vec!["demo", ".bat/demo"]),
        ("--output", vec!["sim", "init", "--output", ".bat/policy"]),
        (
            "--output-dir",
            vec!["source", "build", "--output-dir", ".bat/src"],
        ),
        (
            "--output",
            vec![
                "eval",
                "summarize",
                "--raw",
                "in.json",
                "--checkpoint-sha256",
                "0000000000000000000000000000000000000000000000000000000000000000",
                "--output",
                ".bat/s.json",
            ],
        ),
        (
            "--gate-output",
            vec![
                "gate",
                "--baseline",
                "b.json",
                "--candidate",
                "c.json",
                "--gate-output",
                ".bat/g.json",
                "--prescription-output",
                "p.json",
            ],
        ),
    ];
    for (flag, args) in &cases {
        let before = ledger_state(w);
        let out = fails(bat(w).args(args));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("inside the ledger's own directory") && err.contains(flag),
            "{args:?}: {err}"
        );
        assert_eq!(ledger_state(w), before, "{args:?} changed the ledger");
    }
    for left in [".bat/packs/x", ".bat/new", ".bat/report.html", ".bat/man"] {
        assert!(!w.join(left).exists(), "{left} was written");
    }
    bat(w).arg("gc").assert().success();
    bat(w).arg("fsck").assert().success();
    // Next to the ledger is fine.
    bat(w)
        .args(["checkout", "HEAD", "--to", "out"])
        .assert()
        .success();
    assert!(w.join("out/a.txt").is_file());
}

/// Commit `round_id` as a round commit's metadata (crafted through the
/// ledger's library: `bat commit` refuses a repeated round id).
fn crafted_round(
    l: &mut bat_ledger::Ledger,
    tree: bat_ledger::TreeId,
    round_id: &str,
    n: u32,
) -> String {
    let mut req = bat_ledger::CommitRequest::new(format!("crafted {round_id} #{n}"));
    req.metadata = serde_json::json!({"kind": "bat_round", "round_id": round_id});
    req.time = Some(1_700_000_000 + i64::from(n));
    l.commit_tree(tree, &req)
        .expect("commit")
        .commit
        .to_string()
}

#[test]
fn a_bundle_recording_one_round_id_twice_is_refused_and_resolution_refuses_to_guess() {
    let src = one_commit();
    let s = src.path();
    let (first, second) = {
        let mut l = bat_ledger::Ledger::discover(s).expect("open");
        let tree = l
            .read_commit(&l.resolve("HEAD").expect("HEAD"))
            .expect("read")
            .tree;
        crafted_round(&mut l, tree, "r01", 1);
        let a = crafted_round(&mut l, tree, "r02", 2);
        let b = crafted_round(&mut l, tree, "r02", 3);
        (a, b)
    };
    // A ledger that already holds the duplicate: `show r02` names both.
    let out = fails(bat(s).args(["show", "r02"]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("round id r02 is ambiguous")
            && err.contains(&first[..12])
            && err.contains(&second[..12]),
        "{err}"
    );
    // The unique one still resolves.
    bat(s).args(["show", "r01"]).assert().success();
    let bundle = s.join("dup.bundle");
    bat(s)
        .args(["bundle", "create"])
        .arg(&bundle)
        .assert()
        .success();

    // Clone: refused, nothing left behind.
    let dst = tempfile::tempdir().expect("tempdir");
    let out = fails(bat(dst.path()).arg("clone").arg(&bundle).arg("c"));
    let err = stderr(&out);
    assert!(
        err.contains("records round r02 in 2 commits") && err.contains(&first[..12]),
        "{err}"
    );
    assert!(!dst.path().join("c").exists(), "the refused clone stayed");

    // Fetch into an existing ledger: refused, no ref moved, fsck clean.
    let other = one_commit();
    let o = other.path();
    bat(o)
        .args(["remote", "add", "dup"])
        .arg(&bundle)
        .assert()
        .success();
    let refs_before = text(
        &bat(o)
            .args(["--json", "branch", "-a"])
            .output()
            .expect("spawn")
            .stdout,
    );
    let out = fails(bat(o).args(["fetch", "dup"]));
    let err = stderr(&out);
    assert!(err.contains("records round r02 in 2 commits"), "{err}");
    let refs_after = text(
        &bat(o)
            .args(["--json", "branch", "-a"])
            .output()
            .expect("spawn")
            .stdout,
    );
    assert_eq!(refs_before, refs_after, "the refused fetch moved a ref");
    bat(o).arg("fsck").assert().success();
    bat(o).arg("gc").assert().success();
}

#[test]
fn a_push_recording_one_round_id_twice_is_refused_by_bat_serve() {
    use crate::common::serve::{Server, WRITE_TOKEN};
    let origin = one_commit();
    let srv = Server::with_tokens(origin.path(), origin.path(), &[]);
    let src = one_commit();
    let s = src.path();
    {
        let mut l = bat_ledger::Ledger::discover(s).expect("open");
        let tree = l
            .read_commit(&l.resolve("HEAD").expect("HEAD"))
            .expect("read")
            .tree;
        crafted_round(&mut l, tree, "r02", 1);
        crafted_round(&mut l, tree, "r02", 2);
    }
    bat(s).args(["branch", "dup"]).assert().success();
    bat(s)
        .args(["remote", "add", "origin", &srv.url])
        .assert()
        .success();
    let branches = || {
        text(
            &bat(origin.path())
                .args(["--json", "branch"])
                .output()
                .expect("spawn")
                .stdout,
        )
    };
    let before = branches();
    let out = fails(bat(s).args(["--token", WRITE_TOKEN, "push", "origin", "dup"]));
    let err = stderr(&out);
    assert!(err.contains("records round r02 in 2 commits"), "{err}");
    let after = branches();
    assert!(
        !after.contains("dup"),
        "the refused push made a branch: {after}"
    );
    assert_eq!(before, after);
    drop(srv);
    bat(origin.path()).arg("fsck").assert().success();
}
