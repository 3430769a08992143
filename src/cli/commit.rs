//! `bat commit DIR -m MSG [--branch B] [--meta FILE.json]`, and
//! `bat commit ROUND_DIR [-m MSG] [--code-repo PATH] [--heldout-markers F]
//! [--keep-raw-eval] [--branch B] [--pack F] [--baseline-summary F]` for a
//! round directory (validated and recorded by [`bat::round::commit_round`]).

use std::path::PathBuf;
use std::process::ExitCode;

use bat_ledger::{CommitRequest, FieldValue};
use clap::Args;

use super::ledger_common::{lerr, open, resolve, short, Bars};
use super::{print_json, CliError, CliResult, Session};
use bat::round::{commit_round, CommitRoundOptions, RoundError};
use bat_contract::pack::Pack;

/// Record DIR's files as a new commit on the current (or given) branch.
/// A `.bat` folder inside DIR is never recorded.
///
/// A round directory (`data/manifest.json`, `candidate-eval/`, `gate.json`)
/// is validated first (manifest digest, round verify, evaluation binding,
/// firewall, recomputed gate and prescription) and recorded as a round
/// commit; the raw evaluation is never part of the commit. `--plain`
/// records any directory as it is.
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// The directory to record.
    // Named `source` so its clap id does not collide with the global `-C DIR`.
    #[arg(value_name = "DIR")]
    pub source: PathBuf,
    /// Commit message (required for plain directories; rounds get one
    /// derived from the round id and gate status).
    #[arg(short = 'm', long = "message")]
    pub message: Option<String>,
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
    /// Record DIR as a plain directory even if it looks like a round.
    #[arg(long)]
    pub plain: bool,
    /// Round: the training-code git repository recorded in provenance
    /// (default: the repository around the current directory, if any).
    #[arg(long, value_name = "PATH")]
    pub code_repo: Option<PathBuf>,
    /// Round: do not record training-code provenance.
    #[arg(long, conflicts_with = "code_repo")]
    pub no_code_repo: bool,
    /// Round: extra held-out markers (JSON array of strings) for the
    /// firewall scan, on top of the evaluation's task ids.
    #[arg(long, value_name = "F")]
    pub heldout_markers: Option<PathBuf>,
    /// Round: keep the raw evaluator output in the ledger's private area
    /// (never part of a commit, never handed to trainers).
    #[arg(long)]
    pub keep_raw_eval: bool,
    /// Round: the benchmark pack (default: the embedded one).
    #[arg(long, value_name = "F")]
    pub pack: Option<PathBuf>,
    /// Round: the baseline summary to gate against (default: the branch's
    /// promoted round, else ROUND_DIR/../baseline-eval/summary.json).
    #[arg(long, value_name = "F")]
    pub baseline_summary: Option<PathBuf>,
    /// Longest chain of tensor deltas before a checkpoint piece is stored in
    /// full again, for this commit only (default: the ledger's `bat config
    /// delta-depth`, else 9: one full copy per 10 fine-tuning rounds; a
    /// dense delta, where most weights changed, counts up to 4). Lower
    /// restores faster, higher stores less; 0 stores every checkpoint in full;
    /// at most 32 (longer chains would slow every restore of the round).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=32))]
    pub delta_depth: Option<u32>,
    /// Store large checkpoint files as deltas against the same paths in this
    /// revision instead of the branch tip (e.g. a replay arm against the
    /// original round). Plain directories only.
    #[arg(long, value_name = "REV")]
    pub delta_base: Option<String>,
}

/// Run `bat commit`.
pub fn run(args: CommitArgs, g: &Session) -> CliResult {
    let code = commit(args, g)?;
    super::gc::auto(g, "commit")?;
    Ok(code)
}

