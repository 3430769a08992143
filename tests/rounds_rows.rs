//! Round rows (`bat::inspect::rounds`) of a `bat demo` ledger agree with
//! `bat log --json`, for the campaign and its terminal-reward replay, and
//! carry the audit gap `bat log` shows once an audit is attached.

use std::path::Path;

use bat::inspect::rounds::{round_rows, RoundRow};
use bat_ledger::Ledger;
use serde_json::Value;

use crate::common::bat_assert as bat;
use crate::common::TestEnv;

use crate::common::json as json_of;

/// `bat log --json` round entries, oldest first.
fn log_rounds(dir: &Path, rev: &str) -> Vec<Value> {
    let mut v: Vec<Value> = json_of(dir, &["log", rev])
        .as_array()
        .expect("an array")
        .iter()
        .filter(|e| e["metadata"]["kind"] == "bat_round")
        .cloned()
        .collect();
    v.reverse();
    v
}

fn rows(dir: &Path, rev: &str) -> Vec<RoundRow> {
    let l = Ledger::discover(dir).expect("open the demo ledger");
    let start = l.resolve(rev).expect("resolve");
    round_rows(&l, rev, start).expect("round rows")
}

fn assert_rows_match_log(rows: &[RoundRow], log: &[Value]) {
    assert_eq!(rows.len(), log.len());
    for (r, e) in rows.iter().zip(log) {
        let m = &e["metadata"];
        assert_eq!(r.commit.to_string(), e["id"].as_str().expect("id"));
        assert_eq!(Some(r.time), e["time"].as_i64());
        assert_eq!(r.parent.as_deref(), e["parents"][0].as_str());
        assert_eq!(r.round_id, m["round_id"].as_str().expect("round id"));
        assert_eq!(r.target_stage.as_deref(), m["target_stage"].as_str());
        assert_eq!(r.gate_status.map(|s| s.as_str()), m["gate_status"].as_str());
        assert_eq!(
            r.checkpoint.as_deref(),
            m["candidate_checkpoint_sha256"].as_str()
        );
        assert_eq!(r.replay_of.as_deref(), m["replay_of"].as_str());
        assert_eq!(r.ablation.as_deref(), m["ablation"].as_str());
        let s = &m["scores"];
        for (got, key) in [
            (r.overall, "overall"),
            (r.task, "task"),
            (r.agentic, "agentic"),
            (r.s1, "S1"),
            (r.s2, "S2"),
            (r.s3, "S3"),
            (r.s4, "S4"),
            (r.s5, "S5"),
        ] {
            assert_eq!(got, s[key].as_f64(), "{} {key}", r.round_id);
            assert!(got.is_some(), "{} {key} present", r.round_id);
        }
        assert_eq!(r.budget_steps, m["budget"]["trainer"]["steps"].as_f64());
        assert_eq!(r.audit_gap, e["audit"]["overall_gap"].as_f64());
        assert_eq!(
            r.audit_count as u64,
            e["audit"]["audits"].as_u64().unwrap_or(0)
        );
        assert!(r.steps.is_some() && r.rollouts.is_some() && r.tokens.is_some());
        assert!(r.trainer_wall_seconds.is_some());
    }
}

#[test]
fn rows_of_a_demo_ledger_match_bat_log_json() {
    let env = TestEnv::new();
    let demo = env.demo("demo", 3);
    let dir = demo.dir.clone();
    let replay = demo.replay_branch.as_str();

    let main = rows(&dir, "main");
    assert_rows_match_log(&main, &log_rounds(&dir, "main"));
    assert_eq!(
        main.iter().map(|r| r.round_id.as_str()).collect::<Vec<_>>(),
        ["r01", "r02", "r03"],
        "oldest first"
    );
    for r in &main {
        assert_eq!(r.branch, "main");
        assert_eq!(r.reward_mode.as_deref(), Some("stage"));
        assert_eq!(r.ablation, None);
        assert_eq!(r.promoted, r.gate_status.is_some_and(|s| s.is_promote()));
        assert!(!r.reverted);
    }

    let rep = rows(&dir, replay);
    assert_rows_match_log(&rep, &log_rounds(&dir, replay));
    for (r, o) in rep.iter().zip(&main) {
        assert_eq!(r.replay_of, Some(o.commit.to_string()));
        assert_eq!(r.reward_mode.as_deref(), Some("terminal"));
        assert_eq!(r.ablation.as_deref(), Some("reward=terminal"));
        assert_eq!(r.steps, o.steps, "same compute");
        assert_eq!(r.rollouts, o.rollouts, "same compute");
    }

    // Attach r02's own gating summary, shifted, as an audit: the row's gap
    // is the one `bat log --json` reports, and its audit Overall is the
    // shifted value.
    let r02 = &main[1];
    let out = bat()
        .arg("-C")
        .arg(&dir)
        .args([
            "cat",
            &format!("{}:candidate-eval/summary.json", r02.commit),
        ])
        .output()
        .expect("cat");
    assert!(out.status.success());
    let mut summary: Value = serde_json::from_slice(&out.stdout).expect("summary");
    let gating = summary["means"]["overall"].as_f64().expect("overall");
    summary["means"]["overall"] = (gating - 0.05).into();
    let f = env.path("audit.json");
    std::fs::write(&f, serde_json::to_vec(&summary).expect("encode")).expect("write");
    bat()
        .arg("-C")
        .arg(&dir)
        .args(["eval", "attach", &r02.commit.to_string(), "--summary"])
        .arg(&f)
        .args(["--role", "audit", "--protocol-id", "heldout-b"])
        .assert()
        .success();
    let main = rows(&dir, "main");
    assert_rows_match_log(&main, &log_rounds(&dir, "main"));
    let a = &main[1];
    assert_eq!(a.audit_count, 1);
    assert_eq!(a.audit_protocol.as_deref(), Some("heldout-b"));
    assert_eq!(a.audit_overall, Some(gating - 0.05));
    let gap = a.audit_gap.expect("a gap");
    assert!((gap + 0.05).abs() < 1e-12, "{gap}");
    assert_eq!(main[0].audit_count, 0);

    // A revert of r03's promotion marks that row (and only it) reverted.
    demo.bat().ok(&["revert", "r03"]);
    let main = rows(&dir, "main");
    assert_rows_match_log(&main, &log_rounds(&dir, "main"));
    assert_eq!(
        main.iter().map(|r| r.reverted).collect::<Vec<_>>(),
        [false, false, true]
    );
}
