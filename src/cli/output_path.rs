//! Output targets named by the user (`checkout --to`, `report -o`,
//! `export -o`, `bundle create FILE`, …) are never inside a ledger's own
//! directory: a file or folder written there is one the ledger does not
//! know, and the next `gc` or `fsck` trips over it. One check for every
//! verb, made before anything is written. The one exception is bat's own
//! scratch: the work folders of `bat run` and `bat replay`
//! (`.bat/runs/<run>/…`, `.bat/replays/<replay>/…`), where the loop's
//! trainer and evaluator commands (`bat sim train`, `bat eval summarize`,
//! `bat gate`, …) write their outputs and which `gc` clears.

use std::path::{Component, Path, PathBuf};

use super::CliError;
use bat::retention::{REPLAYS_DIR, RUNS_DIR};
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
/// if any, unless it lies inside one of bat's work folders there.
fn ledger_dir_around(path: &Path) -> Option<PathBuf> {
    let path = resolve(path);
    let dir = path.ancestors().find(|a| {
        a.file_name().is_some_and(|n| n == LEDGER_DIR) && a.join(VERSION_FILE).is_file()
    })?;
    let inside: Vec<Component> = path.strip_prefix(dir).ok()?.components().collect();
    // `runs/<run>/<something>`: inside one run's (or replay's) folder.
    let in_work_folder = inside.len() >= 3
        && [RUNS_DIR, REPLAYS_DIR]
            .iter()
            .any(|s| inside[0] == Component::Normal(std::ffi::OsStr::new(s)));
    (!in_work_folder).then(|| dir.to_path_buf())
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
            root.join(".bat/runs/x"),
            root.join(".bat/runs"),
            root.join(".bat/replays/r1"),
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
            root.join(".bat/runs/1-2/work/raw.json"),
            root.join(".bat/replays/1-2/rounds/r03/candidate"),
        ] {
            assert_eq!(ledger_dir_around(&outside), None, "{outside:?}");
        }
    }
}
