//! Cross-check of `bat compare`'s statistics against rliable 1.2.0, the
//! reference implementation of Agarwal et al. (2021), on the same
//! (runs × tasks) score matrices: some exported from a simulator ledger,
//! some generated (ties, one run, all-equal scores, uneven scores). IQM and
//! the probability of improvement must agree to 1e-9; the default scheme's
//! 95% interval bounds (mean, IQM; P(A > B) on matrices of up to 12 tasks)
//! within 0.01 of rliable's stratified bootstrap, both at 20,000 resamples.
//!
//! Needs `BAT_TEST_RLIABLE_PYTHON`: the interpreter printed by
//! `examples/stats/setup-rliable-venv.sh`. Unset, the test skips with a
//! message; under `CI=true` it fails.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use bat::experiment::cells::{gather, matrix, Score};
use bat::experiment::stats::{
    bootstrap, improvement_dist, iqm, percentile_interval, probability_of_improvement, Bootstrap,
    ScoreMatrix, Stratum,
};

use crate::common::{bat_in, succeeded};

const REPS: usize = 20_000;

fn python() -> Option<PathBuf> {
    crate::common::external::file_from_env(
        "BAT_TEST_RLIABLE_PYTHON",
        "the output of `examples/stats/setup-rliable-venv.sh`",
    )
}

/// A (runs × tasks) matrix as bat's strata: one track, task j = column j.
fn strata(m: &[Vec<f64>]) -> ScoreMatrix {
    let tasks = m.first().map(Vec::len).unwrap_or(0);
    ScoreMatrix {
        strata: (0..tasks)
            .map(|j| Stratum {
                track: "t".into(),
                task: format!("task{j:03}"),
                runs: m.iter().map(|row| row[j]).collect(),
                seeds: Vec::new(),
            })
            .collect(),
    }
}

/// bat's strata as a (runs × tasks) matrix (every stratum the same size).
fn runs_by_tasks(m: &ScoreMatrix) -> Vec<Vec<f64>> {
    let n = m.strata.first().map(|s| s.runs.len()).unwrap_or(0);
    assert!(
        m.strata.iter().all(|s| s.runs.len() == n),
        "rliable needs a rectangular matrix"
    );
    (0..n)
        .map(|r| m.strata.iter().map(|s| s.runs[r]).collect())
        .collect()
}

/// A named case: arm A's and arm B's (runs × tasks) score matrices.
type Case = (String, Vec<Vec<f64>>, Vec<Vec<f64>>);

