//! Step metrics (`{metrics}`): a trainer's JSON Lines file is committed
//! with its round as `step-metrics.jsonl`, a bad line fails the round with
//! its line number, and `bat export --steps`, `bat query`'s `steps` table
//! and `bat report`'s step curves read them. The simulator writes them for
//! every round (deterministically: a replay verifies bit-exact with them).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::run::{example, logged_rounds, ok, Toy, TOY_TRAINER_ARGS};
use crate::common::{stderr, write_json, BatRunner, TestEnv};

/// A toy trainer template that first writes `lines` to `{metrics}`.
fn trainer_writing(t: &Toy, lines: &str) -> PathBuf {
    let sh = t.root.join("metrics-trainer.sh");
    std::fs::write(
        &sh,
        format!(
            "M=\"$1\"; shift\nprintf '%s' '{lines}' > \"$M\"\nexec '{}' \"$@\"\n",
            example("toy_trainer").display()
        ),
    )
    .expect("write the script");
    let mut v = vec![
        serde_json::json!("sh"),
        serde_json::json!(sh),
        serde_json::json!("{metrics}"),
    ];
    v.extend(TOY_TRAINER_ARGS.iter().map(|s| serde_json::json!(s)));
    write_json(&t.root.join("t-metrics.json"), Value::Array(v))
}

fn cat(ledger: &Path, rev: &str) -> String {
    let out = ok(crate::common::bat()
        .arg("-C")
        .arg(ledger)
        .args(["cat", &format!("{rev}:step-metrics.jsonl")])
        .output()
        .expect("spawn bat"));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn a_command_trainer_s_step_metrics_are_committed_and_queryable() {
    let t = Toy::new();
    let lines =
        "{\"step\":1,\"loss\":1.5,\"kl\":0}\n{\"step\":2,\"loss\":1.25,\"kl\":0.01,\"lr\":3e-6}\n";
    let trainer = trainer_writing(&t, lines);
    ok(t.run(&t.run_args(&trainer, &t.evaluator, 1)));
    let rounds = logged_rounds(&t.ledger);
    assert_eq!(rounds.len(), 1);
    assert_eq!(cat(&t.ledger, "HEAD"), lines, "committed byte for byte");

    let b = BatRunner::new(&t.ledger);
    let q = b.json(&[
        "query",
        "SELECT step, key, value FROM steps ORDER BY step, key",
    ]);
    let rows: Vec<(i64, String, f64)> = q
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["step"].as_i64().expect("step"),
                r["key"].as_str().expect("key").to_string(),
                r["value"].as_f64().expect("value"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (1, "kl".into(), 0.0),
            (1, "loss".into(), 1.5),
            (2, "kl".into(), 0.01),
            (2, "loss".into(), 1.25),
            (2, "lr".into(), 3e-6),
        ]
    );

    let csv = b.ok(&["export", "--steps"]);
    let mut it = csv.lines();
    assert_eq!(
        it.next(),
        Some("branch,round_id,round_number,commit,step,kl,loss,lr")
    );
    let second: Vec<&str> = it.nth(1).expect("two steps").split(',').collect();
    assert_eq!(second[4..], ["2", "0.01", "1.25", "3e-6"]);
    let first: Vec<&str> = csv.lines().nth(1).expect("a step").split(',').collect();
    assert_eq!(
        first[7], "",
        "a step without a metric leaves its cell empty"
    );
}

#[test]
fn a_bad_step_metrics_line_fails_the_round_with_its_number() {
    let t = Toy::new();
    let trainer = trainer_writing(
        &t,
        "{\"step\":1,\"loss\":1.5}\n\n{\"step\":2,\"loss\":\"high\"}\n",
    );
    let out = t.run(&t.run_args(&trainer, &t.evaluator, 1));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("invalid step metrics file"), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert!(
        err.contains("\"loss\" is \"high\", not a finite number"),
        "{err}"
    );
    let log = t.run(&["log".to_string()]);
    assert!(
        stderr(&log).contains("has no commits yet"),
        "nothing was committed: {}",
        stderr(&log)
    );
}

#[test]
fn the_simulator_writes_step_metrics_and_the_report_draws_them() {
    let env = TestEnv::new();
    let b = env.init_ledger("ledger");
    b.ok(&["run", "--backend", "sim", "--rounds", "2", "--batches", "2"]);
    let text = cat(b.dir(), "HEAD");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert!(!lines.is_empty());
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["step"], i as u64 + 1);
        for k in ["reward_mean", "kl", "tokens"] {
            assert!(l[k].is_number(), "{k} in {l}");
        }
    }
    // Deterministic: a replay verifies bit-exact, steps file included.
    let v = b.json(&["replay", "r02", "--verify"]);
    assert_eq!(v["reproduced"], true, "{v}");
    assert_eq!(v["rounds"][0]["verify"]["differing"], serde_json::json!([]));

    let steps = b.json(&["export", "--steps"]);
    assert_eq!(steps.as_array().expect("rows").len(), lines.len() * 2);

    let report = env.path("report.html");
    b.ok(&["report", "-o", report.to_str().expect("utf-8")]);
    let html = std::fs::read_to_string(&report).expect("report");
    let needle = "<svg id=\"plot-step-kl\" class=\"plot\" data-points=\"";
    let at = html.find(needle).expect("a step curve of kl") + needle.len();
    let n: usize = html[at..]
        .split('"')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("its point count");
    assert_eq!(n, lines.len() * 2, "every step of both rounds is drawn");
}
