//! What every conformance family shares: the result row, the comparison
//! options and reading a vector file. Kept below the family runners so they
//! and [`super::conformance`] (which collects them) import it, not each other.

use std::path::Path;

use serde::Serialize;

use super::pack::Pack;

/// The outcome of one vector.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The vector family (`source`, `rounds`, `eval`, `leakage`, `binding`, `protocol`).
    pub family: String,
    /// The case name within the family.
    pub case: String,
    /// Whether the output matched.
    pub passed: bool,
    /// On failure, what differed first; on success, what was compared.
    pub detail: String,
}

/// How to compare.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    /// The pack under test.
    pub pack: &'a Pack,
    /// Compare every byte. True when the pack's version identifiers equal the
    /// reference's (a pack carrying the reference's own wording). Otherwise
    /// the rendered prompt text, the pack's version identifiers and the
    /// digests that cover them are excluded from the comparison.
    pub exact: bool,
}

/// One result row from a check's outcome (`Ok(detail)` passes).
pub(crate) fn case_result(family: &str, case: &str, outcome: Result<String, String>) -> CaseResult {
    let (passed, detail) = match outcome {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    CaseResult {
        family: family.into(),
        case: case.into(),
        passed,
        detail,
    }
}

/// Read a vector file; the error names it.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Read and parse a JSON vector file; the error names it.
pub(crate) fn read_json(path: &Path) -> Result<super::json::Value, String> {
    super::json::parse_bytes(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))
}
