//! `bat diff A B [--section S]...`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use super::ledger_common::{open, resolve, short};
use super::table::{Align, Cell, Table};
use super::term::{Paint, Role};
use super::{print_json, CliResult, Session};
use bat::inspect::diff::{diff_commits, DiffOptions, Section};

/// Compare two commits (rounds or plain directories), on the same or
/// different branches: curriculum, mixture, reward, checkpoint, eval, gate,
/// audit and files sections. Deltas are B − A; a side without the files
/// says "absent". The files section lists every added, removed and changed
/// file with sizes, and per-tensor changes of safetensors files anywhere
/// in the tree.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first (older) revision.
    pub a: String,
    /// The second (newer) revision.
    pub b: String,
    /// Only these sections (repeatable): curriculum, mixture, reward,
    /// checkpoint, eval, gate, audit, files.
    #[arg(long = "section", value_name = "S", value_parser = parse_section)]
    pub sections: Vec<Section>,
    /// Folder for scratch copies of large safetensors files (default: the
    /// ledger folder).
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Compare safetensors files by decoding both in full, even where the
    /// statistics stored with their deltas would do (normally a commit and
    /// its parent are compared from the deltas alone; the JSON's
    /// `tensors_from` says which way each file went).
    #[arg(long)]
    pub decode: bool,
}

fn parse_section(s: &str) -> Result<Section, String> {
    s.parse()
}

/// Run `bat diff`.
pub fn run(args: DiffArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let a = resolve(&l, &args.a)?;
    let b = resolve(&l, &args.b)?;
    // A partial clone fetches the checkpoints it compares in one transfer
    // per commit (verified on arrival) through its promisor layer.
    let bars = super::ledger_common::Bars::new(g);
    for c in [a, b] {
        bat::remote::prefetch_checkpoints(&l, &c, &bars, g.cancel())
            .map_err(super::ledger_common::lerr)?;
    }
    let opts = DiffOptions {
        sections: args.sections,
        scratch_dir: args.scratch_dir,
        decode: args.decode,
        ..DiffOptions::default()
    };
    // Between two commits that are not rounds, the text leaves out the
    // round sections (all "absent"); asked for by --section, they show.
    let plain = opts.sections.is_empty() && !is_round(&l, a)? && !is_round(&l, b)?;
    let ctx = bat::Ctx::new(&bars, g.cancel());
    let d = diff_commits(&l, a, b, &opts, &ctx)?;
    if g.json {
        print_json(&d)?;
    } else {
        out!("{}", render(&d, g.paint, plain));
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether commit `c` is a round commit.
fn is_round(l: &bat_ledger::Ledger, c: bat_ledger::CommitId) -> Result<bool, super::CliError> {
    Ok(bat::inspect::RoundTree::open(l, c)?.round.is_some())
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(x) => x.clone(),
        other => other.to_string(),
    }
}

/// Whether `x` reads better in scientific notation.
fn sci(x: f64) -> bool {
    x != 0.0 && !(1e-4..1e5).contains(&x.abs())
}

fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if sci(x) => format!("{x:.4e}"),
        Some(x) => format!("{x:.4}"),
        None => s(v),
    }
}

fn signed(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if sci(x) => format!("{x:+.4e}"),
        Some(x) => format!("{x:+.4}"),
        None => s(v),
    }
}

fn triples(t: &mut Table, title: &str, m: &Value) {
    if let Some(m) = m.as_object() {
        for (k, x) in m {
            t.row(vec![
                format!("{title}{k}").into(),
                num(&x["a"]).into(),
                num(&x["b"]).into(),
                signed_cell(&x["delta"]),
            ]);
        }
    }
}

/// A signed delta, green when it rose and red when it fell.
fn signed_cell(v: &Value) -> Cell {
    let role = match v.as_f64() {
        Some(x) if x > 0.0 => Some(Role::Good),
        Some(x) if x < 0.0 => Some(Role::Bad),
        _ => None,
    };
    Cell::styled(signed(v), role)
}

