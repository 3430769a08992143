//! `bat completion SHELL`

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{CliError, CliResult, Session};

/// Print a completion script for SHELL on stdout, generated from the same
/// definitions as `--help`. For example
/// `bat completion bash > ~/.local/share/bash-completion/completions/bat`,
/// `bat completion zsh > "${fpath[1]}/_bat"`,
/// `bat completion fish > ~/.config/fish/completions/bat.fish`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Run `bat completion`.
pub fn run(args: CompletionArgs, _g: &Session) -> CliResult {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "bat", &mut buf);
    let text = String::from_utf8(buf)
        .map_err(|e| CliError::internal(format!("completion script is not UTF-8: {e}")))?;
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}