/// The commit itself (a round or a plain directory).
fn commit(args: CommitArgs, g: &Session) -> CliResult {
    let author = g.author(args.author.as_deref());
    // A ledger's own files (`bat commit .bat`) are a moving target and
    // would plant a ledger inside a tree.
    let abs = std::fs::canonicalize(&args.source).unwrap_or_else(|_| args.source.clone());
    if abs.ancestors().any(|a| {
        a.file_name()
            .is_some_and(|n| n == bat_ledger::store::LEDGER_DIR)
            && a.join(bat_ledger::store::VERSION_FILE).is_file()
    }) {
        return Err(CliError::new(format!(
            "{} is inside a ledger's own directory; commit the work directory instead",
            args.source.display()
        ))
        .usage());
    }
    if !args.plain && bat::round::layout::looks_like_round(&args.source) {
        return run_round(args, author, g);
    }
    let Some(message) = args.message else {
        if let Some(missing) = (!args.plain)
            .then(|| bat::round::layout::near_round_missing(&args.source))
            .flatten()
        {
            return Err(CliError::new(format!(
                "{} looks like a round directory but is missing {}",
                args.source.display(),
                missing.join(", ")
            ))
            .with_hint(
                "a round needs data/manifest.json (from `bat round build`), candidate-eval/ \
                 and gate.json; to record the folder as it is, pass --plain -m MSG",
            )
            .usage());
        }
        return Err(CliError::new("a commit message is required")
            .with_hint("pass -m MSG")
            .usage());
    };
    if !args.plain {
        if let Some(missing) = bat::round::layout::near_round_missing(&args.source) {
            eprintln!(
                "warning: {} looks like a round directory but is missing {}; recording it as a \
                 plain directory (--plain silences this)",
                args.source.display(),
                missing.join(", ")
            );
        }
    }
    let mut req = CommitRequest::new(message);
    req.branch = args.branch;
    req.author = author;
    if let Some(p) = &args.meta {
        let text = bat_contract::fsutil::read_json_input(p)
            .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).usage())?;
        let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
            CliError::new(format!("{} is not valid JSON: {e}", p.display())).usage()
        })?;
        if let Some(fields) = v.get("fields").and_then(|f| f.as_object()) {
            for (k, val) in fields {
                let fv = FieldValue::from_json(val).ok_or_else(|| {
                    CliError::new(format!(
                        "field {k:?} in {} is not a scalar (string, number, bool)",
                        p.display()
                    ))
                    .usage()
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
            .usage());
    }
    let mut l = open(g)?;
    if let Some(d) = args.delta_depth {
        l.config.delta_max_depth = d;
    }
    if let Some(rev) = &args.delta_base {
        req.delta_base = Some(resolve(&l, rev)?);
    }
    let bars = Bars::new(g);
    let out = l
        .commit_dir(&dir, &req, &bars, g.cancel())
        .map_err(|e| match e {
            bat_ledger::Error::Cancelled => CliError::interrupted(format!(
                "commit of {} stopped before anything was recorded (no ref moved)",
                dir.display()
            )),
            other => lerr(other),
        })?;
    if g.json {
        print_json(&out)?;
    } else {
        let branch = out
            .refname
            .strip_prefix("refs/heads/")
            .unwrap_or(&out.refname);
        outln!(
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

/// The default training-code repository: the git repository around the
/// current directory, if any.
fn default_code_repo() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    git2::Repository::discover(&cwd).ok()?;
    Some(cwd)
}

/// A round commit records the child logs of rounds `bat run` or `bat replay`
/// ran (their loop record names them); a `logs/` folder in a round directory
/// committed by hand is not part of the round and is left out, which the
/// user is told.
fn dropped_logs_warning(round_dir: &std::path::Path) -> Option<String> {
    let logs = round_dir.join(bat::round::meta::LOG_TREE_DIR);
    let files = std::fs::read_dir(&logs).ok()?.count();
    (files > 0).then(|| {
        format!(
            "{} ({files} entries) was not recorded: a round commit keeps only the logs of rounds \
             `bat run` or `bat replay` ran; keep the folder elsewhere or record it with \
             `bat commit --plain`",
            logs.display()
        )
    })
}

fn run_round(args: CommitArgs, author: String, g: &Session) -> CliResult {
    if args.delta_base.is_some() {
        return Err(CliError::new("--delta-base applies to plain directories")
            .with_hint("round commits use the branch's previous round as delta base; add --plain to record the folder as is")
            .usage());
    }
    if args.meta.is_some() {
        return Err(CliError::new("--meta is not accepted for a round directory")
            .with_hint("round metadata is derived from the round; use --plain to record it as a plain directory")
            .usage());
    }
    let pack = Pack::load_or_default(args.pack.as_deref())
        .map_err(CliError::from)
        .map_err(CliError::usage)?;
    let code_repo = if args.no_code_repo {
        None
    } else {
        args.code_repo.clone().or_else(default_code_repo)
    };
    let opts = CommitRoundOptions {
        message: args.message,
        branch: args.branch,
        code_repo,
        heldout_markers: args.heldout_markers,
        keep_raw_eval: args.keep_raw_eval,
        pack,
        command_templates: None,
        loop_meta: None,
        baseline_summary: args.baseline_summary,
        author: Some(author),
        ..Default::default()
    };
    let mut l = open(g)?;
    if let Some(d) = args.delta_depth {
        l.config.delta_max_depth = d;
    }
    let bars = Bars::new(g);
    let ctx = bat::Ctx::new(&bars, g.cancel());
    let mut out = commit_round(&mut l, &args.source, &opts, &ctx).map_err(|e| match e {
        RoundError::Ledger(bat_ledger::Error::Cancelled) => CliError::interrupted(format!(
            "commit of round {} stopped before anything was recorded (no ref moved)",
            args.source.display()
        )),
        other => CliError::from(other),
    })?;
    if let Some(w) = dropped_logs_warning(&args.source) {
        out.warnings.push(w);
    }
    for w in &out.warnings {
        eprintln!("warning: {w}");
    }
    if g.json {
        // Through a JSON value: its members print in sorted order.
        let doc = serde_json::to_value(&out)
            .map_err(|e| CliError::internal(format!("cannot encode JSON output: {e}")))?;
        print_json(&doc)?;
    } else {
        let branch = out
            .refname
            .strip_prefix("refs/heads/")
            .unwrap_or(&out.refname);
        outln!(
            "[{branch} {}] round {} {}{}",
            short(&out.commit),
            out.round_id,
            out.gate_status,
            if out.gate_status.is_promote() {
                format!(" (refs/promoted/{branch} moved)")
            } else {
                String::new()
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
