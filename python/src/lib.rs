//! `batledger._native`: the Rust core of the `batledger` Python package,
//! PyO3 bindings over the `bat` and `bat-ledger` crates.
//!
//! Every call that touches the ledger runs with the GIL released
//! (`Python::detach`) and returns plain Rust data, converted to Python
//! objects afterwards. Errors become the exceptions of [`errors`], carrying
//! the CLI's message and hints. No `unwrap` on anything a caller passes in;
//! PyO3 turns a panic into a Python `PanicException` rather than unwinding
//! across the FFI boundary.
//!
//! Like the other crates, this one is `#![forbid(unsafe_code)]`; the
//! crate compiles with it, although PyO3's `#[pymodule]`, `#[pyclass]`,
//! `#[pymethods]` and `create_exception!` expand to `unsafe` C-API glue:
//! code from an external macro is not linted (checked with PyO3 0.30.1).

#![forbid(unsafe_code)]

mod convert;
mod errors;
mod ledger;

use pyo3::prelude::*;

/// The training-code provenance `bat commit` records for a round: git
/// HEAD, branch, dirtiness and a digest of the uncommitted patch of the
/// repository at or above `path`.
#[pyfunction]
fn code_provenance(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Py<PyAny>> {
    let out = py.detach(|| -> errors::Outcome<serde_json::Value> {
        let p = bat::round::code_provenance(&path)?;
        serde_json::to_value(p).map_err(|e| errors::Failure::msg(e.to_string()))
    });
    match out {
        Ok(v) => convert::to_py(py, &v),
        Err(f) => Err(f.into_py(py)),
    }
}

/// Whether `path` has a round directory's layout (the test `bat commit`
/// uses to choose round validation over a plain commit).
#[pyfunction]
fn looks_like_round(path: std::path::PathBuf) -> bool {
    bat::round::layout::looks_like_round(&path)
}

/// The round-row column names, in order (docs/rounds.md).
#[pyfunction]
fn round_columns() -> Vec<&'static str> {
    bat::inspect::rounds::COLUMNS.to_vec()
}

/// The module: `Ledger`, `Commit`, the exception classes and
/// `code_provenance`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<ledger::PyLedger>()?;
    m.add_class::<ledger::PyCommit>()?;
    m.add("LedgerError", py.get_type::<errors::LedgerError>())?;
    m.add("NotFound", py.get_type::<errors::NotFound>())?;
    m.add("Corrupt", py.get_type::<errors::Corrupt>())?;
    m.add("RoundRejected", py.get_type::<errors::RoundRejected>())?;
    m.add_function(wrap_pyfunction!(code_provenance, m)?)?;
    m.add_function(wrap_pyfunction!(looks_like_round, m)?)?;
    m.add_function(wrap_pyfunction!(round_columns, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
