//! Text rendering of an arm comparison, shared by `bat compare` and
//! `bat demo` (verbs do not import each other).

use crate::replay::compare::{ArmSummary, Comparison};

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

/// Render a comparison as text.
pub fn render(c: &Comparison) -> String {
    let mut out = String::new();
    let (a, b) = (&c.a, &c.b);
    let w = 38;
    out.push_str(&format!("A: {}\nB: {}\n\n", label(a), label(b)));
    out.push_str(&format!(
        "{:<6} {:<w$} {}\n",
        "round", "A: target gate overall", "B: target gate overall"
    ));
    let mut ids: Vec<&String> = a
        .rounds
        .iter()
        .chain(b.rounds.iter())
        .map(|r| &r.round_id)
        .collect();
    ids.sort_by_key(|r| (r.len(), (*r).clone()));
    ids.dedup();
    let cell = |x: &ArmSummary, id: &str| {
        x.rounds
            .iter()
            .find(|r| r.round_id == id)
            .map(|r| {
                format!(
                    "{:<3} {:<7}{} {}",
                    r.target_stage,
                    r.gate_status,
                    if r.inherited && r.gate_status != "promote" {
                        "*"
                    } else {
                        " "
                    },
                    r.overall
                        .map(|v| format!("{v:.4}"))
                        .unwrap_or_else(|| "-".into())
                )
            })
            .unwrap_or_else(|| "-".into())
    };
    for id in ids {
        out.push_str(&format!("{:<6} {:<w$} {}\n", id, cell(a, id), cell(b, id)));
    }
    out.push_str(&format!("\n{:<8} {:<30} {}\n", "base → final", "A", "B"));
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
        out.push_str(&format!(
            "{:<12} {:<30} {}\n",
            name,
            arrow(a, k),
            arrow(b, k)
        ));
    }
    out.push_str(&format!(
        "{:<12} {:<30} {}\n",
        "final from",
        a.final_round.as_deref().unwrap_or("base"),
        b.final_round.as_deref().unwrap_or("base")
    ));
    out.push_str(&format!("\ncompute A: {}\n", compute_line(a)));
    out.push_str(&format!("compute B: {}\n", compute_line(b)));
    out.push_str(&format!(
        "budget per round: {}\n",
        if c.same_budget {
            "identical in both arms"
        } else {
            "DIFFERS between the arms (or is not recorded)"
        }
    ));
    out
}
