//! Custom metrics from the user's side, on a `bat demo` ledger: the
//! numbers of each round's training-health file and its per-track and
//! per-stage scores are columns of `bat export`, rows of `bat query`'s
//! `metrics` table and curves of `bat report --metric`; plus the small
//! export/query fixes of issue 31 (`export --json` prints JSON, read-only
//! PRAGMAs run, the latest round is found exactly).

use std::path::Path;

use serde_json::{Map, Value};

use crate::common::{self, TestEnv};

/// The fixed columns before the metric columns (`bat query`'s `rounds`).
fn fixed_columns(dir: &Path) -> Vec<String> {
    let v = common::json(dir, &["query", "PRAGMA table_info(rounds)"]);
    v.as_array()
        .expect("rows")
        .iter()
        .map(|r| r["name"].as_str().expect("a column name").to_string())
        .collect()
}

/// A JSON file of a commit, read with `bat cat`.
fn cat_json(dir: &Path, commit: &str, path: &str) -> Value {
    let out = common::succeeded(common::output(dir, &["cat", &format!("{commit}:{path}")]));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn jsonl_rows(dir: &Path, branch: &str) -> Vec<Map<String, Value>> {
    common::ok(dir, &["export", "--format", "jsonl", branch])
        .lines()
        .map(|l| serde_json::from_str(l).expect("one object per line"))
        .collect()
}

#[test]
fn export_has_health_and_eval_metric_columns_in_a_stable_order() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 3);
    let dir = &demo.dir;
    let fixed = fixed_columns(dir);
    assert_eq!(fixed.first().map(String::as_str), Some("branch"));

    // CSV header: the fixed columns, then health.*, eval.track.*,
    // eval.stage.*, each group sorted.
    let csv = common::ok(dir, &["export", "main", &demo.replay_branch]);
    let header: Vec<&str> = csv.lines().next().expect("a header").split(',').collect();
    assert_eq!(&header[..fixed.len()], fixed.as_slice());
    let extra = &header[fixed.len()..];
    let group = |p: &str| {
        extra
            .iter()
            .copied()
            .filter(|c| c.starts_with(p))
            .collect::<Vec<&str>>()
    };
    let (health, tracks, stages) = (group("health."), group("eval.track."), group("eval.stage."));
    assert_eq!(health.len() + tracks.len() + stages.len(), extra.len());
    let mut want: Vec<&str> = Vec::new();
    for mut g in [health.clone(), tracks.clone(), stages.clone()] {
        g.sort_unstable();
        want.extend(g);
    }
    assert_eq!(
        extra,
        want.as_slice(),
        "metric columns are grouped and sorted"
    );
    assert!(health.contains(&"health.sim.kl_to_reference"), "{health:?}");
    assert!(health.contains(&"health.compute.steps"), "{health:?}");
    assert!(
        !health.iter().any(|c| c.ends_with(".status")),
        "strings are not metrics"
    );
    assert!(!tracks.is_empty());
    assert_eq!(
        stages,
        [
            "eval.stage.S1",
            "eval.stage.S2",
            "eval.stage.S3",
            "eval.stage.S4",
            "eval.stage.S5"
        ]
    );
    // Same columns and same width on every line.
    for line in csv.lines().skip(1) {
        assert_eq!(line.split(',').count(), header.len(), "{line}");
    }

    // The values are the files' numbers.
    for row in jsonl_rows(dir, "main") {
        let commit = row["commit"].as_str().expect("commit");
        let h = cat_json(dir, commit, "training-health.json");
        assert_eq!(
            row["health.sim.kl_to_reference"].as_f64(),
            h["sim"]["kl_to_reference"].as_f64()
        );
        assert_eq!(row["health.seed"].as_f64(), h["seed"].as_f64());
        let s = cat_json(dir, commit, "candidate-eval/summary.json");
        for (name, v) in s["track_scores"].as_object().expect("track scores") {
            assert_eq!(
                row[&format!("eval.track.{name}")].as_f64(),
                v.as_f64(),
                "{name}"
            );
        }
        for st in ["S1", "S2", "S3", "S4", "S5"] {
            assert_eq!(row[&format!("eval.stage.{st}")], row[st], "{st}");
        }
    }

    // `--json` without `-o` prints JSON: one array of the same objects.
    let j = common::json(dir, &["export", "main"]);
    let arr = j.as_array().expect("an array of rows");
    let rows = jsonl_rows(dir, "main");
    assert_eq!(arr.len(), rows.len());
    for (a, b) in arr.iter().zip(&rows) {
        assert_eq!(a.as_object(), Some(b));
    }
}

