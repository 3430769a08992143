//! Text rendering of an arm comparison, shared by `bat compare` and
//! `bat demo` (verbs do not import each other).

use super::table::{Align, Cell, Table};
use super::term::{Paint, Role};
use bat::experiment::compare::{Experiment, PairScore};
use bat::experiment::stats::{Estimate, Scheme, Verdict};
use bat::replay::compare::{ArmSummary, Comparison};

fn label(x: &ArmSummary) -> String {
    if x.ablation.is_empty() {
        format!("{} (BaT)", x.rev)
    } else {
        format!("{} ({})", x.rev, x.ablation)
    }
}

fn score(m: &std::collections::BTreeMap<String, f64>, k: &str) -> String {
    m.get(k)
        .map(|v| format!("{v:.4}"))
        .unwrap_or_else(|| "-".into())
}

fn arrow(x: &ArmSummary, k: &str) -> String {
    let d = match (x.base.get(k), x.final_scores.get(k)) {
        (Some(a), Some(b)) => format!(" ({:+.4})", b - a),
        _ => String::new(),
    };
    format!("{} → {}{d}", score(&x.base, k), score(&x.final_scores, k))
}

fn compute_line(x: &ArmSummary) -> String {
    let mut parts = Vec::new();
    for (k, l) in [
        ("steps", "steps"),
        ("rollouts", "rollouts"),
        ("generated_tokens", "tokens"),
    ] {
        if let Some(v) = x.compute.get(k) {
            parts.push(format!("{l} {v}"));
        }
    }
    if let Some(w) = x.compute.get("trainer_wall_seconds") {
        parts.push(format!("wall {w:.2}s"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The cells of one arm's round: target, gate (`*` when a replay did not
/// inherit a held candidate), overall.
fn round_cells(x: &ArmSummary, id: &str) -> [Cell; 3] {
    match x.rounds.iter().find(|r| r.round_id == id) {
        Some(r) => {
            let mark = if r.inherited && !r.gate_status.is_promote() {
                "*"
            } else {
                ""
            };
            [
                r.target_stage.clone().into(),
                Cell::styled(
                    format!("{}{mark}", r.gate_status),
                    Role::of_gate(r.gate_status.as_str()),
                ),
                r.overall
                    .map(|v| format!("{v:.4}"))
                    .unwrap_or_else(|| "-".into())
                    .into(),
            ]
        }
        None => ["-".into(), "-".into(), "-".into()],
    }
}

/// Render a comparison as text; columns fit their content.
pub fn render(c: &Comparison, paint: Paint) -> String {
    let mut out = String::new();
    let (a, b) = (&c.a, &c.b);
    out.push_str(&format!("A: {}\nB: {}\n\n", label(a), label(b)));
    let mut rounds = Table::with_header(&[
        ("round", Align::Left),
        ("A target", Align::Left),
        ("gate", Align::Left),
        ("overall", Align::Right),
        ("B target", Align::Left),
        ("gate", Align::Left),
        ("overall", Align::Right),
    ]);
    let mut ids: Vec<&String> = a
        .rounds
        .iter()
        .chain(b.rounds.iter())
        .map(|r| &r.round_id)
        .collect();
    ids.sort_by_key(|r| (r.len(), (*r).clone()));
    ids.dedup();
    for id in ids {
        let mut row = vec![Cell::from(id.as_str())];
        row.extend(round_cells(a, id));
        row.extend(round_cells(b, id));
        rounds.row(row);
    }
    out.push_str(&rounds.render(paint));
    let mut finals = Table::with_header(&[
        ("base → final", Align::Left),
        ("A", Align::Left),
        ("B", Align::Left),
    ]);
    for (k, name) in [
        ("overall", "Overall"),
        ("task", "task"),
        ("agentic", "agentic"),
        ("S1", "S1"),
        ("S2", "S2"),
        ("S3", "S3"),
        ("S4", "S4"),
        ("S5", "S5"),
    ] {
        finals.row(vec![name.into(), arrow(a, k).into(), arrow(b, k).into()]);
    }
    finals.row(vec![
        "final from".into(),
        a.final_round.as_deref().unwrap_or("base").into(),
        b.final_round.as_deref().unwrap_or("base").into(),
    ]);
    out.push('\n');
    out.push_str(&finals.render(paint));
    out.push_str(&format!("\ncompute A: {}\n", compute_line(a)));
    out.push_str(&format!("compute B: {}\n", compute_line(b)));
    let budget = if c.same_budget {
        paint.paint(Role::Good, "identical in both arms")
    } else {
        paint.paint(Role::Bad, "DIFFERS between the arms (or is not recorded)")
    };
    out.push_str(&format!("budget per round: {budget}\n"));
    out
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "-".into()
    }
}

fn signed(x: f64) -> String {
    if x.is_finite() {
        format!("{x:+.4}")
    } else {
        "-".into()
    }
}

fn interval(e: &Estimate, f: fn(f64) -> String) -> String {
    if e.lo.is_finite() && e.hi.is_finite() {
        format!("[{}, {}]", f(e.lo), f(e.hi))
    } else {
        "-".into()
    }
}

fn verdict_cell(v: Verdict, a: &str, b: &str) -> Cell {
    let role = match v {
        Verdict::NotDistinguishable => None,
        _ => Some(Role::Good),
    };
    Cell::styled(v.sentence(a, b), role)
}

fn pair_row(p: &PairScore, first: bool, a: &str, b: &str) -> Vec<Cell> {
    let x = &p.pairwise;
    vec![
        if first {
            format!("{a} vs {b}").into()
        } else {
            "".into()
        },
        p.score.name().into(),
        signed(x.difference.point).into(),
        interval(&x.difference, signed).into(),
        num(x.improvement.point).into(),
        interval(&x.improvement, num).into(),
        verdict_cell(x.verdict, a, b),
    ]
}

/// Render an N-arm comparison: the bootstrap's settings, per-score
/// statistics of each arm, pairwise differences, the audit-gap trend, the
/// per-round view of one score (with `per_round`: `Some(score name)`) and
/// comparability.
pub fn render_experiment(e: &Experiment, per_round: Option<&str>, paint: Paint) -> String {
    let b = &e.bootstrap;
    let scheme = match b.scheme {
        Scheme::Runs => {
            "within each (track, task): its seeds resampled, then each drawn seed's repeats"
        }
        Scheme::Tasks => {
            "tasks resampled within each track; within each task its seeds, then their repeats"
        }
    };
    let mut out = format!(
        "bootstrap: {} resamples, seed {}, scheme {} ({scheme}), {:.0}% percentile intervals\n",
        b.resamples,
        b.seed,
        b.scheme.as_str(),
        b.level * 100.0
    );
    for a in &e.arms {
        let finals: Vec<&str> = a
            .final_rounds
            .iter()
            .map(|r| r.as_deref().unwrap_or("base"))
            .collect();
        out.push_str(&format!(
            "arm {}: {} seed{} ({}); final from {}\n",
            a.label,
            a.members.len(),
            if a.members.len() == 1 { "" } else { "s" },
            a.members.join(", "),
            finals.join(", ")
        ));
    }
    out.push('\n');
    let mut t = Table::with_header(&[
        ("score", Align::Left),
        ("arm", Align::Left),
        ("runs", Align::Right),
        ("mean", Align::Right),
        ("95% CI", Align::Left),
        ("IQM", Align::Right),
        ("95% CI", Align::Left),
    ]);
    let n_scores = e.arms.first().map(|a| a.scores.len()).unwrap_or(0);
    for k in 0..n_scores {
        for (i, a) in e.arms.iter().enumerate() {
            let Some(s) = a.scores.get(k) else { continue };
            t.row(vec![
                if i == 0 {
                    s.score.name().into()
                } else {
                    "".into()
                },
                a.label.as_str().into(),
                s.runs.to_string().into(),
                num(s.mean.point).into(),
                interval(&s.mean, num).into(),
                num(s.iqm.point).into(),
                interval(&s.iqm, num).into(),
            ]);
        }
    }
    out.push_str("final checkpoint\n");
    out.push_str(&t.render(paint));
    let mut t = Table::with_header(&[
        ("pair", Align::Left),
        ("score", Align::Left),
        ("A − B", Align::Right),
        ("95% CI", Align::Left),
        ("P(A>B)", Align::Right),
        ("95% CI", Align::Left),
        ("verdict", Align::Left),
    ]);
    for p in &e.pairs {
        for (k, s) in p.scores.iter().enumerate() {
            t.row(pair_row(s, k == 0, &p.a, &p.b));
        }
    }
    out.push_str("\npairs (verdict: the difference's interval excludes 0)\n");
    out.push_str(&t.render(paint));
    for p in &e.pairs {
        out.push_str(&format!("overall: {}\n", p.verdict));
    }
    let audited: Vec<_> = e
        .arms
        .iter()
        .filter_map(|a| a.audit.as_ref().map(|t| (a, t)))
        .collect();
    if !audited.is_empty() {
        out.push_str("\naudit gap (gating − audit overall) slope per round\n");
        for (a, tr) in audited {
            let flag = if tr.rising {
                paint.paint(
                    Role::Bad,
                    "RISING: the gating score pulls away from the audit",
                )
            } else {
                "not rising".to_string()
            };
            out.push_str(&format!(
                "  {}: {} {} over {} rounds (audit {}): {flag}\n",
                a.label,
                signed(tr.slope.point),
                interval(&tr.slope, signed),
                tr.rounds,
                tr.protocol_id
            ));
        }
    }
    if let Some(score) = per_round {
        out.push_str(&render_rounds(e, score, paint));
    }
    out.push_str(&render_comparability(e, paint));
    out
}

fn render_rounds(e: &Experiment, score: &str, paint: Paint) -> String {
    let mut t = Table::with_header(&[
        ("round", Align::Right),
        ("arm", Align::Left),
        ("mean", Align::Right),
        ("95% CI", Align::Left),
        ("IQM", Align::Right),
        ("audit gap", Align::Right),
        ("95% CI", Align::Left),
    ]);
    let n = e.arms.iter().map(|a| a.rounds.len()).max().unwrap_or(0);
    for k in 0..n {
        for (i, a) in e.arms.iter().enumerate() {
            let Some(r) = a.rounds.get(k) else { continue };
            let (gap, gap_ci) = match &r.audit_gap {
                Some(g) => (signed(g.point), interval(g, signed)),
                None => ("-".into(), "-".into()),
            };
            let (mean, ci, iqm) = match r.scores.iter().find(|s| s.score.name() == score) {
                Some(s) => (num(s.mean.point), interval(&s.mean, num), num(s.iqm)),
                None => ("-".into(), "-".into(), "-".into()),
            };
            t.row(vec![
                if i == 0 {
                    r.round.to_string().into()
                } else {
                    "".into()
                },
                a.label.as_str().into(),
                mean.into(),
                ci.into(),
                iqm.into(),
                gap.into(),
                gap_ci.into(),
            ]);
        }
    }
    let mut out = format!("\nper round: {score} of the checkpoint after the round\n");
    out.push_str(&t.render(paint));
    let mut t = Table::with_header(&[
        ("round", Align::Right),
        ("pair", Align::Left),
        ("overall A − B", Align::Right),
        ("95% CI", Align::Left),
        ("verdict", Align::Left),
    ]);
    for p in &e.pairs {
        for r in &p.rounds {
            t.row(vec![
                r.round.to_string().into(),
                format!("{} vs {}", p.a, p.b).into(),
                signed(r.difference.point).into(),
                interval(&r.difference, signed).into(),
                verdict_cell(r.verdict, &p.a, &p.b),
            ]);
        }
    }
    out.push('\n');
    out.push_str(&t.render(paint));
    out
}

fn render_comparability(e: &Experiment, paint: Paint) -> String {
    if e.differences.is_empty() {
        return format!(
            "\ncomparable: {}\n",
            paint.paint(Role::Good, "the arms share protocol, pack, tasks, runtime tool format, evaluator, base checkpoint and budget")
        );
    }
    let mut out = if e.comparable {
        format!(
            "\ncomparable only with allowed differences: {}\n",
            paint.paint(Role::Bad, "the arms differ as listed")
        )
    } else {
        format!("\n{}\n", paint.paint(Role::Bad, "NOT COMPARABLE: the arms differ (exit 1); name each difference with --allow-difference FIELD to accept it"))
    };
    for d in &e.differences {
        out.push_str(&format!(
            "  {} differs{}\n",
            d.field.as_str(),
            if d.allowed { " (allowed)" } else { "" }
        ));
        for (label, vals) in &d.values {
            out.push_str(&format!("    {label}: {}\n", vals.join(" | ")));
        }
    }
    out
}
