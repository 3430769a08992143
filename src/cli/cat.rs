//! `bat cat REV:PATH`

use std::io::Write;
use std::process::ExitCode;

use bat_ledger::{Error, Mode};
use clap::Args;

use super::error::stdout_error;
use super::ledger_common::{lerr, open, resolve, split_rev_path};
use super::{CliError, CliResult, Session};

/// Write a file's bytes to stdout (every chunk verified before it is written).
#[derive(Debug, Args)]
pub struct CatArgs {
    /// REV:PATH of a file.
    pub target: String,
}

/// Run `bat cat`.
pub fn run(args: CatArgs, g: &Session) -> CliResult {
    let l = open(g)?;
    let (rev, path) = split_rev_path(&args.target);
    if path.is_empty() {
        return Err(CliError::new(format!("{:?} names no file", args.target))
            .with_hint("use REV:PATH")
            .usage());
    }
    let id = resolve(&l, rev)?;
    let c = l.read_commit(&id).map_err(lerr)?;
    let e = l.lookup_path(&c.tree, path).map_err(lerr)?.ok_or_else(|| {
        lerr(Error::PathNotFound {
            rev: rev.into(),
            path: path.into(),
        })
    })?;
    if e.mode == Mode::Tree {
        return Err(lerr(Error::WrongKind {
            path: path.into(),
            what: "a directory, not a file",
        }));
    }
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    l.read_bytes_to(&e.id, &mut lock, g.cancel())
        .map_err(|e| match e {
            // The reader went away (`bat cat … | head`).
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
                CliError::broken_pipe()
            }
            other => lerr(other),
        })?;
    lock.flush().map_err(stdout_error)?;
    Ok(ExitCode::SUCCESS)
}