#[test]
fn query_metrics_table_pragmas_and_the_exact_latest_round() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 3);
    let dir = &demo.dir;

    // One metrics row per (round, key), the same values as the export.
    let export = jsonl_rows(dir, "main");
    let q = common::json(
        dir,
        &[
            "query",
            "SELECT \"commit\", branch, round_id, round_number, source, key, value FROM metrics \
             WHERE branch = 'main' ORDER BY rowid",
            "main",
        ],
    );
    let q = q.as_array().expect("rows");
    let mut n = 0;
    for row in &export {
        for (k, v) in row.iter().filter(|(k, v)| k.contains('.') && !v.is_null()) {
            let hit = q
                .iter()
                .find(|m| m["commit"] == row["commit"] && m["key"] == k.as_str())
                .unwrap_or_else(|| panic!("{k} of {} is in metrics", row["round_id"]));
            assert_eq!(hit["value"].as_f64(), v.as_f64(), "{k}");
            assert_eq!(hit["round_id"], row["round_id"]);
            assert_eq!(hit["round_number"], row["round_number"]);
            let source = k.rsplit_once('.').map(|(p, _)| p).expect("dotted");
            assert!(
                source.starts_with(hit["source"].as_str().expect("source")),
                "{k} has source {}",
                hit["source"]
            );
            n += 1;
        }
    }
    assert_eq!(n, q.len(), "no metrics row without an export cell");
    let sources = common::json(
        dir,
        &[
            "query",
            "SELECT DISTINCT source FROM metrics ORDER BY source",
        ],
    );
    assert_eq!(
        sources,
        serde_json::json!([{"source": "eval.stage"}, {"source": "eval.track"}, {"source": "health"}])
    );

    // Read-only PRAGMAs run (docs/query.md), writing ones are refused.
    let cols = common::json(dir, &["query", "PRAGMA table_info(metrics)"]);
    let names: Vec<&str> = cols
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "commit",
            "branch",
            "round_id",
            "round_number",
            "source",
            "key",
            "value"
        ]
    );
    assert!(fixed_columns(dir).len() >= 35);
    let text = common::ok(dir, &["query", "PRAGMA main.table_xinfo(rounds)"]);
    assert!(text.contains("audit_gap"), "{text}");
    for sql in [
        "PRAGMA query_only(0)",
        "PRAGMA query_only = OFF",
        "PRAGMA main.query_only(false)",
    ] {
        let (code, err) = common::fails(dir, &["query", sql]);
        assert_eq!(code, 2, "{sql}: {err}");
        assert!(err.contains("read-only"), "{sql}: {err}");
    }

    // The docs' latest-round example orders exactly: the demo commits its
    // rounds within the same second, where `ORDER BY time` would tie.
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/query.md"))
        .expect("docs/query.md");
    assert!(
        !doc.contains("ORDER BY time"),
        "docs/query.md orders by time"
    );
    let latest = common::json(
        dir,
        &[
            "query",
            "SELECT round_id FROM rounds WHERE branch = 'main' ORDER BY rowid DESC LIMIT 1",
        ],
    );
    let last = export.last().expect("rounds");
    assert_eq!(latest[0]["round_id"], last["round_id"]);
    assert_eq!(last["round_id"], "r03");
}

