//! The arrows that must never exist (issues 16 and 32), checked on the
//! source text where the crate graph cannot hold them.
//!
//! The crate graph holds the coarse ones: `bat-error` (the error
//! classification every library shares) depends on nothing, `bat-ledger`
//! on nothing of bat's but `bat-error`, `bat-contract` only on the
//! ledger-free basics, `bat` (the domain) on both, and only `bat-cli` on
//! clap and the terminal.
//! Inside the domain crate:
//! - Nothing under `bat/src/round` or `ledger/src` refers to
//!   `crate::engine`, `crate::replay` or `crate::cli` (the layers above
//!   them), and `ledger/src` names none of bat's crates.
//! - The files of `bat/src/round`, `contract/src` and `bat/src/sim` form no
//!   import cycle.
//! - Nothing under `bat/src/engine` or `bat/src/replay` names `crate::sim`:
//!   the engine runs a finished campaign and the backend that builds a
//!   simulator campaign sits above both (`bat/src/backend.rs`).
//! - The loop engine and the round record (`bat/src/engine/rounds*`,
//!   `bat/src/round/record.rs`, `bat/src/round/mod.rs`) take and return no
//!   `serde_json::Value` in their public signatures or public struct
//!   fields: a round travels typed, and JSON appears only where it is
//!   written to or read from the ledger.
//!
//! The check is textual, with no dependency on the compiler: comments and
//! string literals are stripped, `mod name { .. }` blocks are tracked so a
//! `super::` inside `mod tests` resolves to the right module, `use` trees
//! are expanded, and every `crate::` / `super::` / `self::` path (in `use`
//! items and in expressions) is resolved to the file of the deepest module
//! it names. A file-level edge A → B exists when A names a module defined
//! in B. A module file's edges to its own descendants are not counted:
//! declaring (and re-exporting) submodules is the module tree itself, and
//! a child naming an item of its parent would otherwise always look like a
//! loop; a loop through a sibling still is one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One source file: its path relative to the workspace and its module path
/// inside its crate (`["round", "validate"]`; empty for the crate root).
#[derive(Debug, Clone)]
struct SourceFile {
    rel: String,
    module: Vec<String>,
    text: String,
}

/// A reference from one file to a module path.
#[derive(Debug, Clone)]
struct Reference {
    /// The absolute module path named (after `super::`/`self::` resolution).
    path: Vec<String>,
    /// The path as written, for the failure message.
    written: String,
}

