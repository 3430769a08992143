//! `bat show REV`

use std::process::ExitCode;

use bat_ledger::{Commit, CommitId, Ledger, Mode};
use clap::Args;

use super::ledger_common::{fmt_time, lerr, open, resolve};
use super::table::{Align, Cell, Table};
use super::term::{Paint, Role};
use super::{print_json, CliResult, Session};
use bat::round::meta::{self, RoundMeta};

/// Show a commit, git style: id, parents, author, date (UTC) and message.
/// For a round commit a summary follows: round, target stage, gate
/// decision, the campaign seed (rounds of `bat run` and `bat replay`),
/// Overall/task/agentic and S1–S5, the trainer's measured
/// compute and the file count; `--metadata` adds the full metadata
/// document and `--files` the file list (listed by default for other
/// commits). `--json` prints everything as one document.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The commit (default HEAD).
    pub rev: Option<String>,
    /// Also print the full commit metadata (pretty JSON).
    #[arg(long)]
    pub metadata: bool,
    /// List the files of a round commit too.
    #[arg(long)]
    pub files: bool,
}

/// Metadata shorter than this is printed inline for non-round commits.
const INLINE_METADATA: usize = 200;

/// Run `bat show`.
pub fn run(args: ShowArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let id = resolve(&l, args.rev.as_deref().unwrap_or("HEAD"))?;
    let c = l.read_commit(&id).map_err(lerr)?;
    let entries = l.walk_files(&c.tree).map_err(lerr)?;
    if g.json {
        let mut files = Vec::new();
        let mut links = Vec::new();
        for e in &entries {
            if e.mode == Mode::Symlink {
                let t = l.read_bytes(&e.id).map_err(lerr)?;
                links.push(
                    serde_json::json!({"path": e.path, "target": String::from_utf8_lossy(&t)}),
                );
            } else {
                files.push(serde_json::json!({
                    "path": e.path, "size": e.size, "id": e.id, "executable": e.mode == Mode::Executable,
                }));
            }
        }
        print_json(&serde_json::json!({
            "id": id, "parents": c.parents, "tree": c.tree, "author": c.author, "time": c.time,
            "message": c.message, "metadata": c.metadata, "fields": c.fields,
            "files": files, "symlinks": links,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let p = g.paint;
    header(&id, &c, p)?;
    let round = meta::read(&c.metadata);
    // Whether anything follows the header's blank line, so the file list
    // needs a blank line of its own.
    let mut gap = !matches!(round, Ok(None));
    let list_files = match &round {
        Ok(Some(m)) => {
            summary(&l, &c, m, p)?;
            let bytes: u64 = entries.iter().map(|e| e.size).sum();
            outln!("{:<10}{} ({bytes} bytes)", "files", entries.len());
            args.files
        }
        Ok(None) => {
            if !c.metadata.is_null() && !args.metadata {
                gap = true;
                let text = c.metadata.to_string();
                if text.len() <= INLINE_METADATA {
                    outln!("metadata: {text}");
                } else {
                    outln!(
                        "metadata: {} bytes (bat show --metadata prints it)",
                        text.len()
                    );
                }
            }
            true
        }
        Err(e) => {
            outln!("round metadata cannot be read: {e}");
            true
        }
    };
    if args.metadata && !c.metadata.is_null() {
        let text = serde_json::to_string_pretty(&c.metadata)
            .map_err(|e| super::CliError::internal(format!("cannot encode metadata: {e}")))?;
        outln!();
        outln!("{}", p.paint(Role::Header, "metadata"));
        outln!("{text}");
        gap = true;
    }
    if list_files {
        let mut t = Table::new(&[Align::Right, Align::Left, Align::Left]);
        for e in &entries {
            t.row(vec![
                e.size.to_string().into(),
                Cell::styled(e.id.to_string(), Some(Role::Dim)),
                e.path.clone().into(),
            ]);
        }
        if gap {
            outln!();
        }
        out!("{}", t.render(p));
    }
    Ok(ExitCode::SUCCESS)
}

/// The git-style header: commit, parents, author, date, message.
fn header(id: &CommitId, c: &Commit, p: Paint) -> Result<(), super::CliError> {
    outln!("{}", p.paint(Role::Id, &format!("commit {id}")));
    for parent in &c.parents {
        outln!("parent {parent}");
    }
    outln!("tree   {}", c.tree);
    outln!("Author: {}", c.author);
    outln!("Date:   {}", fmt_time(c.time));
    outln!();
    for line in c.message.lines() {
        outln!("    {line}");
    }
    outln!();
    Ok(())
}

/// The round summary lines.
fn summary(l: &Ledger, c: &Commit, m: &RoundMeta, p: Paint) -> Result<(), super::CliError> {
    let row = |k: &str, v: String| format!("{k:<10}{v}");
    let mut round = m.round_id.clone();
    if let Some(of) = &m.replay_of_round_id {
        let ab = m.ablation.as_deref().unwrap_or("");
        round.push_str(&format!(
            " (replay of {of}{})",
            if ab.is_empty() {
                String::new()
            } else {
                format!(", {ab}")
            }
        ));
    }
    outln!("{}", row("round", round));
    outln!("{}", row("target", m.target_stage.clone()));
    let gate = p.maybe(
        Role::of_gate(m.gate_status.as_str()),
        m.gate_status.as_str(),
    );
    outln!(
        "{}",
        row(
            "gate",
            format!("{gate}, next target {}", m.next_target_stage)
        )
    );
    if let Some(lm) = &m.loop_meta {
        outln!("{}", row("seed", seed_text(&lm.campaign)));
    }
    if !m.gate_status.is_promote() {
        outln!("{}", row("held", hold_text(l, c)?));
    }
    let scores = m.score_values();
    let mut t = Table::with_header(
        &["overall", "task", "agentic", "S1", "S2", "S3", "S4", "S5"].map(|k| (k, Align::Right)),
    )
    .indent(10);
    t.row(
        ["overall", "task", "agentic", "S1", "S2", "S3", "S4", "S5"]
            .map(|k| {
                Cell::from(
                    scores
                        .get(k)
                        .map(|x| format!("{x:.4}"))
                        .unwrap_or_else(|| "-".into()),
                )
            })
            .to_vec(),
    );
    let table = t.render(p);
    out!("{}", row("scores", table.trim_start().to_string()));
    outln!("{}", row("compute", compute_text(l, c)?));
    Ok(())
}

/// The campaign seed of a round of `bat run` or `bat replay`, saying where
/// it comes from when the round predates recorded seeds.
fn seed_text(c: &bat::round::campaign::Campaign) -> String {
    let seed = c.seed();
    let placeholder = c
        .extra_placeholders
        .iter()
        .any(|(k, _)| k == bat::round::campaign::SEED_PLACEHOLDER);
    match (c.seed, placeholder) {
        (Some(_), _) => seed.to_string(),
        (None, true) => format!("{seed} (the simulator's campaign seed)"),
        (None, false) => format!("{seed} (not recorded; the default)"),
    }
}

/// Why the gate held, from the round's `gate.json` (its failed checks with
/// the drops and the allowed drops).
fn hold_text(l: &Ledger, c: &Commit) -> Result<String, super::CliError> {
    let Some(e) = l.lookup_path(&c.tree, "gate.json").map_err(lerr)? else {
        return Ok("gate.json not recorded".into());
    };
    let Ok(gate) = bat_contract::json::parse_bytes(&l.read_bytes(&e.id).map_err(lerr)?) else {
        return Ok("gate.json does not parse".into());
    };
    let reasons = bat_contract::gate::hold_reasons(&gate);
    Ok(if reasons.is_empty() {
        "no failed check recorded in gate.json".into()
    } else {
        reasons.join("; ")
    })
}

/// The trainer's measured compute from the round's `provenance.json`.
fn compute_text(l: &Ledger, c: &Commit) -> Result<String, super::CliError> {
    let Some(e) = l.lookup_path(&c.tree, "provenance.json").map_err(lerr)? else {
        return Ok("not recorded".into());
    };
    // A provenance file that does not parse is reported as such, not as an
    // error of `show`: the summary is still useful.
    let prov: serde_json::Value = match serde_json::from_slice(&l.read_bytes(&e.id).map_err(lerr)?)
    {
        Ok(v) => v,
        Err(_) => return Ok("provenance.json does not parse".into()),
    };
    let mut parts = Vec::new();
    if let Some(obj) = prov.get("measured_compute").and_then(|v| v.as_object()) {
        for k in bat::round::provenance::COMPUTE_KEYS {
            if let Some(v) = obj.get(k).and_then(serde_json::Value::as_f64) {
                let name = k.replace("generated_", "");
                if k.ends_with("seconds") {
                    parts.push(format!("{name} {v:.2}"));
                } else {
                    parts.push(format!("{name} {v}"));
                }
            }
        }
    }
    if let Some(w) = prov
        .get("measured_by_bat")
        .and_then(|x| x.get("trainer_wall_seconds"))
        .and_then(serde_json::Value::as_f64)
    {
        parts.push(format!("trainer wall {w:.2}s"));
    }
    Ok(if parts.is_empty() {
        "not recorded".into()
    } else {
        parts.join(", ")
    })
}