fn generated() -> Vec<Case> {
    let mut g = bat::experiment::stats::SplitMix64::for_resample(11, 22, 33);
    let mut u = move || (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut grid = |runs: usize, tasks: usize, levels: f64, shift: f64| -> Vec<Vec<f64>> {
        (0..runs)
            .map(|_| {
                (0..tasks)
                    .map(|_| {
                        let x = (u() * levels).floor() / levels + shift;
                        x.clamp(0.0, 1.0)
                    })
                    .collect()
            })
            .collect()
    };
    vec![
        // Scores on a coarse grid: many ties within and across arms.
        ("ties".into(), grid(5, 12, 4.0, 0.0), grid(5, 12, 4.0, 0.1)),
        (
            "one-run".into(),
            grid(1, 20, 100.0, 0.0),
            grid(1, 20, 100.0, 0.0),
        ),
        (
            "all-equal".into(),
            vec![vec![0.5; 8]; 4],
            vec![vec![0.5; 8]; 4],
        ),
        (
            "uneven".into(),
            grid(7, 9, 1000.0, 0.0),
            grid(3, 9, 1000.0, 0.2),
        ),
    ]
}

/// Two arms of a simulator ledger (a 2-round campaign and its
/// terminal-reward replay): their final Overall cells.
fn from_sim_ledger(dir: &Path) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    succeeded(
        crate::common::bat()
            .arg("init")
            .arg(dir)
            .output()
            .expect("init"),
    );
    succeeded(
        bat_in(dir)
            .args(["run", "--backend", "sim", "--rounds", "2", "--batches", "4"])
            .output()
            .expect("run"),
    );
    let out = succeeded(
        bat_in(dir)
            .args([
                "--json",
                "replay",
                "r01..r02",
                "--ablate",
                "reward=terminal",
            ])
            .output()
            .expect("replay"),
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("replay json");
    let branch = v["branch"].as_str().expect("branch").to_string();
    let l = bat_ledger::Ledger::discover(dir).expect("open");
    let m = |spec: &str| {
        let g = bat::experiment::arms::resolve_str(&l, spec).expect("arm");
        let cells = gather(&l, &g).expect("cells");
        let (_, e) = cells.members[0].final_checkpoint();
        runs_by_tasks(&matrix(e, &Score::Overall))
    };
    (m("main"), m(&branch))
}

/// rliable's interval of P(A > B) calls scipy's Mann–Whitney test once per
/// task per resample, which takes many minutes at 20,000 resamples for the
/// ledger's dozens of tasks on a loaded machine: that interval is checked on
/// the matrices of at most 12 tasks.
fn pi_interval(m: &[Vec<f64>]) -> bool {
    m.first().map(Vec::len).unwrap_or(0) <= 12
}

#[test]
fn iqm_improvement_and_intervals_agree_with_rliable() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cases = generated();
    let (a, b) = from_sim_ledger(&tmp.path().join("ledger"));
    cases.push(("sim-ledger".into(), a, b));

    let spec = json!({
        "reps": REPS,
        "cases": cases.iter().map(|(n, a, b)| json!({
            "name": n, "a": a, "b": b, "pi_interval": pi_interval(a),
        })).collect::<Vec<_>>(),
    });
    let input = tmp.path().join("cases.json");
    std::fs::write(&input, serde_json::to_vec(&spec).expect("json")).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/stats/rliable_check.py");
    let out = std::process::Command::new(&py)
        .arg(&script)
        .arg(&input)
        .output()
        .expect("spawn python");
    assert!(
        out.status.success(),
        "rliable_check.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("rliable json");

    let cfg = Bootstrap {
        resamples: REPS,
        ..Bootstrap::default()
    };
    for (name, a, b) in &cases {
        let r = &theirs[name.as_str()];
        let (ma, mb) = (strata(a), strata(b));
        let close = |what: &str, ours: f64, theirs: &Value, tol: f64| {
            let t = theirs
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: {what} missing"));
            assert!(
                (ours - t).abs() <= tol,
                "{name}: {what}: bat {ours} vs rliable {t} (tolerance {tol})"
            );
        };
        close("IQM of A", iqm(&ma), &r["iqm_a"], 1e-9);
        close("IQM of B", iqm(&mb), &r["iqm_b"], 1e-9);
        close(
            "P(A>B)",
            probability_of_improvement(&ma, &mb),
            &r["pi_ab"],
            1e-9,
        );
        close(
            "P(B>A)",
            probability_of_improvement(&mb, &ma),
            &r["pi_ba"],
            1e-9,
        );

        let d = &bootstrap(&[&ma], &[true], &cfg, 1)[0];
        let mean = d.mean_estimate(cfg.level);
        let iq = d.iqm_estimate(cfg.level);
        close("mean CI low", mean.lo, &r["ci_mean_a"][0], 0.01);
        close("mean CI high", mean.hi, &r["ci_mean_a"][1], 0.01);
        close("IQM CI low", iq.lo, &r["ci_iqm_a"][0], 0.01);
        close("IQM CI high", iq.hi, &r["ci_iqm_a"][1], 0.01);
        let mut pis = improvement_dist(&ma, &mb, &cfg, (1, 2));
        let (lo, hi) = percentile_interval(&mut pis, cfg.level);
        if pi_interval(a) {
            close("P(A>B) CI low", lo, &r["ci_pi_ab"][0], 0.01);
            close("P(A>B) CI high", hi, &r["ci_pi_ab"][1], 0.01);
        }
        eprintln!(
            "{name}: IQM {:.6} mean CI [{:.4}, {:.4}] (rliable [{:.4}, {:.4}]) P(A>B) {:.4} CI [{lo:.4}, {hi:.4}] (rliable [{:.4}, {:.4}])",
            iqm(&ma),
            mean.lo,
            mean.hi,
            r["ci_mean_a"][0].as_f64().unwrap_or(f64::NAN),
            r["ci_mean_a"][1].as_f64().unwrap_or(f64::NAN),
            probability_of_improvement(&ma, &mb),
            r["ci_pi_ab"][0].as_f64().unwrap_or(f64::NAN),
            r["ci_pi_ab"][1].as_f64().unwrap_or(f64::NAN),
        );
    }
}