#[test]
fn report_plots_chosen_metrics_and_refuses_unknown_ones_listing_the_known() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 3);
    let dir = &demo.dir;
    let file = env.path("report.html");
    let f = file.to_str().expect("utf-8");
    common::ok(
        dir,
        &[
            "report",
            "main",
            &demo.replay_branch,
            "--no-drift",
            "--metric",
            "health.sim.kl_to_reference",
            "--metric",
            "eval.stage.S2",
            "-o",
            f,
        ],
    );
    let html = std::fs::read_to_string(&file).expect("the report");
    let rounds = jsonl_rows(dir, "main").len() + jsonl_rows(dir, &demo.replay_branch).len();
    for (id, title) in [
        (
            "plot-metric-health-sim-kl-to-reference",
            "health.sim.kl_to_reference",
        ),
        ("plot-metric-eval-stage-S2", "eval.stage.S2"),
    ] {
        // Every round of both arms is a point.
        let tag = format!(r#"id="{id}" class="plot" data-points="{rounds}""#);
        assert!(html.contains(&tag), "{id} draws {rounds} points");
        assert!(html.contains(&format!("<figcaption>{title}</figcaption>")));
    }
    // Without --metric there is no such section.
    common::ok(dir, &["report", "main", "--no-drift", "-o", f]);
    let plain = std::fs::read_to_string(&file).expect("the report");
    assert!(!plain.contains("plot-metric-"));

    let (code, err) = common::fails(
        dir,
        &[
            "report",
            "main",
            "--no-drift",
            "--metric",
            "health.nope",
            "-o",
            f,
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("health.nope"), "{err}");
    assert!(err.contains("known metrics: "), "{err}");
    assert!(err.contains("health.sim.kl_to_reference"), "{err}");
    assert!(err.contains("eval.track."), "{err}");
}

/// Attach to each round of `main` an audit whose every cell is `0.1 × (n −
/// k)` above the gating one at round k of n (capped at 1): the audit gap
/// (gating − audit) rises by about 0.1 per round, far more than the
/// bootstrap's noise on 84 cells.
fn rising_audits(dir: &Path, tmp: &Path) {
    let rounds = jsonl_rows(dir, "main");
    for (k, r) in rounds.iter().enumerate() {
        let commit = r["commit"].as_str().expect("commit");
        let mut s = cat_json(dir, commit, "candidate-eval/summary.json");
        let d = 0.1 * (rounds.len() - 1 - k) as f64;
        for c in s["cells"].as_array_mut().expect("cells") {
            for f in ["overall_score", "task_score", "agentic_score"] {
                let v = c[f].as_f64().expect("a score");
                c[f] = (v + d).min(1.0).into();
            }
        }
        let o = s["means"]["overall"].as_f64().expect("overall");
        s["means"]["overall"] = (o + d).min(1.0).into();
        let f = tmp.join(format!("audit-{k}.json"));
        std::fs::write(&f, serde_json::to_vec(&s).expect("encode")).expect("write");
        common::ok(
            dir,
            &[
                "eval",
                "attach",
                commit,
                "--summary",
                common::utf8(&f),
                "--role",
                "audit",
                "--protocol-id",
                "audit-b",
            ],
        );
    }
}

#[test]
fn arm_groups_and_confidence_intervals_in_export_query_report_and_log() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 3);
    let dir = &demo.dir;
    let replay = demo.replay_branch.as_str();
    let glob = format!("{}*", &replay[..replay.len() - 2]);

    // An arm group stands for its branches in export.
    let rows = common::json(dir, &["export", glob.as_str()]);
    let branches: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["branch"].as_str())
        .collect();
    assert!(
        !branches.is_empty() && branches.iter().all(|b| *b == replay),
        "{branches:?}"
    );
    let (code, err) = common::fails(dir, &["export", "nomatch/*"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nomatch/*"), "{err}");

    // CI rows: one arm per name, the bootstrap stated in every row.
    let group = format!("main,{replay}");
    let ci_args = [
        "export",
        "--ci",
        "--resamples",
        "400",
        "main",
        group.as_str(),
    ];
    let ci = common::json(dir, &ci_args);
    let ci = ci.as_array().expect("rows");
    let again = common::json(dir, &ci_args);
    assert_eq!(again.as_array(), Some(ci), "same flags, same intervals");
    let per_round: Vec<&Value> = ci
        .iter()
        .filter(|r| r["arm"] == "main" && r["score"] == "overall" && !r["round"].is_null())
        .collect();
    assert_eq!(per_round.len(), 3);
    for (k, r) in per_round.iter().enumerate() {
        assert_eq!(r["round"], (k + 1) as i64);
        assert_eq!(r["scheme"], "runs");
        assert_eq!(r["resamples"], 400);
        assert_eq!(r["seed"], 0);
        let (lo, m, hi) = (
            r["ci_low"].as_f64().expect("low"),
            r["mean"].as_f64().expect("mean"),
            r["ci_high"].as_f64().expect("high"),
        );
        assert!(lo <= m && m <= hi && lo < hi, "{r}");
    }
    let members: Vec<&Value> = ci.iter().map(|r| &r["members"]).collect();
    assert!(
        members.contains(&&Value::from(group.clone())),
        "{members:?}"
    );
    assert!(ci
        .iter()
        .any(|r| r["arm"] == "main" && r["round"].is_null() && r["score"] == "S3"));
    // The CSV has the same rows; the query table too.
    let csv = common::ok(
        dir,
        &[
            "export",
            "--ci",
            "--resamples",
            "400",
            "main",
            group.as_str(),
        ],
    );
    assert!(csv.starts_with("arm,members,round,round_ids,score,mean,ci_low,ci_high,iqm,runs,scheme,resamples,seed,level\n"));
    assert_eq!(csv.lines().count(), ci.len() + 1);
    let q = common::json(
        dir,
        &[
            "query",
            "--resamples",
            "400",
            "SELECT * FROM arm_scores ORDER BY rowid",
            "main",
            group.as_str(),
        ],
    );
    assert_eq!(q.as_array().map(Vec::len), Some(ci.len()));
    for (a, b) in q.as_array().expect("rows").iter().zip(ci) {
        assert_eq!(a["mean"], b["mean"]);
        assert_eq!(a["ci_low"], b["ci_low"]);
        assert_eq!(a["score"], b["score"]);
    }

    // Report: one band per arm, the bootstrap named.
    let file = env.path("arms.html");
    let f = common::utf8(&file);
    common::ok(
        dir,
        &[
            "report",
            "--no-drift",
            "--resamples",
            "400",
            "main",
            group.as_str(),
            "-o",
            f,
        ],
    );
    let html = std::fs::read_to_string(&file).expect("the report");
    assert!(
        html.contains(r#"id="plot-arms-overall" class="plot" data-points="6""#),
        "two arms × 3 rounds"
    );
    // One band plot per score (Overall first), each with a band per arm.
    let plots = html.matches(r#"id="plot-arms-"#).count();
    assert!(
        html.contains(r#"id="plot-arms-S3""#),
        "every score has its bands"
    );
    assert_eq!(html.matches(r#"<polygon class="band""#).count(), 2 * plots);
    assert!(html.contains("scheme <code>runs</code>, 400 resamples, seed 0"));
    assert!(!html.contains("data-rising=\"true\""));

    // A rising audit gap is flagged in report and log, with its figure.
    rising_audits(dir, env.root());
    let text = common::ok(
        dir,
        &[
            "report",
            "--no-drift",
            "--resamples",
            "400",
            "main",
            "-o",
            f,
        ],
    );
    assert!(
        text.contains("audit gap rising in main: slope +0."),
        "{text}"
    );
    assert!(text.contains("per round, 95% CI [+0."), "{text}");
    let html = std::fs::read_to_string(&file).expect("the report");
    assert!(
        html.contains(r#"<tr data-arm="main" data-rising="true">"#),
        "the slope row is flagged"
    );
    let log = common::ok(dir, &["log", "main"]);
    // The line after the table, with its figure (the demo is seeded, the
    // bootstrap too).
    insta::assert_snapshot!(log.lines().last().unwrap_or(""), @"audit gap rising: slope +0.1000 per round, 95% CI [+0.1000, +0.1000] (gating − audit Overall; 10000 resamples, seed 0): the gating scorer may be overfit");
    let log = common::ok(dir, &["log", replay]);
    assert!(!log.contains("audit gap rising"), "{log}");
}
