//! The safe source grid (contract §B): building it, and reading and
//! validating a source file.

use std::collections::BTreeSet;

use super::contract_pack::ContractPack;
pub use super::contract_pack::CONTRACT_FALSE_FLAGS;
use super::json::{self, Map, Value};

/// A source-grid failure; the message is the contract's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The built grid does not have one distinct id per cell.
    #[error("the built source grid does not have exactly one distinct state id per cell")]
    GridInvariantFailed,
    /// A line is not JSON.
    #[error("line {line} of the source file is not valid JSON")]
    LineInvalidJson {
        /// 1-based line number.
        line: usize,
    },
    /// A line is JSON but not an object.
    #[error("line {line} of the source file is not a JSON object")]
    LineNotObject {
        /// 1-based line number.
        line: usize,
    },
    /// `row_sha256` does not cover the row.
    #[error("a source row's row_sha256 is not the digest of the row")]
    RowDigestInvalid,
    /// A missing or repeated `source_state_id`.
    #[error("a source row's source_state_id is missing or repeated")]
    StateIdInvalid,
    /// The training contract is not prompt-only.
    #[error("a source row's training contract is not prompt-only")]
    TrainingContractInvalid,
    /// The provenance admits evaluation content.
    #[error("a source row's provenance admits evaluation content")]
    ProvenanceInvalid,
    /// The rows do not cover the grid exactly once.
    #[error("the source rows do not cover every cell of the grid exactly once")]
    GridIncomplete,
}

impl bat_error::Diagnostic for SourceError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            SourceError::GridIncomplete => Some("source_grid_incomplete".to_string()),
            SourceError::ProvenanceInvalid => Some("source_provenance_invalid".to_string()),
            SourceError::TrainingContractInvalid => {
                Some("source_training_contract_invalid".to_string())
            }
            SourceError::StateIdInvalid => Some("source_state_id_invalid".to_string()),
            SourceError::RowDigestInvalid => Some("source_row_digest_invalid".to_string()),
            SourceError::LineNotObject { line, .. } => {
                Some(format!("source_line_{line}_not_object"))
            }
            SourceError::LineInvalidJson { line, .. } => {
                Some(format!("source_line_{line}_invalid_json"))
            }
            SourceError::GridInvariantFailed => Some("source_grid_invariant_failed".to_string()),
        }
    }
}

/// The rows of the grid in nested focus → track → outcome order.
pub fn build_source_rows(k: &ContractPack) -> Result<Vec<Value>, SourceError> {
    let mut rows = Vec::new();
    let mut ids = BTreeSet::new();
    for focus in &k.focus_values {
        for track in &k.tracks {
            for outcome in &k.outcomes {
                let identity = Map::new()
                    .with("focus_stage", focus.as_str())
                    .with("track", track.as_str())
                    .with("outcome_bucket", outcome.as_str());
                let d = json::digest(&Value::Object(identity))
                    .map_err(|_| SourceError::GridInvariantFailed)?;
                let id = format!(
                    "{}{}",
                    k.source_id_prefix,
                    &d[..k.source_id_hex_chars.min(d.len())]
                );
                ids.insert(id.clone());
                let condition = k
                    .abstract_conditions
                    .get(outcome)
                    .cloned()
                    .unwrap_or_default();
                let mut row = Map::new()
                    .with("schema_version", 1i64)
                    .with("source_state_id", id)
                    .with("focus_stage", focus.as_str())
                    .with("track", track.as_str())
                    .with("outcome_bucket", outcome.as_str())
                    .with("abstract_condition", condition)
                    .with("training_contract", k.training_contract.clone())
                    .with("provenance", k.source_provenance.clone());
                let sha = json::digest(&Value::Object(row.clone()))
                    .map_err(|_| SourceError::GridInvariantFailed)?;
                row.insert("row_sha256", Value::Str(sha));
                rows.push(Value::Object(row));
            }
        }
    }
    let cells = k.focus_values.len() * k.tracks.len() * k.outcomes.len();
    if rows.len() != cells || ids.len() != cells {
        return Err(SourceError::GridInvariantFailed);
    }
    Ok(rows)
}

/// JSONL bytes: `CJ(row) + LF` per row.
pub fn jsonl(rows: &[Value]) -> Result<Vec<u8>, json::EncodeError> {
    let mut out = Vec::new();
    for r in rows {
        out.extend_from_slice(json::canonical_json(r)?.as_bytes());
        out.push(b'\n');
    }
    Ok(out)
}

/// A built source grid: file bytes and manifest.
#[derive(Debug, Clone)]
pub struct BuiltSource {
    /// The bytes of `source.jsonl`.
    pub jsonl: Vec<u8>,
    /// The manifest (write as PJ).
    pub manifest: Value,
}

/// Name of the source file inside the output folder.
pub const SOURCE_FILE: &str = "source.jsonl";

