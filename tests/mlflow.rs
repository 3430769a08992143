//! `bat mirror mlflow`: a real `mlflow server` (SQLite backend store) on
//! 127.0.0.1 receives one run per branch with one point per round scalar at
//! step = round number, read back with MLflow's own Python client
//! (`examples/mlflow/read_runs.py`). A second mirror adds nothing; a round
//! added by `bat run --resume` (mirrored by its `--on-round` hook) appears
//! exactly once; a second arm gets its own run; a reset branch is refused
//! and then restarted into a new run.
//!
//! The server half needs `BAT_TEST_MLFLOW_PYTHON`: the interpreter printed
//! by `examples/mlflow/setup-mlflow-venv.sh`. Unset, it skips with a
//! message (and fails under CI=true). The error checks need no server.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{stderr, write_json, BatRunner, TestEnv};

fn python() -> Option<PathBuf> {
    crate::common::external::file_from_env(
        "BAT_TEST_MLFLOW_PYTHON",
        "the output of `examples/mlflow/setup-mlflow-venv.sh`",
    )
}

/// A free port on 127.0.0.1 (bound, then released for the server).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a port")
        .local_addr()
        .expect("its address")
        .port()
}

/// An `mlflow server` in its own process group, killed on drop.
struct Server {
    child: Child,
    uri: String,
}

impl Server {
    fn start(py: &Path, dir: &Path) -> Server {
        use std::os::unix::process::CommandExt;
        let port = free_port();
        let db = dir.join("mlflow.db");
        let log = std::fs::File::create(dir.join("server.log")).expect("server log");
        let child = Command::new(py)
            .args(["-m", "mlflow", "server", "--backend-store-uri"])
            .arg(format!("sqlite:///{}", db.display()))
            .arg("--default-artifact-root")
            .arg(dir.join("artifacts"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--workers", "1"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("spawn mlflow server");
        let mut server = Server {
            child,
            uri: format!("http://127.0.0.1:{port}"),
        };
        server.wait_ready(port, dir);
        server
    }

    /// Poll `GET /health` until it answers 200 (the first start creates
    /// the database; a loaded machine takes a while to import mlflow).
    fn wait_ready(&mut self, port: u16, dir: &Path) {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
                panic!("mlflow server exited ({status}):\n{log}");
            }
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut answer = String::new();
                if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                    .is_ok()
                    && s.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.")
                    && answer.contains(" 200 ")
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "mlflow server did not answer in 300 s:\n{}",
                std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The whole group: the server's web workers are its children.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

/// Two simulator arms: `main` (seed 0) and `arm/b` (seed 1), two rounds each.
fn ledger(t: &TestEnv) -> BatRunner {
    let b = t
        .init_ledger("ledger")
        .env("MLFLOW_TRACKING_URI", "")
        .env("MLFLOW_TRACKING_TOKEN", "");
    b.ok(&["run", "--backend", "sim", "--rounds", "2", "--batches", "2"]);
    b.ok(&[
        "run",
        "--backend",
        "sim",
        "--rounds",
        "2",
        "--batches",
        "2",
        "--branch",
        "arm/b",
        "--new",
        "--seed",
        "1",
    ]);
    b
}

/// `bat export` of a branch: round number → (Overall, time, commit).
fn exported(b: &BatRunner, branch: &str) -> BTreeMap<i64, (f64, i64, String)> {
    b.json(&["export", branch])
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["round_number"].as_i64().expect("round number"),
                (
                    r["overall"].as_f64().expect("overall"),
                    r["time"].as_i64().expect("time"),
                    r["commit"].as_str().expect("commit").to_string(),
                ),
            )
        })
        .collect()
}

