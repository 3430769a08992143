//! Runtime tool-protocol binding (contract §I): the serving runtime's tool
//! format is recorded as a receipt and never serialized into training data.

use super::json::{self, python_eq, sha256_hex, Map, Value};
use super::numeric::py_strip;

/// A protocol failure; the message is the contract's error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// No format was given (not a string).
    #[error("no runtime tool format was given")]
    Missing,
    /// The normalized format does not match `^[a-z0-9][a-z0-9_.-]{0,63}$`.
    #[error("the runtime tool format is not valid: use up to 64 lowercase letters, digits, `_`, `.` or `-`, starting with a letter or digit")]
    Invalid,
    /// The receipt is not an object.
    #[error("the runtime tool receipt is not a JSON object")]
    ReceiptInvalid,
    /// The receipt differs from the recomputed one.
    #[error("the runtime tool receipt differs from the one recomputed from the format")]
    ReceiptMismatch,
}

impl bat_error::Diagnostic for ProtocolError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            ProtocolError::ReceiptMismatch => Some("runtime_tool_receipt_mismatch".to_string()),
            ProtocolError::ReceiptInvalid => Some("runtime_tool_receipt_invalid".to_string()),
            ProtocolError::Invalid => Some("runtime_tool_format_invalid".to_string()),
            ProtocolError::Missing => Some("runtime_tool_format_missing".to_string()),
        }
    }
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
        json::ascii_json(&Value::Object(m.clone()))
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
    if !python_eq(value, &expected) {
        return Err(ProtocolError::ReceiptMismatch);
    }
    Ok(value.clone())
}

/// Round-start and admission failures (§I); the message is the contract code.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The prescription is not a schema-1 `bat_round_prescription` object.
    #[error("the round prescription is not a schema-1 bat_round_prescription object")]
    PrescriptionInvalid,
    /// The model's identity differs from `starting_checkpoint_sha256`.
    #[error("the model's identity differs from the prescription's starting checkpoint")]
    InheritanceMismatch,
    /// The prescription has no optimizer object.
    #[error("the round prescription has no optimizer")]
    OptimizerMissing,
    /// An optimizer override differs from the prescribed one.
    #[error("an optimizer override differs from the prescribed optimizer")]
    OptimizerMismatch,
    /// The dataset manifest's target differs from the prescription's.
    #[error("the dataset manifest's target stage differs from the prescription's")]
    DatasetTargetDisagrees,
    /// Binding the model failed.
    #[error(transparent)]
    Binding(#[from] super::binding::BindingError),
    /// The runtime protocol is invalid.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl bat_error::Diagnostic for StartError {
    fn kind(&self) -> bat_error::ErrorKind {
        match self {
            StartError::Binding(e) => e.kind(),
            StartError::Protocol(e) => e.kind(),
            _ => bat_error::ErrorKind::User,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            StartError::Binding(e) => e.hint(),
            StartError::Protocol(e) => e.hint(),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            StartError::Binding(e) => e.code(),
            StartError::Protocol(e) => e.code(),
            StartError::DatasetTargetDisagrees => {
                Some("dataset_target_disagrees_with_prescription".to_string())
            }
            StartError::OptimizerMismatch => Some("round_optimizer_mismatch".to_string()),
            StartError::OptimizerMissing => Some("round_optimizer_missing".to_string()),
            StartError::InheritanceMismatch => {
                Some("round_checkpoint_inheritance_mismatch".to_string())
            }
            StartError::PrescriptionInvalid => Some("round_prescription_invalid".to_string()),
        }
    }
}

/// A passed round-start check.
#[derive(Debug, Clone)]
pub struct RoundStart {
    /// The prescription's `target_stage` (any JSON value, null if absent).
    pub target_stage: Value,
    /// The prescription's `starting_checkpoint_sha256`.
    pub checkpoint_sha256: Value,
    /// The prescribed optimizer object.
    pub optimizer: Value,
}

impl RoundStart {
    /// The reference validator's stdout document.
    pub fn report(&self) -> Value {
        Value::Object(
            Map::new()
                .with("status", "passed")
                .with("target_stage", self.target_stage.clone())
                .with("checkpoint_sha256", self.checkpoint_sha256.clone())
                .with("optimizer", self.optimizer.clone()),
        )
    }
}

/// §I round-start: the prescription must be a schema-1 prescription, the
/// model (bound as experiment `round-start`, step 0, baseline) must be the
/// prescribed starting checkpoint, and the optimizer must be present and
/// equal any override.
pub fn validate_round_start(
    prescription: &Value,
    model_path: &std::path::Path,
    optimizer_override: Option<&Value>,
) -> Result<RoundStart, StartError> {
    let p = prescription
        .as_object()
        .ok_or(StartError::PrescriptionInvalid)?;
    let schema_ok = p
        .get("schema_version")
        .is_some_and(|v| python_eq(v, &Value::Int(1)));
    if p.get("artifact_kind").and_then(Value::as_str) != Some("bat_round_prescription")
        || !schema_ok
    {
        return Err(StartError::PrescriptionInvalid);
    }
    let id = super::binding::model_identity(model_path)?;
    let expected = p
        .get("starting_checkpoint_sha256")
        .cloned()
        .unwrap_or(Value::Null);
    if !python_eq(&Value::Str(id.model_identity_sha256), &expected) {
        return Err(StartError::InheritanceMismatch);
    }
    let optimizer = match p.get("optimizer") {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => return Err(StartError::OptimizerMissing),
    };
    if let Some(o) = optimizer_override {
        if !python_eq(o, &optimizer) {
            return Err(StartError::OptimizerMismatch);
        }
    }
    Ok(RoundStart {
        target_stage: p.get("target_stage").cloned().unwrap_or(Value::Null),
        checkpoint_sha256: expected,
        optimizer,
    })
}

/// §I admission receipt, after [`validate_round_start`] and the dataset
/// verification (whose `train_sha256` is passed in) have both passed.
pub fn admission_receipt(
    start: &RoundStart,
    dataset_train_sha256: &str,
    manifest: &Value,
    manifest_sha256: &str,
    prescription_sha256: &str,
    runtime_tool_format: &str,
) -> Result<Value, StartError> {
    let manifest_target = manifest.get("target_stage").unwrap_or(&Value::Null);
    if !python_eq(manifest_target, &start.target_stage) {
        return Err(StartError::DatasetTargetDisagrees);
    }
    Ok(Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_round_start_contract")
            .with("checkpoint_sha256", start.checkpoint_sha256.clone())
            .with("train_sha256", dataset_train_sha256)
            .with("manifest_sha256", manifest_sha256)
            .with("prescription_sha256", prescription_sha256)
            .with("target_stage", start.target_stage.clone())
            .with("optimizer", start.optimizer.clone())
            .with(
                "runtime_protocol",
                runtime_protocol_binding(Some(runtime_tool_format))?,
            ),
    ))
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

    #[test]
    fn python_equality() {
        let p = |s: &str| json::parse(s).expect("json");
        assert!(python_eq(
            &p(r#"{"a": 1, "b": [true, 2.0]}"#),
            &p(r#"{"b": [1, 2], "a": 1.0}"#)
        ));
        assert!(!python_eq(&p(r#"{"a": 1}"#), &p(r#"{"a": 1, "b": 2}"#)));
        assert!(!python_eq(&p("NaN"), &p("NaN")));
        assert!(!python_eq(&p(r#""1""#), &p("1")));
        assert!(python_eq(&p("null"), &p("null")));
        assert!(!python_eq(&p("null"), &p("0")));
    }
}
