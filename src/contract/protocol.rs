//! Runtime tool-protocol binding (contract §I): the serving runtime's tool
//! format is recorded as a receipt and never serialized into training data.

use super::json::{self, sha256_hex, Map, Value};
use super::numeric::py_strip;

/// A protocol failure; the message is the contract's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// No format was given (not a string).
    #[error("runtime_tool_format_missing")]
    Missing,
    /// The normalized format does not match `^[a-z0-9][a-z0-9_.-]{0,63}$`.
    #[error("runtime_tool_format_invalid")]
    Invalid,
    /// The receipt is not an object.
    #[error("runtime_tool_receipt_invalid")]
    ReceiptInvalid,
    /// The receipt differs from the recomputed one.
    #[error("runtime_tool_receipt_mismatch")]
    ReceiptMismatch,
}

/// The environment variable the reference reads when no format is given.
/// The library never reads it; the CLI passes its value in.
pub const RUNTIME_TOOL_FORMAT_ENV: &str = "BAT_RUNTIME_TOOL_FORMAT";

/// Strip (Python whitespace), lowercase (full Unicode lowercase, so the
/// Kelvin sign becomes `k`) and validate a runtime tool format.
pub fn validate_runtime_protocol(value: Option<&str>) -> Result<String, ProtocolError> {
    let raw = value.ok_or(ProtocolError::Missing)?;
    let protocol = py_strip(raw).to_lowercase();
    let b = protocol.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..].iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'.' | b'-')
        });
    if ok {
        Ok(protocol)
    } else {
        Err(ProtocolError::Invalid)
    }
}

/// The runtime-protocol binding receipt for a format (§I).
pub fn runtime_protocol_binding(value: Option<&str>) -> Result<Value, ProtocolError> {
    let protocol = validate_runtime_protocol(value)?;
    let mut m = Map::new()
        .with("schema_version", 1)
        .with("runtime_tool_format", protocol)
        .with("binding_scope", "runtime_only")
        .with("model_specific_serialization_in_training_data", false)
        .with("injected_first_action", false);
    // Only strings, ints and bools: AJ cannot fail.
    let sha = sha256_hex(
        json::to_aj(&Value::Object(m.clone()))
            .unwrap_or_default()
            .as_bytes(),
    );
    m.insert("binding_sha256", Value::Str(sha));
    Ok(Value::Object(m))
}

/// Recompute a receipt from its `runtime_tool_format` and compare the whole
/// object (key order aside, as Python dict equality).
pub fn validate_protocol_receipt(value: &Value) -> Result<Value, ProtocolError> {
    let m = value.as_object().ok_or(ProtocolError::ReceiptInvalid)?;
    let format = match m.get("runtime_tool_format") {
        Some(Value::Str(s)) => Some(s.as_str()),
        _ => None,
    };
    let expected = runtime_protocol_binding(format)?;
    if !same_object(
        m,
        expected.as_object().ok_or(ProtocolError::ReceiptInvalid)?,
    ) {
        return Err(ProtocolError::ReceiptMismatch);
    }
    Ok(value.clone())
}

/// Python dict equality for flat receipts: same keys, equal values, any order.
fn same_object(a: &Map, b: &Map) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.get(k).is_some_and(|w| scalar_eq(v, w)))
}

/// Python `==` on the scalars a receipt holds (`1 == 1.0 == True`).
fn scalar_eq(a: &Value, b: &Value) -> bool {
    let num = |v: &Value| match v {
        Value::Bool(x) => Some(f64::from(u8::from(*x))),
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization() {
        assert_eq!(
            validate_runtime_protocol(Some(" Qwen3_Coder ")),
            Ok("qwen3_coder".into())
        );
        assert_eq!(
            validate_runtime_protocol(Some("\u{212a}imi")),
            Ok("kimi".into())
        );
        assert_eq!(validate_runtime_protocol(None), Err(ProtocolError::Missing));
        assert_eq!(
            validate_runtime_protocol(Some("-x")),
            Err(ProtocolError::Invalid)
        );
        assert_eq!(
            validate_runtime_protocol(Some(&"x".repeat(65))),
            Err(ProtocolError::Invalid)
        );
        assert_eq!(validate_runtime_protocol(Some("a\n")), Ok("a".into()));
    }

    #[test]
    fn receipts_round_trip_and_detect_tampering() {
        let r = runtime_protocol_binding(Some("hermes")).expect("valid");
        assert_eq!(validate_protocol_receipt(&r), Ok(r.clone()));
        let mut m = r.as_object().cloned().expect("object");
        m.insert("injected_first_action", Value::Bool(true));
        assert_eq!(
            validate_protocol_receipt(&Value::Object(m)),
            Err(ProtocolError::ReceiptMismatch)
        );
        assert_eq!(
            validate_protocol_receipt(&Value::Null),
            Err(ProtocolError::ReceiptInvalid)
        );
        let mut m = r.as_object().cloned().expect("object");
        m.insert("runtime_tool_format", Value::Int(1));
        assert_eq!(
            validate_protocol_receipt(&Value::Object(m)),
            Err(ProtocolError::Missing)
        );
    }
}