/// Strip comments, string and char literals (their text could name any
/// module), keeping the code tokens in place.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // A raw string r"..." / r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (1..=hashes).all(|h| b.get(j + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Tokens: identifiers, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' {
            // A raw identifier `r#loop` is the identifier `loop`.
            if c == 'r'
                && b.get(i + 1) == Some(&'#')
                && b.get(i + 2).is_some_and(|n| n.is_alphabetic() || *n == '_')
            {
                i += 2;
            }
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Expand a `use` tree starting at `toks[*i]` into full paths (as written).
fn use_tree(toks: &[String], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i).map(String::as_str) {
            Some("{") => {
                *i += 1;
                loop {
                    match toks.get(*i).map(String::as_str) {
                        Some("}") => {
                            *i += 1;
                            return;
                        }
                        Some(",") => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            Some("*") => {
                *i += 1;
                out.push(path);
                return;
            }
            Some("::") => *i += 1,
            Some(t) if is_ident(t) && t != "as" => {
                path.push(t.to_string());
                *i += 1;
                if toks.get(*i).map(String::as_str) != Some("::") {
                    if toks.get(*i).map(String::as_str) == Some("as") {
                        *i += 2;
                    }
                    // `use a::b::{self}` names `a::b`.
                    if path.last().map(String::as_str) == Some("self") && path.len() > 1 {
                        path.pop();
                    }
                    out.push(path);
                    return;
                }
            }
            _ => {
                out.push(path);
                return;
            }
        }
    }
}

/// Resolve a written path to an absolute module path, given the module the
/// code is in. `None` for paths into other crates or local names.
fn resolve(written: &[String], module: &[String]) -> Option<Vec<String>> {
    let first = written.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module.to_vec(),
        _ => return None,
    };
    let mut rest = &written[1..];
    if first == "super" {
        base.pop()?;
        while rest.first().map(String::as_str) == Some("super") {
            base.pop()?;
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().filter(|s| s.as_str() != "self").cloned());
    Some(base)
}

/// Every module reference of a file, plus the foreign crates it names at
/// the start of a path (`bat::`), for the ledger rule.
fn references(file: &SourceFile) -> (Vec<Reference>, BTreeSet<String>) {
    let toks = tokens(&strip(&file.text));
    let mut refs = Vec::new();
    let mut crates = BTreeSet::new();
    // Inline `mod x { .. }` blocks: (name, brace depth inside the block).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        let module: Vec<String> = file
            .module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        match t {
            "{" => {
                depth += 1;
                i += 1;
            }
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            "mod" if toks.get(i + 2).map(String::as_str) == Some("{") => {
                let name = toks[i + 1].clone();
                depth += 1;
                inline.push((name, depth));
                i += 3;
            }
            "use" => {
                i += 1;
                let mut paths = Vec::new();
                if toks.get(i).map(String::as_str) == Some("::") {
                    i += 1;
                }
                use_tree(&toks, &mut i, &[], &mut paths);
                for p in paths {
                    if let Some(first) = p.first() {
                        crates.insert(first.clone());
                    }
                    if let Some(path) = resolve(&p, &module) {
                        refs.push(Reference {
                            path,
                            written: p.join("::"),
                        });
                    }
                }
            }
            "crate" | "super" | "self" | "bat"
                if toks.get(i + 1).map(String::as_str) == Some("::")
                    && (i == 0 || toks[i - 1] != "::") =>
            {
                let mut p = vec![t.to_string()];
                let mut j = i + 1;
                while toks.get(j).map(String::as_str) == Some("::")
                    && toks.get(j + 1).is_some_and(|s| is_ident(s))
                {
                    p.push(toks[j + 1].clone());
                    j += 2;
                }
                if t == "bat" {
                    crates.insert("bat".to_string());
                }
                if let Some(path) = resolve(&p, &module) {
                    refs.push(Reference {
                        path,
                        written: p.join("::"),
                    });
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    (refs, crates)
}

/// The source files of a crate rooted at `root/lib.rs`, with module paths.
fn crate_files(workspace: &Path, root: &str) -> Vec<SourceFile> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("source dir is readable")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    let base = workspace.join(root);
    let mut paths = Vec::new();
    walk(&base, &mut paths);
    paths
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "main.rs"))
        .map(|p| {
            let rel_in_crate = p.strip_prefix(&base).expect("under base").to_path_buf();
            let mut module: Vec<String> = rel_in_crate
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            SourceFile {
                rel: p
                    .strip_prefix(workspace)
                    .expect("under workspace")
                    .to_string_lossy()
                    .into_owned(),
                module,
                text: std::fs::read_to_string(&p).expect("source file is UTF-8"),
            }
        })
        .collect()
}

/// The file index of the deepest module in `files` that `path` names.
fn file_of(files: &[SourceFile], path: &[String]) -> Option<usize> {
    (0..=path.len())
        .rev()
        .find_map(|n| files.iter().position(|f| f.module == path[..n]))
}

const UPPER: [&str; 3] = ["engine", "replay", "cli"];
const LOWER: [&str; 1] = ["bat/src/round/"];
const ACYCLIC: [&str; 3] = ["bat/src/round/", "contract/src/", "bat/src/sim/"];

/// Upward references of the domain files (rule a).
fn upward_refs(files: &[SourceFile]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        if !LOWER.iter().any(|p| f.rel.starts_with(p)) {
            continue;
        }
        for r in references(f).0 {
            if r.path.first().is_some_and(|m| UPPER.contains(&m.as_str())) {
                bad.push(format!("{} imports {}", f.rel, r.written));
            }
        }
    }
    bad
}