/// What MLflow's client reads back: the runs by branch tag.
fn read_back(py: &Path, uri: &str, experiment: &str) -> (Value, BTreeMap<String, Value>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlflow/read_runs.py");
    let out = Command::new(py)
        .arg(&script)
        .args([uri, experiment])
        .output()
        .expect("spawn python");
    assert!(
        out.status.success(),
        "read_runs.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("reader JSON");
    let mut by_branch = BTreeMap::new();
    for r in v["runs"].as_array().expect("runs") {
        if let Some(b) = r["branch"].as_str() {
            assert!(
                by_branch.insert(b.to_string(), r.clone()).is_none(),
                "two active runs tagged bat.branch={b}"
            );
        }
    }
    (v, by_branch)
}

/// The metric points of a run's key as (step, value, timestamp).
fn history(run: &Value, key: &str) -> Vec<(i64, f64, i64)> {
    run["metrics"][key]
        .as_array()
        .unwrap_or_else(|| panic!("metric {key} in {:?}", run["metrics"]))
        .iter()
        .map(|p| {
            (
                p[0].as_i64().expect("step"),
                p[1].as_f64().expect("value"),
                p[2].as_i64().expect("timestamp"),
            )
        })
        .collect()
}

/// The run's points agree with `bat export`, one per round.
fn check_run(run: &Value, want: &BTreeMap<i64, (f64, i64, String)>, branch: &str) {
    let mut overall = history(run, "round/overall");
    overall.sort_by_key(|p| p.0);
    let steps: Vec<i64> = overall.iter().map(|p| p.0).collect();
    let rounds: Vec<i64> = want.keys().copied().collect();
    assert_eq!(steps, rounds, "{branch}: one round/overall point per round");
    for (step, v, ts) in &overall {
        let (o, time, commit) = &want[step];
        assert_eq!(v, o, "{branch} round {step}");
        assert_eq!(*ts, time * 1000, "{branch}: timestamp is the commit time");
        assert_eq!(
            run["tags"][format!("bat.round.{step:03}.commit")].as_str(),
            Some(commit.as_str()),
            "{branch} round {step}"
        );
    }
    let (last_round, (_, _, last_commit)) = want.iter().next_back().expect("rounds");
    assert_eq!(
        run["tags"]["bat.last_commit"].as_str(),
        Some(last_commit.as_str())
    );
    assert_eq!(
        run["tags"]["bat.last_round"].as_str(),
        Some(last_round.to_string().as_str())
    );
    for key in [
        "round/task",
        "round/agentic",
        "round/S1",
        "round/S5",
        "round/steps",
    ] {
        assert_eq!(history(run, key).len(), want.len(), "{branch} {key}");
    }
    let keys: Vec<&String> = run["metrics"]
        .as_object()
        .expect("metrics")
        .keys()
        .collect();
    for prefix in ["health/", "track/", "steps/"] {
        assert!(
            keys.iter().any(|k| k.starts_with(prefix)),
            "{prefix} in {keys:?}"
        );
    }
    let params = &run["params"];
    for p in [
        "bat.protocol_id",
        "bat.reward_version",
        "bat.pack_blake3",
        "bat.first_commit",
    ] {
        assert!(params[p].is_string(), "{branch}: param {p} in {params}");
    }
    assert_eq!(run["status"], "FINISHED");
}

fn mirror(b: &BatRunner, uri: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "--json",
        "mirror",
        "mlflow",
        "--tracking-uri",
        uri,
        "--experiment",
        "bat-test",
    ];
    args.extend_from_slice(extra);
    let out = b.output(&args);
    assert!(out.status.success(), "mirror failed: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("mirror JSON")
}

fn added(report: &Value, branch: &str) -> Vec<i64> {
    report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["branch"] == branch)
        .unwrap_or_else(|| panic!("{branch} in {report}"))["rounds_added"]
        .as_array()
        .expect("rounds_added")
        .iter()
        .map(|v| v.as_i64().expect("round"))
        .collect()
}

