//! `bat run`'s checks of the command templates before anything runs, and
//! what every round records about the code and environment they rely on
//! (see `bat::engine::template`'s module docs for the rules):
//!
//! - a trainer template without `{reward_mode}`, or a template without
//!   `{seed}`, is warned about (refused with `--require-ablations`);
//! - a variable a template declares (`{"argv": [...], "env": [...]}`) must
//!   be set; its value (or digest) is recorded with each round;
//! - the templates' code files are digested with each round, and code
//!   outside a git work tree is warned about once.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::run::{BackendArg, RunArgs};
use super::CliError;
use bat::engine::template::{
    ablation_gaps, code_files, declared_vars, parse_template_spec_file, TemplateKind,
};
use bat::round::campaign::Campaign;
use bat::round::provenance::{under_version_control, CodeInputs, DeclaredVar};

/// The variable lookup children see: bat's own environment.
fn lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Read one template file's declaration for the checks.
fn read_spec(p: &Path) -> Result<bat::engine::template::TemplateSpec, CliError> {
    let bytes = bat_contract::fsutil::read_json_input(p)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", p.display())).usage())?;
    Ok(parse_template_spec_file(&p.display().to_string(), &bytes)?)
}

/// Before the lock is taken and anything is written: the ablation
/// placeholders (warn, or refuse with `--require-ablations`) and the
/// declared variables (refused when unset). A resume takes the declared
/// variables from the last round's record. Returns them with their values.
pub fn preflight(a: &RunArgs, ledger: &bat_ledger::Ledger) -> Result<Vec<DeclaredVar>, CliError> {
    if a.resume {
        return resumed_env(a, ledger);
    }
    if a.backend != BackendArg::Command {
        return Ok(Vec::new());
    }
    let (Some(t), Some(e)) = (&a.trainer, &a.evaluator) else {
        // The missing flag is refused by the campaign setup.
        return Ok(Vec::new());
    };
    let (trainer, evaluator) = (read_spec(t)?, read_spec(e)?);
    for gap in ablation_gaps(&trainer.argv, &evaluator.argv) {
        let file = match gap.kind {
            TemplateKind::Trainer => t,
            TemplateKind::Evaluator => e,
        };
        if a.require_ablations {
            return Err(gap.into_error(&file.display().to_string()).into());
        }
        eprintln!(
            "bat run: warning: {} template {} lacks {}, so {} (--require-ablations refuses this)",
            gap.kind.as_str(),
            file.display(),
            gap.placeholder,
            gap.consequence()
        );
    }
    let mut vars = declared_vars(
        TemplateKind::Trainer,
        &t.display().to_string(),
        &trainer.env,
        &lookup,
    )?;
    vars.extend(declared_vars(
        TemplateKind::Evaluator,
        &e.display().to_string(),
        &evaluator.env,
        &lookup,
    )?);
    Ok(vars)
}

/// The declared variables the resumed campaign's last round recorded,
/// checked to be set now.
fn resumed_env(a: &RunArgs, ledger: &bat_ledger::Ledger) -> Result<Vec<DeclaredVar>, CliError> {
    let rev = a.branch.clone().unwrap_or_else(|| "HEAD".into());
    let Ok(Some(last)) = bat::engine::resume::find_last_round(ledger, &rev) else {
        // Nothing to resume: the campaign setup says so.
        return Ok(Vec::new());
    };
    let recorded = bat::replay::code::recorded_inputs(ledger, &last.commit.to_string())?;
    bat::replay::code::check_environment(&recorded, &lookup)?;
    let mut vars = Vec::new();
    for v in recorded.iter().flat_map(|r| &r.environment) {
        if let Some(value) = lookup(&v.name) {
            vars.push(DeclaredVar {
                role: v.role.clone(),
                name: v.name.clone(),
                value,
            });
        }
    }
    Ok(vars)
}

/// The code inputs every round of `campaign` records (none for the
/// simulator, whose children are bat itself), with the once-per-run
/// warning about code outside version control.
pub fn code_inputs(
    a: &RunArgs,
    campaign: &Campaign,
    env: Vec<DeclaredVar>,
) -> Result<Option<CodeInputs>, CliError> {
    if campaign
        .extra_placeholders
        .iter()
        .any(|(k, _)| k == bat::round::campaign::BAT_PLACEHOLDER)
    {
        return Ok(None);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::new(format!("cannot read the working directory: {e}")))?;
    let path_var: Option<OsString> = std::env::var_os("PATH");
    let mut files = code_files(
        TemplateKind::Trainer,
        &campaign.trainer,
        &cwd,
        path_var.as_deref(),
    );
    files.extend(code_files(
        TemplateKind::Evaluator,
        &campaign.evaluator,
        &cwd,
        path_var.as_deref(),
    ));
    if !a.resume {
        // A program found on PATH is an installed tool, not the campaign's
        // code: it is digested, but not expected under git.
        let mut outside: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.argv_index > 0 || f.named.contains('/'))
            .filter(|f| !under_version_control(&f.path))
            .map(|f| f.path.clone())
            .collect();
        outside.dedup();
        if !outside.is_empty() {
            eprintln!(
                "bat run: warning: code not under version control: {}; each round records its BLAKE3 digest instead, and `bat replay --verify` reports a change",
                outside
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else if files
            .iter()
            .all(|f| f.argv_index == 0 && !f.named.contains('/'))
        {
            eprintln!(
                "bat run: warning: the templates name no code file besides the programs found on PATH; only those are digested with each round"
            );
        }
    }
    Ok(Some(CodeInputs { files, env }))
}
