//! docs/errors.md lists every error code a user can meet: the codes the
//! sources can produce are collected (the string literals of every
//! `Diagnostic::code()` body, and the evaluation and gate codes given to
//! `invalid(…)` or as `code: "…"` in contract/src/summary.rs and gate.rs),
//! their `{…}` parts
//! written as the page writes them (`{round_id}` → `ROUND`, `{rc}` → `RC`,
//! any other → `N`), and each must appear on the page in backquotes.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("source dir is readable")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The string literal starting at `text[at..]` (which must be `"`).
fn literal_at(text: &str, at: usize) -> Option<&str> {
    let rest = text.get(at..)?.strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(&rest[..end])
}

/// Whether `s` is shaped like a code: lowercase words joined by `_` or `:`,
/// with `{name}` parts.
fn code_shaped(s: &str) -> bool {
    s.contains('_')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_:{}".contains(&b))
}

/// The body of every `fn code(&self)` in `text`.
fn code_bodies(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("fn code(&self)") {
        let start = from + i;
        let Some(open) = text[start..].find('{').map(|o| start + o) else {
            break;
        };
        let mut depth = 0usize;
        let mut end = open;
        for (k, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push(&text[open..end]);
        from = end.max(start + 1);
    }
    out
}

/// Literals passed as the first argument of `invalid(` / `invalid_at(`
/// (directly or through `format!(`), or written as a `code: "…"` field.
fn invalid_args(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for call in ["invalid(", "invalid_at(", "code: "] {
        let mut from = 0;
        while let Some(i) = text[from..].find(call) {
            let mut at = from + i + call.len();
            from = at;
            at += text[at..].len() - text[at..].trim_start().len();
            if text[at..].starts_with("format!(") {
                at += "format!(".len();
            }
            if let Some(lit) = literal_at(text, at) {
                out.push(lit);
            }
        }
    }
    out
}

/// `{round_id}` → `ROUND`, `{rc}` → `RC`, other `{…}` → `N`.
fn as_documented(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
        out.push_str(match &rest[open + 1..close] {
            "round_id" => "ROUND",
            "rc" => "RC",
            _ => "N",
        });
        rest = rest.get(close + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// Every code the sources can produce, as the page writes it.
fn source_codes() -> Vec<String> {
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["contract/src", "bat/src", "ledger/src", "error/src", "src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut codes = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source file is UTF-8");
        for body in code_bodies(&text) {
            let mut from = 0;
            while let Some(q) = body[from..].find('"') {
                let at = from + q;
                let Some(lit) = literal_at(body, at) else {
                    break;
                };
                if code_shaped(lit) {
                    codes.push(as_documented(lit));
                }
                from = at + lit.len() + 2;
            }
        }
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if f.starts_with(root.join("contract/src")) && matches!(name, "summary.rs" | "gate.rs") {
            for lit in invalid_args(&text) {
                // `{label}_invalid` is a stage or score field, listed by name.
                if code_shaped(lit) && !lit.starts_with("{label}") {
                    codes.push(as_documented(lit));
                }
            }
        }
    }
    codes.sort();
    codes.dedup();
    codes
}

#[test]
fn every_error_code_is_documented_in_docs_errors_md() {
    let page = std::fs::read_to_string(workspace().join("docs/errors.md"))
        .expect("docs/errors.md is readable");
    let codes = source_codes();
    // The scan found the codes it should (a scan that finds nothing would
    // pass vacuously).
    for known in [
        "trainer_failed:ROUND:RC",
        "evaluation_cell_N_invalid",
        "stage_scores_invalid",
        "paired_cells_mismatch",
        "source_line_N_invalid_json",
    ] {
        assert!(
            codes.iter().any(|c| c == known),
            "{known} not found in {codes:?}"
        );
    }
    let missing: Vec<&String> = codes
        .iter()
        .filter(|c| !page.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "codes missing from docs/errors.md (add a row with meaning and fix): {missing:?}"
    );
    for stage in ["S1", "S5", "task_score", "agentic_score"] {
        assert!(
            page.contains(&format!("`{stage}_invalid`")),
            "{stage}_invalid"
        );
    }
}