#[test]
fn mirror_refuses_bad_uris_and_names_an_unreachable_server() {
    let t = TestEnv::new();
    let b = t
        .init_ledger("ledger")
        .env("MLFLOW_TRACKING_URI", "")
        .env("MLFLOW_TRACKING_TOKEN", "");
    b.ok(&["run", "--backend", "sim", "--rounds", "1", "--batches", "2"]);
    let (code, err) = b.fails(&["mirror", "mlflow"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tracking-uri"), "{err}");
    let (code, err) = b.fails(&["mirror", "mlflow", "--tracking-uri", "sqlite:///x.db"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not an http:// or https:// URL"), "{err}");
    let (code, err) = b.fails(&[
        "mirror",
        "mlflow",
        "--tracking-uri",
        "http://me:secret@127.0.0.1:1",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("http://***@127.0.0.1:1") && !err.contains("secret"),
        "{err}"
    );
    let uri = format!("http://127.0.0.1:{}", free_port());
    let (code, err) = b.fails(&["mirror", "mlflow", "--tracking-uri", &uri]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("cannot reach the MLflow server at {uri}"))
            && err.contains("mlflow server"),
        "{err}"
    );
}

#[test]
fn rounds_reach_a_real_mlflow_server_once_each() {
    let Some(py) = python() else { return };
    let t = TestEnv::new();
    let b = ledger(&t);
    let server_dir = t.path("mlflow");
    std::fs::create_dir_all(&server_dir).expect("server dir");
    let server = Server::start(&py, &server_dir);
    let uri = server.uri.as_str();

    // A dry run writes nothing.
    let dry = mirror(&b, uri, &["--dry-run"]);
    assert_eq!(dry["experiment_created"], true, "{dry}");
    assert_eq!(added(&dry, "main"), vec![1, 2]);
    let (v, runs) = read_back(&py, uri, "bat-test");
    assert!(v["experiment_id"].is_null() && runs.is_empty(), "{v}");

    // First mirror: both arms, every round.
    let first = mirror(&b, uri, &[]);
    assert_eq!(added(&first, "main"), vec![1, 2], "{first}");
    assert_eq!(added(&first, "arm/b"), vec![1, 2], "{first}");
    // Second: nothing new, nothing duplicated.
    let second = mirror(&b, uri, &[]);
    assert!(added(&second, "main").is_empty() && added(&second, "arm/b").is_empty());
    let (_, runs) = read_back(&py, uri, "bat-test");
    assert_eq!(runs.len(), 2, "{runs:?}");
    check_run(&runs["main"], &exported(&b, "main"), "main");
    check_run(&runs["arm/b"], &exported(&b, "arm/b"), "arm/b");
    assert_eq!(runs["main"]["params"]["bat.seed"], "0");
    assert_eq!(runs["arm/b"]["params"]["bat.seed"], "1");
    let main_run = runs["main"]["run_id"].clone();

    // A third round by `bat run --resume`, mirrored by its on-round hook.
    b.ok(&["switch", "main"]);
    let hook = write_json(
        &t.path("hook.json"),
        json!([
            env!("CARGO_BIN_EXE_bat"),
            "-C",
            "{ledger}",
            "mirror",
            "mlflow",
            "--tracking-uri",
            uri,
            "--experiment",
            "bat-test",
            "{branch}"
        ]),
    );
    let out = b.output(&[
        "run",
        "--resume",
        "--rounds",
        "3",
        "--on-round",
        hook.to_str().expect("utf-8"),
    ]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("on-round hook succeeded"), "{err}");
    let after = mirror(&b, uri, &[]);
    assert!(
        added(&after, "main").is_empty(),
        "the hook mirrored it: {after}"
    );
    let (_, runs) = read_back(&py, uri, "bat-test");
    let want = exported(&b, "main");
    assert_eq!(want.len(), 3);
    check_run(&runs["main"], &want, "main");
    assert_eq!(runs["main"]["run_id"], main_run);
    check_run(&runs["arm/b"], &exported(&b, "arm/b"), "arm/b");

    // A reset branch is refused, then restarted into a new run.
    let r2 = &want[&2].2;
    b.ok(&["reset", r2]);
    let out = b.output(&[
        "mirror",
        "mlflow",
        "--tracking-uri",
        uri,
        "--experiment",
        "bat-test",
        "main",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no longer in the branch's history") && err.contains("--restart-diverged"),
        "{err}"
    );
    let restarted = mirror(&b, uri, &["--restart-diverged", "main"]);
    assert_eq!(added(&restarted, "main"), vec![1, 2], "{restarted}");
    let (v, runs) = read_back(&py, uri, "bat-test");
    check_run(&runs["main"], &exported(&b, "main"), "main");
    assert_ne!(runs["main"]["run_id"], main_run);
    let retired: Vec<&Value> = v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["run_id"] == main_run)
        .collect();
    assert_eq!(retired.len(), 1);
    assert_eq!(retired[0]["superseded_branch"], "main");
    assert!(retired[0]["branch"].is_null());
    drop(server);
}
