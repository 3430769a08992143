//! `bat config [KEY [VALUE]]`

use bat_ledger::Setting;
use clap::Args;

use super::ledger_common::{lerr, open};
use super::transfer_common::ok;
use super::{print_json, CliError, CliResult, Session};

/// Show or change the ledger's write settings. They are kept in the ledger
/// and used by every later `bat commit`, round commit of `bat run` and
/// `bat replay`, and `bat gc` of it (`bat commit --delta-depth` still
/// overrides one commit).
///
/// Settings: `delta-depth` (0..=32, default 9): the longest chain of
/// checkpoint deltas before a piece is stored whole again; lower restores
/// faster, higher stores less. `base-files` (true/false, default true):
/// read a delta base from the previous version's file when it is still
/// there unchanged (each piece checked by BLAKE3) instead of decoding it.
/// `gc.auto` (a pack count, default 50; 0 or false: off): after `bat
/// commit` and `bat run`, gc when more packs than this are small enough to
/// merge, unless another bat process uses the ledger.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// The setting to show or change (omit to list them all).
    pub key: Option<String>,
    /// Its new value (omit to show the current one).
    pub value: Option<String>,
    /// Forget the ledger's value of KEY, so the default applies again.
    #[arg(long, requires = "key", conflicts_with = "value")]
    pub unset: bool,
}

/// One setting as listed.
#[derive(serde::Serialize)]
struct Shown {
    key: &'static str,
    /// The value commits use now.
    value: String,
    /// `ledger` (kept by `bat config`) or `default`.
    source: &'static str,
    /// A kept value that does not parse (edited by hand), left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    invalid: Option<String>,
    about: &'static str,
}

/// Run `bat config`.
pub fn run(args: ConfigArgs, g: &Session) -> CliResult {
    let mut l = open(g)?;
    let setting = match &args.key {
        None => None,
        Some(k) => Some(Setting::from_name(k).ok_or_else(|| {
            let names: Vec<&str> = Setting::ALL.iter().map(|s| s.name()).collect();
            CliError::new(format!("no setting named {k:?}"))
                .with_hint(format!("settings: {}", names.join(", ")))
                .usage()
        })?),
    };
    if let Some(s) = setting {
        if args.unset || args.value.is_some() {
            let value = if args.unset {
                None
            } else {
                args.value.as_deref()
            };
            l.set_setting(s, value).map_err(|e| match e {
                bat_ledger::Error::InvalidInput { message } => CliError::new(message)
                    .with_hint(format!("`bat config --help` describes {}", s.name()))
                    .usage(),
                e => lerr(e),
            })?;
        }
    }
    let shown: Vec<Shown> = match setting {
        Some(s) => vec![show(&l, s)?],
        None => Setting::ALL
            .into_iter()
            .map(|s| show(&l, s))
            .collect::<Result<_, _>>()?,
    };
    if g.json {
        match (setting, shown.as_slice()) {
            (Some(_), [one]) => print_json(one)?,
            _ => print_json(&shown)?,
        }
    } else if setting.is_some() {
        for s in &shown {
            outln!("{}", s.value);
        }
    } else {
        for s in &shown {
            let note = match &s.invalid {
                Some(bad) => format!(" (kept value {bad:?} is not valid: default used)"),
                None => format!(" ({})", s.source),
            };
            outln!("{}\t{}{note}\t{}", s.key, s.value, s.about);
        }
    }
    ok()
}

fn show(l: &bat_ledger::Ledger, s: Setting) -> Result<Shown, CliError> {
    let kept = l.setting(s).map_err(lerr)?;
    let invalid = kept.clone().filter(|v| s.parse(v).is_err());
    let source = if kept.is_some() && invalid.is_none() {
        "ledger"
    } else {
        "default"
    };
    Ok(Shown {
        key: s.name(),
        value: s.value_in(&l.config),
        source,
        invalid,
        about: s.about(),
    })
}