fn str_list(items: &[String]) -> Value {
    Value::Array(items.iter().map(|s| Value::Str(s.clone())).collect())
}

/// Build the grid and its manifest.
pub fn build_source(k: &ContractPack) -> Result<BuiltSource, SourceError> {
    let rows = build_source_rows(k)?;
    let bytes = jsonl(&rows).map_err(|_| SourceError::GridInvariantFailed)?;
    let manifest = Map::new()
        .with("schema_version", 1i64)
        .with("artifact_kind", "bat_safe_source_grid")
        .with("rows", rows.len())
        .with("focus_values", str_list(&k.focus_values))
        .with("tracks", str_list(&k.tracks))
        .with("outcomes", str_list(&k.outcomes))
        .with("source_file", SOURCE_FILE)
        .with("source_sha256", json::sha256_hex(&bytes))
        .with("heldout_safe", true)
        .with("evaluation_content_used", false);
    Ok(BuiltSource {
        jsonl: bytes,
        manifest: Value::Object(manifest),
    })
}

/// Split text into lines the way Python's text-mode file iteration does with
/// universal newlines: `\r\n`, `\r` and `\n` all end a line.
fn python_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'\n' => {
                out.push(&text[start..=i]);
                start = i + 1;
            }
            b'\r' => {
                let end = if b.get(i + 1) == Some(&b'\n') {
                    i + 1
                } else {
                    i
                };
                out.push(&text[start..=end]);
                i = end;
                start = end + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < b.len() {
        out.push(&text[start..]);
    }
    out
}

/// Parse a source file (one JSON object per line) and validate it.
pub fn read_source(bytes: &[u8], k: &ContractPack) -> Result<Vec<Map>, SourceError> {
    // A non-UTF-8 file makes Python fail while decoding line 1's buffer; the
    // closest code is the first line's JSON error.
    let text = std::str::from_utf8(bytes).map_err(|_| SourceError::LineInvalidJson { line: 1 })?;
    let mut rows = Vec::new();
    for (i, line) in python_lines(text).into_iter().enumerate() {
        let v = json::parse(line).map_err(|_| SourceError::LineInvalidJson { line: i + 1 })?;
        match v {
            Value::Object(m) => rows.push(m),
            _ => return Err(SourceError::LineNotObject { line: i + 1 }),
        }
    }
    validate_source(&rows, k)?;
    Ok(rows)
}

/// Python `str(x)` for the values a grid cell can hold; non-strings never
/// equal a grid value, so any distinct rendering will do for them.
fn cell_str(v: Option<&Value>) -> String {
    match v {
        Some(Value::Str(s)) => s.clone(),
        Some(other) => json::ascii_json(other)
            .map(|s| format!("\u{0}{s}"))
            .unwrap_or_default(),
        None => "\u{0}None".into(),
    }
}

/// The §B reading checks, in file order, first failure wins.
pub fn validate_source(rows: &[Map], k: &ContractPack) -> Result<(), SourceError> {
    let mut expected = BTreeSet::new();
    for f in &k.focus_values {
        for t in &k.tracks {
            for o in &k.outcomes {
                expected.insert((f.clone(), t.clone(), o.clone()));
            }
        }
    }
    let mut observed = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for row in rows {
        let mut copy = row.clone();
        let declared = copy.remove("row_sha256");
        let actual =
            json::digest(&Value::Object(copy)).map_err(|_| SourceError::RowDigestInvalid)?;
        if declared != Some(Value::Str(actual)) {
            return Err(SourceError::RowDigestInvalid);
        }
        observed.insert((
            cell_str(row.get("focus_stage")),
            cell_str(row.get("track")),
            cell_str(row.get("outcome_bucket")),
        ));
        match row.get("source_state_id") {
            Some(Value::Str(s)) if !ids.contains(s) => {
                ids.insert(s.clone());
            }
            _ => return Err(SourceError::StateIdInvalid),
        }
        let Some(contract) = row.get("training_contract").and_then(Value::as_object) else {
            return Err(SourceError::TrainingContractInvalid);
        };
        if contract.get("prompt_only") != Some(&Value::Bool(true))
            || CONTRACT_FALSE_FLAGS
                .iter()
                .any(|f| contract.get(f) != Some(&Value::Bool(false)))
        {
            return Err(SourceError::TrainingContractInvalid);
        }
        let prov_ok = row
            .get("provenance")
            .and_then(Value::as_object)
            .is_some_and(|p| p.get("evaluation_content_used") == Some(&Value::Bool(false)));
        if !prov_ok {
            return Err(SourceError::ProvenanceInvalid);
        }
    }
    let cells = expected.len();
    if rows.len() != cells || observed != expected || ids.len() != cells {
        return Err(SourceError::GridIncomplete);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn universal_newlines() {
        assert_eq!(
            python_lines("a\r\nb\rc\nd"),
            vec!["a\r\n", "b\r", "c\n", "d"]
        );
        assert!(python_lines("").is_empty());
    }
}
