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

/// Run the `bat` command line: `argv` as `sys.argv` gives it (the program
/// name first), the exit code returned. The same `main` as the native
/// binary, so output, exit codes, `--version`, the pager, a closed pipe
/// (no message) and Ctrl-C (exit 130 for verbs that stop at a safe point)
/// behave alike; the caller (`batledger._cli`) restores the
/// default SIGINT action first, as a native process has it. `exe` is the
/// console script itself: what the demo prints and the simulator backend
/// starts as `{bat}` (the process's executable is the interpreter). The GIL
/// is released for the whole run.
#[pyfunction]
#[pyo3(signature = (argv, exe=None))]
fn cli_main(
    py: Python<'_>,
    argv: Vec<std::ffi::OsString>,
    exe: Option<std::path::PathBuf>,
) -> u8 {
    let code = py.detach(|| match exe {
        Some(exe) => bat_cli::cli::main_with_args_as(exe, argv),
        None => bat_cli::cli::main_with_args(argv),
    });
    exit_code_number(code)
}

/// The number an `ExitCode` stands for (`ExitCode` exposes none; every code
/// the CLI returns is built from a `u8`, so one of them compares equal).
fn exit_code_number(code: std::process::ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|n| std::process::ExitCode::from(*n) == code)
        .unwrap_or(1)
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
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
