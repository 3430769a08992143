//! `bat man [-o DIR]`

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, CommandFactory};

use super::{print_json, CliError, CliResult, Session};

/// Write man pages generated from the same definitions as `--help`: bat.1
/// and one page per subcommand (bat-log.1, bat-show.1, …). Install them
/// with e.g. `bat man -o ~/.local/share/man/man1`, then `man bat-log`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Folder to write the pages into (created if missing).
    #[arg(short = 'o', long = "out", value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

/// Run `bat man`.
pub fn run(args: ManArgs, g: &Session) -> CliResult {
    super::output_path::refuse_inside_ledger(&args.out, "-o")?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", args.out.display())))?;
    let mut root = super::Cli::command();
    // Building propagates the global options into the subcommands, so each
    // page lists them too.
    root.build();
    let mut pages = vec![("bat.1".to_string(), root.clone())];
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("bat-{}", sub.get_name());
        pages.push((format!("{name}.1"), sub.clone().name(name)));
    }
    let mut written = Vec::new();
    for (file, cmd) in pages {
        let mut roff = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut roff)
            .map_err(|e| CliError::internal(format!("cannot render {file}: {e}")))?;
        let path = args.out.join(&file);
        write_atomic(&path, &roff)?;
        written.push(path);
    }
    if g.json {
        print_json(&serde_json::json!({ "pages": written }))?;
    } else {
        outln!(
            "wrote {} man pages to {}",
            written.len(),
            args.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Temp file in the same folder, fsync, rename: a reader never sees half a
/// page.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let err = |e: std::io::Error| CliError::new(format!("cannot write {}: {e}", path.display()));
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(bytes).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}
