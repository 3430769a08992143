//! JSON values across the boundary. Python's own `json` module does the
//! conversion: dicts, lists, str, int, float, bool and None come out the
//! way `json.loads` makes them (floats round-trip exactly: serde_json
//! writes the shortest representation that reads back to the same bits).

use pyo3::prelude::*;

/// A JSON value as a Python object.
pub fn to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(v).map_err(|e| {
        pyo3::exceptions::PyValueError::new_err(format!("cannot encode a value as JSON: {e}"))
    })?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// A Python object (dict, list, scalars) as a JSON value.
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let text: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| {
        pyo3::exceptions::PyValueError::new_err(format!("metadata is not JSON-representable: {e}"))
    })
}
