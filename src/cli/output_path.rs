//! Output targets named by the user (`checkout --to`, `report -o`,
//! `export -o`, `bundle create FILE`, …) are never inside a ledger's own
//! directory: a file or folder written there is one the ledger does not
//! know, and the next `gc` or `fsck` trips over it. One check for every
//! verb, made before anything is written.

use std::path::{Component, Path, PathBuf};

use super::CliError;
use bat_ledger::store::{LEDGER_DIR, VERSION_FILE};

/// `path` made absolute with symbolic links resolved as far as it exists;
/// the part that does not exist yet is appended with `.` and `..` applied.
fn resolve(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    // The longest prefix that exists, canonicalised; the rest after it.
    let mut existing = abs.as_path();
    let mut rest: Vec<Component> = Vec::new();
    let base = loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            break c;
        }
        let Some(parent) = existing.parent() else {
            break PathBuf::from("/");
        };
        if let Some(last) = existing.components().next_back() {
            rest.push(last);
        }
        existing = parent;
    };
    let mut out = base;
    for c in rest.into_iter().rev() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// The ledger directory (`.bat` holding a `VERSION` file) `path` lies in,
/// if any.
fn ledger_dir_around(path: &Path) -> Option<PathBuf> {
    resolve(path)
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == LEDGER_DIR) && a.join(VERSION_FILE).is_file())
        .map(Path::to_path_buf)
}

/// Refuse `path` as an output target (`what` names the flag or argument,
/// e.g. `--to`) when it lies inside a ledger's own directory.
pub fn refuse_inside_ledger(path: &Path, what: &str) -> Result<(), CliError> {
    match ledger_dir_around(path) {
        None => Ok(()),
        Some(dir) => Err(CliError::new(format!(
            "{what} {} is inside the ledger's own directory {}; bat never writes output there",
            path.display(),
            dir.display()
        ))
        .with_hint("write it outside .bat, e.g. next to it in the work directory")
        .usage()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_inside_a_ledger_directory_are_found_through_dots_and_links() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(t.path()).expect("canonical");
        let ledger = root.join(".bat");
        std::fs::create_dir_all(ledger.join("packs")).expect("mkdir");
        std::fs::write(ledger.join(VERSION_FILE), b"1").expect("version");
        std::os::unix::fs::symlink(ledger.join("packs"), root.join("link")).expect("symlink");
        for inside in [
            root.join(".bat/packs/x"),
            root.join(".bat/new/deeper/file"),
            root.join("work/../.bat/x"),
            root.join("link/y"),
            root.join(".bat"),
        ] {
            assert_eq!(
                ledger_dir_around(&inside),
                Some(ledger.clone()),
                "{inside:?}"
            );
        }
        for outside in [
            root.join("out"),
            root.join(".bat/../out"),
            root.join("other/.bat/x"),
        ] {
            assert_eq!(ledger_dir_around(&outside), None, "{outside:?}");
        }
    }
}
