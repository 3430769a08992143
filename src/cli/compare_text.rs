//! Text rendering of an arm comparison, shared by `bat compare` and
//! `bat demo` (verbs do not import each other).

use super::table::{Align, Cell, Table};
use super::term::{Paint, Role};
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