fn counts(out: &mut String, title: &str, m: &Value) {
    if let Some(m) = m.as_object() {
        let parts: Vec<String> = m
            .iter()
            .map(|(k, t)| {
                format!(
                    "{k} {}→{} ({})",
                    s(&t["a"]),
                    s(&t["b"]),
                    t["delta"]
                        .as_i64()
                        .map(|d| format!("{d:+}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        out.push_str(&format!("  {title:<8} {}\n", parts.join(", ")));
    }
}

/// Renders one section of the diff document.
type RenderSection = fn(&mut String, &Value, Paint);

/// The sections only a round has (a plain commit's are all absent).
const ROUND_SECTIONS: [&str; 6] = [
    "curriculum",
    "mixture",
    "reward",
    "checkpoint",
    "eval",
    "gate",
];

/// Render the diff document as text, one section after another; for two
/// `plain` commits (no round), only the sections that apply: files, and
/// audits when a side has any.
fn render(d: &Value, p: Paint, plain: bool) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "diff {} {}\n",
        p.paint(Role::Id, &short(&s(&d["a"]))),
        p.paint(Role::Id, &short(&s(&d["b"])))
    ));
    let sections: [(&str, RenderSection); 8] = [
        ("curriculum", render_curriculum),
        ("mixture", render_mixture),
        ("reward", render_reward),
        ("checkpoint", render_checkpoint),
        ("eval", render_eval),
        ("gate", render_gate),
        ("audit", render_audit),
        ("files", render_files),
    ];
    if plain {
        o.push_str("(neither commit is a round: round sections left out; --section shows them)\n");
    }
    for (name, render_section) in sections {
        let applies = !plain
            || !(ROUND_SECTIONS.contains(&name)
                || (name == "audit"
                    && ["a", "b"].iter().all(|x| !d[name][x]["audits"].is_array())));
        if let Some(v) = d.get(name).filter(|_| applies) {
            render_section(&mut o, v, p);
        }
    }
    o
}

/// The `[curriculum]` section.
fn render_curriculum(o: &mut String, c: &Value, p: Paint) {
    o.push_str(&format!("\n{}\n", p.paint(Role::Header, "[curriculum]")));
    for side in ["a", "b"] {
        let x = &c[side];
        let p = &x["prescription"];
        let presc = if p.is_object() {
            format!(
                "next {} ({}, {})",
                s(&p["target_stage"]),
                s(&p["reason"]),
                s(&p["promotion_status"])
            )
        } else {
            "prescription absent".into()
        };
        o.push_str(&format!(
            "  {side}: round {} target {}; {presc}\n",
            s(&x["round_id"]),
            s(&x["target_stage"])
        ));
    }
}

/// The `[mixture]` section.
fn render_mixture(o: &mut String, m: &Value, p: Paint) {
    o.push_str(&format!("\n{}\n", p.paint(Role::Header, "[mixture]")));
    let delta = &m["delta"];
    if delta.is_object() {
        o.push_str(&format!(
            "  rows     {} -> {}\n",
            s(&m["a"]["rows"]),
            s(&m["b"]["rows"])
        ));
        for k in ["by_pool", "by_stage", "by_track", "by_outcome"] {
            counts(o, k.trim_start_matches("by_"), &delta[k]);
        }
        let sr = &m["source_rows"];
        o.push_str(&format!(
            "  source rows: {} in, {} out, {} common\n",
            s(&sr["in_count"]),
            s(&sr["out_count"]),
            s(&sr["common"])
        ));
    } else {
        o.push_str(&format!("  a: {}  b: {}\n", brief(&m["a"]), brief(&m["b"])));
    }
    let dg = &m["digests"];
    o.push_str(&format!(
        "  train.jsonl {}; source {}\n",
        if dg["train_changed"] == Value::Bool(true) {
            "changed"
        } else {
            "same"
        },
        if dg["source_changed"] == Value::Bool(true) {
            "changed"
        } else {
            "same"
        },
    ));
}

/// `terminal (ablation reward=terminal)`, `stage (default)`, `-`.
fn reward_mode_text(m: &Value) -> String {
    if m["mode"].is_null() {
        return "-".into();
    }
    match m["ablation"].as_str() {
        Some(a) => format!("{} (ablation {a})", s(&m["mode"])),
        None => format!("{} ({})", s(&m["mode"]), s(&m["source"])),
    }
}

/// The `[reward]` section.
fn render_reward(o: &mut String, r: &Value, p: Paint) {
    o.push_str(&format!("\n{}\n", p.paint(Role::Header, "[reward]")));
    let m = &r["mode"];
    if m.is_object() {
        o.push_str(&format!(
            "  mode   {} -> {}{}\n",
            reward_mode_text(&m["a"]),
            reward_mode_text(&m["b"]),
            if m["changed"] == Value::Bool(true) {
                "  CHANGED"
            } else {
                ""
            }
        ));
    }
    match r["by_stage"].as_object() {
        Some(by) => {
            // Per stage this compares the contracts in the rows; the mode
            // line above says how the trainer used them.
            for (stage, c) in by {
                let st = match s(&c["status"]).as_str() {
                    "unchanged" => "same".to_string(),
                    other => other.to_string(),
                };
                o.push_str(&format!("  {stage:<6} contracts {st}\n"));
            }
            o.push_str(&format!(
                "  task definition version {}\n",
                if r["task_definition_version_changed"] == Value::Bool(true) {
                    "changed"
                } else {
                    "same"
                }
            ));
        }
        None => o.push_str(&format!("  a: {}  b: {}\n", brief(&r["a"]), brief(&r["b"]))),
    }
}

/// The `[checkpoint]` section.
fn render_checkpoint(o: &mut String, c: &Value, p: Paint) {
    o.push_str(&format!("\n{}\n", p.paint(Role::Header, "[checkpoint]")));
    for side in ["a", "b"] {
        o.push_str(&format!(
            "  {side}: {} ({})\n",
            s(&c[side]["identity"]),
            s(&c[side]["source"])
        ));
    }
    match c["files"].as_array() {
        Some(files) => {
            for f in files {
                o.push_str(&format!("  {}\n", status_path(&f["status"], &f["path"], p)));
                render_tensors(o, &f["tensors"], p);
            }
        }
        None => o.push_str("  files: absent\n"),
    }
}

/// Per-tensor lines of one safetensors file.
fn render_tensors(o: &mut String, tensors: &Value, p: Paint) {
    for t in tensors.as_array().into_iter().flatten() {
        let st = s(&t["status"]);
        if st == "changed" {
            o.push_str(&format!(
                "      {:<28} {} {:.4} of {} elements, max|Δ| {}, L2 {}{}\n",
                s(&t["name"]),
                p.paint(Role::Warn, "changed"),
                t["changed_fraction"].as_f64().unwrap_or(f64::NAN),
                s(&t["elements"]),
                num(&t["max_abs_delta"]),
                num(&t["l2_delta"]),
                match t["nonfinite_changed"].as_u64() {
                    Some(n) if n > 0 => format!(", {n} non-finite"),
                    _ => String::new(),
                }
            ));
        } else {
            o.push_str(&format!(
                "      {:<28} {}\n",
                s(&t["name"]),
                p.maybe(Role::of_change(&st), &st)
            ));
        }
    }
}

/// The `[files]` section: the files that differ, with sizes.
fn render_files(o: &mut String, f: &Value, p: Paint) {
    let c = &f["file_counts"];
    o.push_str(&format!(
        "\n{}  {} added, {} removed, {} changed, {} unchanged; {} -> {} bytes\n",
        p.paint(Role::Header, "[files]"),
        s(&c["added"]),
        s(&c["removed"]),
        s(&c["changed"]),
        s(&c["unchanged"]),
        s(&f["bytes"]["a"]),
        s(&f["bytes"]["b"])
    ));
    // One table for every listed file so paths and sizes line up; tensor
    // lines of a safetensors file follow the table.
    let mut t = Table::new(&[Align::Left, Align::Left, Align::Left]).indent(2);
    let mut tensors = String::new();
    for x in f["files"].as_array().into_iter().flatten() {
        let size = |side: &str| s(&x[side]["size"]);
        let status = s(&x["status"]);
        let sizes = match status.as_str() {
            "added" => format!("{} bytes", size("b")),
            "removed" => format!("{} bytes", size("a")),
            _ => format!(
                "{} -> {} bytes ({})",
                size("a"),
                size("b"),
                x["size_delta"]
                    .as_i64()
                    .map(|d| format!("{d:+}"))
                    .unwrap_or_default()
            ),
        };
        let role = Role::of_change(&status);
        t.row(vec![
            Cell::styled(status, role),
            s(&x["path"]).into(),
            sizes.into(),
        ]);
        if let Some(e) = x["tensors_error"].as_str() {
            tensors.push_str(&format!("  {}: tensors not compared: {e}\n", s(&x["path"])));
        }
        if x["tensors"].as_array().is_some_and(|a| !a.is_empty()) {
            tensors.push_str(&format!("  {}\n", s(&x["path"])));
            render_tensors(&mut tensors, &x["tensors"], p);
        }
    }
    o.push_str(&t.render(p));
    o.push_str(&tensors);
}

/// The `[eval]` section.
fn render_eval(o: &mut String, e: &Value, p: Paint) {
    o.push_str(&format!("\n{}\n", p.paint(Role::Header, "[eval]")));
    let mut t = Table::with_header(&[
        ("", Align::Left),
        ("a", Align::Right),
        ("b", Align::Right),
        ("delta", Align::Right),
    ])
    .indent(2);
    triples(&mut t, "", &e["means"]);
    triples(&mut t, "", &e["stages"]);
    triples(&mut t, "track ", &e["tracks"]);
    o.push_str(&t.render(p));
}

/// The `[gate]` section.
fn render_gate(o: &mut String, g: &Value, p: Paint) {
    o.push_str(&format!("\n{}\n", p.paint(Role::Header, "[gate]")));
    o.push_str(&format!(
        "  decision {} -> {}\n",
        gate_text(&brief_status(&g["a"]), p),
        gate_text(&brief_status(&g["b"]), p)
    ));
    match g["flipped"].as_array() {
        Some(f) if f.is_empty() => o.push_str("  no check flipped\n"),
        Some(f) => {
            for x in f {
                o.push_str(&format!(
                    "  flipped {}: {} -> {}\n",
                    s(&x["check"]),
                    s(&x["a"]),
                    s(&x["b"])
                ));
            }
        }
        None => o.push_str("  checks: absent\n"),
    }
}

/// The `[audit]` section.
fn render_audit(o: &mut String, a: &Value, p: Paint) {
    o.push_str(&format!(
        "\n{}\n",
        p.paint(Role::Header, "[audit]  gap = audit − gating")
    ));
    for side in ["a", "b"] {
        let g = &a[side];
        match g["audits"].as_array() {
            Some(list) => {
                for x in list {
                    o.push_str(&format!(
                        "  {side}: {:<24} overall {} task {} agentic {}\n",
                        s(&x["protocol_id"]),
                        signed(&x["gap"]["overall"]),
                        signed(&x["gap"]["task"]),
                        signed(&x["gap"]["agentic"])
                    ));
                }
            }
            None => o.push_str(&format!("  {side}: no audits\n")),
        }
    }
}

fn brief(v: &Value) -> String {
    if v.is_object() {
        "present".into()
    } else {
        s(v)
    }
}

/// `status  path` with the status colored and padded to the widest status.
fn status_path(status: &Value, path: &Value, p: Paint) -> String {
    let st = s(status);
    format!(
        "{}{} {}",
        p.maybe(Role::of_change(&st), &st),
        " ".repeat(9usize.saturating_sub(st.chars().count())),
        s(path)
    )
}

fn gate_text(status: &str, p: Paint) -> String {
    p.maybe(Role::of_gate(status), status)
}

fn brief_status(v: &Value) -> String {
    if v.is_object() {
        s(&v["status"])
    } else {
        s(v)
    }
}