/// The file-level import cycles among the files under `ACYCLIC` (rule b):
/// each strongly connected component of more than one file, with the edges
/// inside it.
fn cycles(files: &[SourceFile]) -> Vec<String> {
    let inside: Vec<usize> = (0..files.len())
        .filter(|&i| ACYCLIC.iter().any(|p| files[i].rel.starts_with(p)))
        .collect();
    // edges[a][b] = how a names b (first occurrence).
    let mut edges: BTreeMap<usize, BTreeMap<usize, String>> = BTreeMap::new();
    for &a in &inside {
        for r in references(&files[a]).0 {
            let Some(b) = file_of(files, &r.path) else {
                continue;
            };
            let descendant = files[b].module.starts_with(&files[a].module);
            if b != a && inside.contains(&b) && !descendant {
                edges
                    .entry(a)
                    .or_default()
                    .entry(b)
                    .or_insert(r.written.clone());
            }
        }
    }
    let reach = |from: usize| -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for &m in edges.get(&n).map(|e| e.keys()).into_iter().flatten() {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<usize, BTreeSet<usize>> =
        inside.iter().map(|&a| (a, reach(a))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &a in &inside {
        if done.contains(&a) || !reachable[&a].contains(&a) {
            continue;
        }
        let comp: BTreeSet<usize> = inside
            .iter()
            .copied()
            .filter(|b| reachable[&a].contains(b) && reachable[b].contains(&a))
            .collect();
        done.extend(comp.iter().copied());
        let mut lines = vec![format!(
            "cycle among {}:",
            comp.iter()
                .map(|&i| files[i].rel.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )];
        for &x in &comp {
            for (y, how) in edges.get(&x).into_iter().flatten() {
                if comp.contains(y) {
                    lines.push(format!("  {} -> {} (`{how}`)", files[x].rel, files[*y].rel));
                }
            }
        }
        out.push(lines.join("\n"));
    }
    out
}

/// Files that must not name the simulator (rule c), and the module they
/// must not name.
const SIM_FREE: [&str; 2] = ["bat/src/engine/", "bat/src/replay/"];

/// References of the engine and replay files to `crate::sim` (rule c).
fn sim_refs(files: &[SourceFile]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        if !SIM_FREE.iter().any(|p| f.rel.starts_with(p)) {
            continue;
        }
        for r in references(f).0 {
            if r.path.first().is_some_and(|m| m == "sim") {
                bad.push(format!("{} imports {}", f.rel, r.written));
            }
        }
    }
    bad
}

/// Files whose public signatures must not carry `serde_json::Value`
/// (rule d): a prefix of the path.
const TYPED: [&str; 3] = [
    "bat/src/engine/rounds",
    "bat/src/round/record.rs",
    "bat/src/round/mod.rs",
];

/// Whether `toks[i..]` starts a `serde_json::Value` (or a `Value` the file
/// imported from serde_json, `json_value` true).
fn names_json_value(toks: &[String], i: usize, json_value: bool) -> bool {
    let at = |k: usize| toks.get(k).map(String::as_str);
    (at(i) == Some("serde_json") && at(i + 1) == Some("::") && at(i + 2) == Some("Value"))
        || (json_value && at(i) == Some("Value") && (i == 0 || toks[i - 1] != "::"))
}

/// The public fn signatures and public struct fields of the `TYPED` files
/// that mention `serde_json::Value` (rule d).
fn json_in_signatures(files: &[SourceFile]) -> Vec<String> {
    let mut bad = Vec::new();
    for f in files {
        if !TYPED.iter().any(|p| f.rel.starts_with(p)) {
            continue;
        }
        let toks = tokens(&strip(&f.text));
        // `use serde_json::Value;` or `use serde_json::{.., Value, ..}`.
        let mut json_value = false;
        for (i, t) in toks.iter().enumerate() {
            if t == "use" {
                let mut j = i + 1;
                let mut paths = Vec::new();
                use_tree(&toks, &mut j, &[], &mut paths);
                json_value |= paths
                    .iter()
                    .any(|p| p.len() == 2 && p[0] == "serde_json" && p[1] == "Value");
            }
        }
        let mut i = 0;
        while i < toks.len() {
            let public = toks[i] == "pub";
            // `pub fn`, `pub(crate) fn`, `pub const fn`, ...
            let fn_at = (i + 1..(i + 8).min(toks.len())).find(|&k| toks[k] == "fn");
            let between_ok = fn_at.is_some_and(|k| {
                toks[i + 1..k].iter().all(|t| {
                    matches!(
                        t.as_str(),
                        "(" | ")" | "crate" | "super" | "const" | "unsafe" | "async"
                    )
                })
            });
            if public && between_ok {
                let k = fn_at.expect("checked above");
                let name = toks.get(k + 1).cloned().unwrap_or_default();
                let mut j = k + 1;
                while j < toks.len() && toks[j] != "{" && toks[j] != ";" {
                    if names_json_value(&toks, j, json_value) {
                        bad.push(format!(
                            "{}: fn {name} has serde_json::Value in its signature",
                            f.rel
                        ));
                        break;
                    }
                    j += 1;
                }
                i = j;
                continue;
            }
            if public && toks.get(i + 1).map(String::as_str) == Some("struct") {
                let name = toks.get(i + 2).cloned().unwrap_or_default();
                let Some(open) = (i..toks.len()).find(|&k| toks[k] == "{" || toks[k] == ";") else {
                    break;
                };
                if toks[open] == ";" {
                    i = open + 1;
                    continue;
                }
                let mut depth = 0usize;
                let mut field_public = false;
                let mut field = String::new();
                let mut j = open;
                while j < toks.len() {
                    match toks[j].as_str() {
                        "{" | "(" | "<" | "[" => depth += 1,
                        "}" | ")" | ">" | "]" => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        "," if depth == 1 => field_public = false,
                        "pub" if depth == 1 => {
                            field_public = true;
                            field = toks.get(j + 1).cloned().unwrap_or_default();
                        }
                        _ => {}
                    }
                    if field_public && depth >= 1 && names_json_value(&toks, j, json_value) {
                        bad.push(format!("{}: {name}.{field} is a serde_json::Value", f.rel));
                        field_public = false;
                    }
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            i += 1;
        }
    }
    bad
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn round_does_not_import_the_layers_above() {
    let files = crate_files(&workspace(), "bat/src");
    assert!(
        files.iter().any(|f| f.rel.starts_with("bat/src/round/")),
        "found no files under bat/src/round"
    );
    let bad = upward_refs(&files);
    assert!(
        bad.is_empty(),
        "arrows running back up:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_ledger_does_not_name_bat_or_its_upper_layers() {
    let files = crate_files(&workspace(), "ledger/src");
    assert!(files.len() > 5, "found too few ledger files");
    let mut bad = Vec::new();
    for f in &files {
        let (refs, crates) = references(f);
        for name in ["bat", "bat_cli", "bat_contract"] {
            if crates.contains(name) {
                bad.push(format!("{} names the {name} crate", f.rel));
            }
        }
        for r in refs {
            if r.path.first().is_some_and(|m| UPPER.contains(&m.as_str())) {
                bad.push(format!("{} imports {}", f.rel, r.written));
            }
        }
    }
    assert!(bad.is_empty(), "the ledger reaches up:\n{}", bad.join("\n"));
}

#[test]
fn round_contract_and_sim_have_no_import_cycles() {
    // Each crate's files apart: module paths are per crate.
    let mut found = cycles(&crate_files(&workspace(), "bat/src"));
    found.extend(cycles(&crate_files(&workspace(), "contract/src")));
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The checker itself: a made-up tree with one loop, one upward arrow and
/// the module-tree and comment cases that must not count.
#[test]
fn the_checker_finds_loops_and_upward_arrows() {
    let file = |rel: &str, module: &[&str], text: &str| SourceFile {
        rel: rel.to_string(),
        module: module.iter().map(|s| s.to_string()).collect(),
        text: text.to_string(),
    };
    let files = vec![
        file("bat/src/lib.rs", &[], "pub mod round; pub mod engine;"),
        file("bat/src/engine/mod.rs", &["engine"], "pub struct Campaign;"),
        file(
            "bat/src/round/mod.rs",
            &["round"],
            "pub mod a; pub mod b; pub use a::A; pub struct RoundError;",
        ),
        file(
            "bat/src/round/a.rs",
            &["round", "a"],
            "use super::{b::{self, B}, RoundError};\n// crate::engine in a comment\nconst S: &str = \"crate::cli::x\";\npub struct A;",
        ),
        file(
            "bat/src/round/b.rs",
            &["round", "b"],
            "pub struct B; fn f() -> super::a::A { todo!() }\n#[cfg(test)] mod tests { use super::super::c; }",
        ),
        file(
            "bat/src/round/c.rs",
            &["round", "c"],
            "fn g(_: &crate::engine::Campaign) {} fn h(x: char) -> bool { x == '\"' }",
        ),
    ];
    let up = upward_refs(&files);
    assert_eq!(
        up,
        vec!["bat/src/round/c.rs imports crate::engine::Campaign"]
    );
    let found = cycles(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("cycle among bat/src/round/a.rs, bat/src/round/b.rs:"),
        "{}",
        found[0]
    );
    // The `mod tests` block resolves `super::super::c` to `round::c`.
    let refs = references(&files[4]).0;
    assert!(
        refs.iter().any(|r| r.path == ["round", "c"]),
        "{:?}",
        refs.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
}

#[test]
fn engine_and_replay_do_not_name_the_simulator() {
    let files = crate_files(&workspace(), "bat/src");
    assert!(
        files.iter().any(|f| f.rel.starts_with("bat/src/engine/")),
        "found no files under bat/src/engine"
    );
    let bad = sim_refs(&files);
    assert!(
        bad.is_empty(),
        "the engine or replay reaches the simulator:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_loop_and_the_round_record_have_typed_signatures() {
    let files = crate_files(&workspace(), "bat/src");
    for p in TYPED {
        assert!(
            files.iter().any(|f| f.rel.starts_with(p)),
            "found no file {p}"
        );
    }
    let bad = json_in_signatures(&files);
    assert!(
        bad.is_empty(),
        "untyped JSON in signatures:\n{}",
        bad.join("\n")
    );
}

/// The checker of rules c and d on made-up files: a sim import in the
/// engine and in replay, JSON in a public fn, a public field and through a
/// `use`, and the cases that must not count.
#[test]
fn the_checker_finds_sim_imports_and_json_signatures() {
    let file = |rel: &str, module: &[&str], text: &str| SourceFile {
        rel: rel.to_string(),
        module: module.iter().map(|s| s.to_string()).collect(),
        text: text.to_string(),
    };
    let files = vec![
        file(
            "bat/src/engine/rounds.rs",
            &["engine", "rounds"],
            "use crate::sim::RewardMode;\n\
             pub fn run(x: &serde_json::Value) -> u8 { 0 }\n\
             fn private(x: serde_json::Value) {}\n\
             pub fn fine(x: &bat_contract::json::Value) {}\n\
             pub struct Done { pub meta: Option<serde_json::Value>, hidden: serde_json::Value, pub ok: u8 }",
        ),
        file(
            "bat/src/replay/verify.rs",
            &["replay", "verify"],
            "fn f() -> &'static str { super::super::sim::BAT_PLACEHOLDER }",
        ),
        file(
            "bat/src/round/mod.rs",
            &["round"],
            "use serde_json::{Map, Value};\npub(crate) fn meta() -> Value { todo!() }\n// pub fn commented(x: serde_json::Value)",
        ),
        file(
            "bat/src/round/meta.rs",
            &["round", "meta"],
            "pub fn to_value(&self) -> serde_json::Value { todo!() }\nuse crate::sim;",
        ),
    ];
    assert_eq!(
        sim_refs(&files),
        vec![
            "bat/src/engine/rounds.rs imports crate::sim::RewardMode",
            "bat/src/replay/verify.rs imports super::super::sim::BAT_PLACEHOLDER",
        ]
    );
    assert_eq!(
        json_in_signatures(&files),
        vec![
            "bat/src/engine/rounds.rs: fn run has serde_json::Value in its signature",
            "bat/src/engine/rounds.rs: Done.meta is a serde_json::Value",
            "bat/src/round/mod.rs: fn meta has serde_json::Value in its signature",
        ]
    );
}

/// With `autotests = false`, a test file that its crate's runner does not
/// declare is never compiled: every `tests/*.rs` of the root package and of
/// the ledger must be a `mod` of that crate's `tests/runner.rs`.
#[test]
fn every_test_file_is_a_module_of_its_runner() {
    for dir in ["tests", "ledger/tests"] {
        let dir = workspace().join(dir);
        let runner = std::fs::read_to_string(dir.join("runner.rs")).expect("runner.rs is readable");
        let declared: BTreeSet<String> = tokens(&strip(&runner))
            .windows(2)
            .filter(|w| w[0] == "mod")
            .map(|w| w[1].clone())
            .collect();
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("tests dir is readable") {
            let p = entry.expect("dir entry").path();
            let Some(stem) = p.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if p.extension().is_some_and(|e| e == "rs")
                && stem != "runner"
                && !declared.contains(stem)
            {
                missing.push(p.display().to_string());
            }
        }
        assert!(
            declared.len() > 5,
            "found too few modules in {}",
            dir.display()
        );
        assert!(
            missing.is_empty(),
            "test files no runner declares (never compiled): {missing:?}"
        );
    }
}
