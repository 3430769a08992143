//! `bat export` and `bat query` on a `bat demo` ledger: the values equal
//! `bat log --json`'s, the column set is docs/rounds.md's, and a query
//! cannot write.

use std::path::Path;

use serde_json::Value;

use crate::common::{self, output as run, Demo};

fn ok(out: std::process::Output) -> Vec<u8> {
    common::succeeded(out).stdout
}

/// (branch, commit) → the `bat log --json` entry of every round.
fn log_rounds(dir: &Path, branch: &str) -> Vec<Value> {
    let v: Value =
        serde_json::from_slice(&ok(run(dir, &["--json", "log", branch]))).expect("log JSON");
    let mut r: Vec<Value> = v
        .as_array()
        .expect("array")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .cloned()
        .collect();
    r.reverse();
    r
}

/// RFC 4180 fields of one line (no embedded newlines in these exports).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

const SCORES: [&str; 8] = ["overall", "task", "agentic", "S1", "S2", "S3", "S4", "S5"];

fn check_against_log(row: &serde_json::Map<String, Value>, e: &Value, branch: &str) {
    let m = &e["metadata"];
    let get = |k: &str| row.get(k).cloned().unwrap_or(Value::Null);
    assert_eq!(get("branch"), branch);
    assert_eq!(get("commit"), e["id"]);
    assert_eq!(get("round_id"), m["round_id"]);
    assert_eq!(get("target_stage"), m["target_stage"]);
    assert_eq!(get("gate_status"), m["gate_status"]);
    assert_eq!(get("checkpoint"), m["candidate_checkpoint_sha256"]);
    assert_eq!(get("time").as_i64(), e["time"].as_i64());
    for k in SCORES {
        let want = m["scores"][k].as_f64().expect("a score");
        assert_eq!(get(k).as_f64(), Some(want), "{branch} {k}");
    }
}

fn demo(tmp: &Path) -> (std::path::PathBuf, String) {
    let demo = Demo::build(&tmp.join("demo"), &["--rounds", "3", "--seeds", "1"]);
    (demo.dir, demo.replay_branch)
}

#[test]
fn export_and_query_agree_with_bat_log_and_queries_cannot_write() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (dir, replay) = demo(tmp.path());
    let main_log = log_rounds(&dir, "main");
    let replay_log = log_rounds(&dir, &replay);

    // JSONL of both arms, to stdout.
    let jsonl = String::from_utf8(ok(run(
        &dir,
        &["export", "--format", "jsonl", "main", &replay],
    )))
    .expect("utf-8");
    let rows: Vec<serde_json::Map<String, Value>> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert_eq!(rows.len(), 6);
    for (r, e) in rows[..3].iter().zip(&main_log) {
        check_against_log(r, e, "main");
        assert_eq!(r["reward_mode"], "stage");
    }
    for (r, e) in rows[3..].iter().zip(&replay_log) {
        check_against_log(r, e, &replay);
        assert_eq!(r["ablation"], "reward=terminal");
        assert_eq!(r["replay_of"], e["metadata"]["replay_of"]);
    }

    // CSV to a file, default branches (every local branch).
    let csv_path = tmp.path().join("rounds.csv");
    ok(run(
        &dir,
        &["export", "-o", csv_path.to_str().expect("utf-8")],
    ));
    let text = std::fs::read_to_string(&csv_path).expect("the export");
    let mut lines = text.lines();
    let header = csv_fields(lines.next().expect("a header"));
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rounds.md"))
        .expect("docs/rounds.md");
    for c in &header {
        let documented = doc.contains(&format!("| `{c}` |"))
            || (c.starts_with('S') && doc.contains("`S1` … `S5`"))
            || ((c.starts_with("health.") || c.starts_with("eval."))
                && doc.contains("## Custom metric columns"));
        assert!(documented, "column {c} is documented in docs/rounds.md");
    }
    let mut n = 0;
    for line in lines {
        let f = csv_fields(line);
        assert_eq!(f.len(), header.len());
        let row: serde_json::Map<String, Value> = header
            .iter()
            .zip(&f)
            .map(|(k, v)| {
                let val = if v.is_empty() {
                    Value::Null
                } else if let Ok(x) = v.parse::<i64>() {
                    Value::from(x)
                } else if let Ok(x) = v.parse::<f64>() {
                    Value::from(x)
                } else {
                    Value::from(v.clone())
                };
                (k.clone(), val)
            })
            .collect();
        let branch = row["branch"].as_str().expect("branch").to_string();
        // The demo's `main` names its first BaT seed, `bat/s0`.
        let log = if branch == "main" || branch == "bat/s0" {
            &main_log
        } else {
            &replay_log
        };
        let e = log
            .iter()
            .find(|e| e["id"] == row["commit"])
            .expect("the row's commit is in its branch's log");
        check_against_log(&row, e, &branch);
        n += 1;
    }
    assert_eq!(
        n, 9,
        "three branches (main = bat/s0, terminal/s0) of three rounds"
    );

    // SELECT over rounds equals the log.
    let q: Value = serde_json::from_slice(&ok(run(
        &dir,
        &[
            "--json",
            "query",
            "SELECT * FROM rounds WHERE branch = 'main' ORDER BY rowid",
            "main",
        ],
    )))
    .expect("query JSON");
    let q = q.as_array().expect("an array of rows");
    assert_eq!(q.len(), 3);
    for (r, e) in q.iter().zip(&main_log) {
        check_against_log(r.as_object().expect("object"), e, "main");
    }
    // The other tables answer too: commits, files, evals.
    let q: Value = serde_json::from_slice(&ok(run(
        &dir,
        &[
            "--json",
            "query",
            "SELECT (SELECT count(*) FROM commits WHERE kind = 'bat_round') AS rounds, \
             (SELECT count(*) FROM files WHERE path = 'candidate-eval/summary.json') AS summaries, \
             (SELECT count(*) FROM evals) AS audits",
        ],
    )))
    .expect("query JSON");
    assert_eq!(q[0]["rounds"], 6);
    assert_eq!(q[0]["summaries"], 6);
    assert_eq!(q[0]["audits"], 0);
    // Text output: a header, a rule, one line per row.
    let text = String::from_utf8(ok(run(
        &dir,
        &[
            "query",
            "SELECT round_id, overall FROM rounds WHERE branch='main'",
            "main",
        ],
    )))
    .expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("round_id"), "{text}");
    assert_eq!(lines.len(), 5, "{text}");

    // Writes are refused, and nothing was created.
    let evil = tmp.path().join("evil.db");
    for sql in [
        "DELETE FROM rounds".to_string(),
        "INSERT INTO rounds (branch) VALUES ('x')".to_string(),
        "CREATE TABLE t (x)".to_string(),
        "PRAGMA query_only=OFF".to_string(),
        format!("ATTACH DATABASE '{}' AS e", evil.display()),
        format!("VACUUM INTO '{}'", evil.display()),
        "SELECT 1; DELETE FROM rounds".to_string(),
    ] {
        let out = run(&dir, &["query", &sql]);
        assert!(!out.status.success(), "{sql} was refused");
        assert_eq!(out.status.code(), Some(2), "{sql}: usage error");
    }
    assert!(!evil.exists(), "no file was written by a query");
    let q: Value = serde_json::from_slice(&ok(run(
        &dir,
        &["--json", "query", "SELECT count(*) AS n FROM rounds"],
    )))
    .expect("query JSON");
    assert_eq!(q[0]["n"], 9, "main = bat/s0, bat/s0 and terminal/s0");
}
