//! `bat commit DIR -m MSG [--branch B] [--meta FILE.json]`

use std::path::PathBuf;
use std::process::ExitCode;

use bat_ledger::{CommitRequest, FieldValue};
use clap::Args;

use super::ledger_common::{lerr, open, short, Bars, NEVER_CANCEL};
use super::{print_json, CliError, CliResult, Globals};

/// Record DIR's files as a new commit on the current (or given) branch.
/// A `.bat` folder inside DIR is never recorded.
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// The directory to record. (Named `source` so its clap id does not
    /// collide with the global `-C DIR`.)
    #[arg(value_name = "DIR")]
    pub source: PathBuf,
    /// Commit message.
    #[arg(short = 'm', long = "message")]
    pub message: String,
    /// Commit to this branch instead of HEAD's (created from HEAD if new).
    #[arg(long)]
    pub branch: Option<String>,
    /// A JSON file stored as the commit's metadata. If it is an object with a
    /// "fields" object of scalars, those become indexed fields.
    #[arg(long, value_name = "FILE.json")]
    pub meta: Option<PathBuf>,
    /// Author (default: $BAT_AUTHOR, else $USER, else "unknown").
    #[arg(long)]
    pub author: Option<String>,
}

/// Run `bat commit`.
pub fn run(args: CommitArgs, g: &Globals) -> CliResult {
    let mut req = CommitRequest::new(args.message);
    req.branch = args.branch;
    req.author = args
        .author
        .or_else(|| std::env::var("BAT_AUTHOR").ok())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".into());
    if let Some(p) = &args.meta {
        let text = std::fs::read(p)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).with_code(2))?;
        let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
            CliError::new(format!("{} is not valid JSON: {e}", p.display())).with_code(2)
        })?;
        if let Some(fields) = v.get("fields").and_then(|f| f.as_object()) {
            for (k, val) in fields {
                let fv = FieldValue::from_json(val).ok_or_else(|| {
                    CliError::new(format!(
                        "field {k:?} in {} is not a scalar (string, number, bool)",
                        p.display()
                    ))
                    .with_code(2)
                })?;
                req.fields.insert(k.clone(), fv);
            }
        }
        req.metadata = v;
    }
    let dir = args.source;
    if !dir.exists() {
        return Err(CliError::new(format!("{} does not exist", dir.display()))
            .with_hint("give the directory to record")
            .with_code(2));
    }
    let mut l = open(g)?;
    let bars = Bars::new(g);
    let out = l
        .commit_dir(&dir, &req, &bars, &NEVER_CANCEL)
        .map_err(lerr)?;
    if g.json {
        print_json(&out)?;
    } else {
        let branch = out
            .refname
            .strip_prefix("refs/heads/")
            .unwrap_or(&out.refname);
        println!(
            "[{branch} {}] {} ({} files, {} bytes, {} new objects)",
            short(&out.commit),
            req.message.lines().next().unwrap_or(""),
            out.files,
            out.logical_bytes,
            out.new_objects
        );
    }
    Ok(ExitCode::SUCCESS)
}
