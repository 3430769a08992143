//! Gate-model binding (contract §G.1–G.3, plus the §G.4 receipt helpers):
//! a content identity for an exported Hugging Face model folder, and the
//! evaluation request that names it.
//!
//! The binder, like the reference, does not parse weight files: a
//! safetensors shard counts as a non-empty regular file inside the model
//! folder; its header is not interpreted.

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::json::{self, sha256_hex, Map, Value};
use super::numeric::py_strip;

/// A binding failure. The messages are the reference's ValueError messages,
/// each ending with a path.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The model path given is a symlink.
    #[error("model path must not be a symlink: {path}")]
    PathIsSymlink {
        /// The path as given.
        path: String,
    },
    /// The resolved model path is not a directory.
    #[error("model path is not a directory: {path}")]
    NotADirectory {
        /// The resolved path.
        path: String,
    },
    /// `config.json` is not a file.
    #[error("model config is missing: {path}")]
    ConfigMissing {
        /// The expected config path.
        path: String,
    },
    /// The weight index is not an object with a non-empty `weight_map`.
    #[error("model weight index is malformed: {path}")]
    IndexMalformed {
        /// The index path.
        path: String,
    },
    /// A weight resolves outside the model folder.
    #[error("model weight escapes model directory: {path}")]
    WeightEscapes {
        /// The weight path.
        path: String,
    },
    /// A weight is a symlink, not a regular file, or empty.
    #[error("model weight is not a non-empty regular file: {path}")]
    WeightNotRegular {
        /// The weight path.
        path: String,
    },
    /// No weights were found.
    #[error("model weights are missing or incomplete: {path}")]
    WeightsMissing {
        /// The model folder.
        path: String,
    },
    /// A symlink somewhere in the model folder.
    #[error("model export must not contain symlinks: {path}")]
    SymlinkInExport {
        /// The symlink.
        path: String,
    },
    /// The model folder has no regular files.
    #[error("model export contains no files: {path}")]
    NoFiles {
        /// The model folder.
        path: String,
    },
    /// A file's (dev, inode, size, mtime) changed while it was hashed.
    #[error("model file changed while hashing: {path}")]
    ChangedWhileHashing {
        /// The file.
        path: String,
    },
    /// A path that must exist does not (the reference's FileNotFoundError).
    #[error("FileNotFoundError: [Errno 2] No such file or directory: '{path}'")]
    NotFound {
        /// The missing path.
        path: String,
    },
    /// A file name that is not UTF-8 (the reference would surrogate-escape it).
    #[error("unsupported non-UTF-8 file name in model export: {path}")]
    NonUtf8Name {
        /// The path, lossily decoded.
        path: String,
    },
    /// Any other I/O failure.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The index file is not valid JSON (the reference crashes with JSONDecodeError).
    #[error("JSONDecodeError in {path}: {reason}")]
    IndexJson {
        /// The index path.
        path: String,
        /// The parser's message.
        reason: String,
    },
}

impl bat_error::Diagnostic for BindingError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

fn disp(p: &Path) -> String {
    p.display().to_string()
}

fn io_err(p: &Path, source: std::io::Error) -> BindingError {
    if source.kind() == std::io::ErrorKind::NotFound {
        BindingError::NotFound { path: disp(p) }
    } else {
        BindingError::Io {
            path: disp(p),
            source,
        }
    }
}

/// Python `Path.resolve(strict=True)`.
fn resolve(p: &Path) -> Result<PathBuf, BindingError> {
    fs::canonicalize(p).map_err(|e| io_err(p, e))
}

fn is_symlink(p: &Path) -> bool {
    fs::symlink_metadata(p)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

fn is_file(p: &Path) -> bool {
    fs::metadata(p).map(|m| m.is_file()).unwrap_or(false)
}

/// Path components relative to `base`, as UTF-8 strings.
fn rel_components(base: &Path, p: &Path) -> Result<Vec<String>, BindingError> {
    let rel = p
        .strip_prefix(base)
        .map_err(|_| BindingError::WeightEscapes { path: disp(p) })?;
    rel.components()
        .map(|c| {
            c.as_os_str()
                .to_str()
                .map(str::to_string)
                .ok_or_else(|| BindingError::NonUtf8Name { path: disp(p) })
        })
        .collect()
}

/// Every entry under `dir` (not following symlinks), with its components.
fn walk(
    dir: &Path,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, PathBuf)>,
) -> Result<(), BindingError> {
    let rd = fs::read_dir(dir).map_err(|e| io_err(dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry
            .file_name()
            .to_str()
            .map(str::to_string)
            .ok_or_else(|| BindingError::NonUtf8Name {
                path: disp(&entry.path()),
            })?;
        let mut comps = prefix.to_vec();
        comps.push(name);
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| io_err(&path, e))?;
        if ft.is_dir() {
            walk(&path, &comps, out)?;
        }
        out.push((comps, path));
    }
    Ok(())
}

struct Fingerprint(u64, u64, u64, i64, i64);

fn fingerprint(p: &Path) -> Result<Fingerprint, BindingError> {
    let m = fs::metadata(p).map_err(|e| io_err(p, e))?;
    Ok(Fingerprint(
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
    ))
}

/// SHA-256 of a file, failing if its stat fingerprint changed meanwhile.
fn hash_file(p: &Path) -> Result<(String, u64), BindingError> {
    use sha2::{Digest, Sha256};
    let before = fingerprint(p)?;
    let mut f = fs::File::open(p).map_err(|e| io_err(p, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| io_err(p, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let after = fingerprint(p)?;
    let same = before.0 == after.0
        && before.1 == after.1
        && before.2 == after.2
        && before.3 == after.3
        && before.4 == after.4;
    if !same {
        return Err(BindingError::ChangedWhileHashing { path: disp(p) });
    }
    Ok((hex::encode(h.finalize()), after.2))
}

/// The weight files (unresolved, sorted by components) and the index path.
fn weight_paths(model: &Path) -> Result<(Vec<PathBuf>, Option<PathBuf>), BindingError> {
    for name in [
        "model.safetensors.index.json",
        "pytorch_model.bin.index.json",
    ] {
        let index = model.join(name);
        if !is_file(&index) {
            continue;
        }
        let bytes = crate::fsutil::read_json_input(&index).map_err(|e| io_err(&index, e))?;
        let payload = json::parse_bytes(&bytes).map_err(|e| BindingError::IndexJson {
            path: disp(&index),
            reason: e.to_string(),
        })?;
        let map = match payload.get("weight_map") {
            Some(Value::Object(m)) if !m.is_empty() => m,
            _ => return Err(BindingError::IndexMalformed { path: disp(&index) }),
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for (_, v) in map.iter() {
            // Python `str(value)`; non-string values are unusual but allowed.
            let rel = match v {
                Value::Str(s) => s.clone(),
                other => json::pretty_json(other),
            };
            let p = model.join(rel);
            if !files.contains(&p) {
                files.push(p);
            }
        }
        files.sort_by(|a, b| a.components().cmp(b.components()));
        return Ok((files, Some(index)));
    }
    let mut st = Vec::new();
    let mut bin = Vec::new();
    for entry in fs::read_dir(model).map_err(|e| io_err(model, e))? {
        let entry = entry.map_err(|e| io_err(model, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with("model")
            && name.ends_with(".safetensors")
            && name.len() >= "model.safetensors".len()
        {
            st.push(entry.path());
        } else if name.starts_with("pytorch_model")
            && name.ends_with(".bin")
            && name.len() >= "pytorch_model.bin".len()
        {
            bin.push(entry.path());
        }
    }
    let mut files = if st.is_empty() { bin } else { st };
    files.sort();
    Ok((files, None))
}

/// The model identity of §G.2: `identity_basis` members and the identity digest.
#[derive(Debug, Clone)]
pub struct ModelIdentity {
    /// `identity_basis` as an object (model_content_sha256, config_sha256,
    /// weight_index_sha256, files, weights).
    pub basis: Map,
    /// `model_identity_sha256`.
    pub model_identity_sha256: String,
}

/// §G.1–G.2: walk and hash a model folder.
pub fn model_identity(model_path: &Path) -> Result<ModelIdentity, BindingError> {
    if is_symlink(model_path) {
        return Err(BindingError::PathIsSymlink {
            path: disp(model_path),
        });
    }
    let model = resolve(model_path)?;
    if !model.is_dir() {
        return Err(BindingError::NotADirectory { path: disp(&model) });
    }
    let config = model.join("config.json");
    if !is_file(&config) {
        return Err(BindingError::ConfigMissing {
            path: disp(&config),
        });
    }
    let (weights, index) = weight_paths(&model)?;
    let mut resolved_weights: Vec<(Vec<String>, PathBuf)> = Vec::new();
    for path in &weights {
        let resolved = resolve(path)?;
        if !resolved.starts_with(&model) {
            return Err(BindingError::WeightEscapes { path: disp(path) });
        }
        let nonempty_regular = fs::metadata(&resolved)
            .map(|m| m.is_file() && m.len() > 0)
            .unwrap_or(false);
        if is_symlink(path) || !nonempty_regular {
            return Err(BindingError::WeightNotRegular { path: disp(path) });
        }
        let comps = rel_components(&model, &resolved)?;
        if !resolved_weights.iter().any(|(c, _)| *c == comps) {
            resolved_weights.push((comps, resolved));
        }
    }
    resolved_weights.sort_by(|a, b| a.0.cmp(&b.0));
    if resolved_weights.is_empty() {
        return Err(BindingError::WeightsMissing { path: disp(&model) });
    }

    let mut entries = Vec::new();
    walk(&model, &[], &mut entries)?;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut files: Vec<(Vec<String>, PathBuf)> = Vec::new();
    for (comps, path) in entries {
        if is_symlink(&path) {
            return Err(BindingError::SymlinkInExport { path: disp(&path) });
        }
        if is_file(&path) {
            files.push((comps, path));
        }
    }
    if files.is_empty() {
        return Err(BindingError::NoFiles { path: disp(&model) });
    }

    let mut rows = Vec::with_capacity(files.len());
    let mut shas: Vec<(Vec<String>, String, u64)> = Vec::with_capacity(files.len());
    for (comps, path) in &files {
        let (sha, size) = hash_file(path)?;
        rows.push(Value::Object(
            Map::new()
                .with("path", comps.join("/"))
                .with("size_bytes", size)
                .with("sha256", sha.as_str()),
        ));
        shas.push((comps.clone(), sha, size));
    }
    let lookup = |comps: &[String]| shas.iter().find(|(c, _, _)| c.as_slice() == comps);
    let weight_rows: Vec<Value> = resolved_weights
        .iter()
        .filter_map(|(comps, _)| {
            lookup(comps).map(|(_, sha, size)| {
                Value::Object(
                    Map::new()
                        .with("name", comps.join("/"))
                        .with("size_bytes", *size)
                        .with("sha256", sha.as_str()),
                )
            })
        })
        .collect();
    let files_value = Value::Array(rows);
    // Files and weights only hold ints and strings, which always encode.
    let content_sha = sha256_hex(
        json::ascii_json(&files_value)
            .unwrap_or_default()
            .as_bytes(),
    );
    let config_sha = lookup(&["config.json".to_string()])
        .map(|(_, s, _)| s.clone())
        .unwrap_or_default();
    let index_sha = match &index {
        Some(ix) => {
            let comps = rel_components(&model, &resolve(ix)?)?;
            lookup(&comps)
                .map(|(_, s, _)| Value::Str(s.clone()))
                .unwrap_or(Value::Null)
        }
        None => Value::Null,
    };
    let basis = Map::new()
        .with("model_content_sha256", content_sha)
        .with("config_sha256", config_sha)
        .with("weight_index_sha256", index_sha)
        .with("files", files_value)
        .with("weights", Value::Array(weight_rows));
    let identity = sha256_hex(
        json::ascii_json(&Value::Object(basis.clone()))
            .unwrap_or_default()
            .as_bytes(),
    );
    Ok(ModelIdentity {
        basis,
        model_identity_sha256: identity,
    })
}

/// The evaluation arm of a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// `baseline`
    Baseline,
    /// `candidate`
    Candidate,
}

impl Arm {
    /// The arm's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Baseline => "baseline",
            Arm::Candidate => "candidate",
        }
    }
}

/// §G.2: the binding document (schema_version 2).
pub fn build_binding(
    model_path: &Path,
    experiment_name: &str,
    gate_step: u64,
    arm: Arm,
) -> Result<Value, BindingError> {
    let id = model_identity(model_path)?;
    let mut m = Map::new()
        .with("artifact_kind", "bat_gate_model_binding")
        .with("schema_version", 2)
        .with("experiment_name", experiment_name)
        .with("gate_step", gate_step)
        .with("arm", arm.as_str());
    for (k, v) in id.basis.iter() {
        m.insert(k.clone(), v.clone());
    }
    m.insert(
        "model_identity_sha256",
        Value::Str(id.model_identity_sha256),
    );
    Ok(Value::Object(m))
}

/// Python `str(Path(p))` for a POSIX path: repeated slashes collapse, `.`
/// components and a trailing slash disappear (a leading `//` is kept).
pub fn python_path_str(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let root = if p.starts_with("//") && !p.starts_with("///") {
        "//"
    } else if p.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = p
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let joined = parts.join("/");
    if root.is_empty() && joined.is_empty() {
        ".".into()
    } else {
        format!("{root}{joined}")
    }
}

/// The binder's stdout line: `{"model_identity_sha256": "…", "output": "…"}`
/// with Python's default separators and ASCII escaping (no trailing LF).
pub fn binder_stdout(model_identity_sha256: &str, output_arg: &str) -> String {
    let quote = |s: &str| json::ascii_json(&Value::Str(s.to_string())).unwrap_or_default();
    format!(
        "{{\"model_identity_sha256\": {}, \"output\": {}}}",
        quote(model_identity_sha256),
        quote(&python_path_str(output_arg))
    )
}

/// An evaluation-request failure (§G.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The binding is not a gate-model binding with a string identity.
    #[error("the checkpoint binding is not a gate-model binding with a string identity")]
    BindingInvalid,
    /// Blank protocol id or repeats < 1.
    #[error(
        "the evaluation request is not valid: its protocol id is blank or its repeats are below 1"
    )]
    RequestInvalid,
}

impl bat_error::Diagnostic for RequestError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn code(&self) -> Option<String> {
        match self {
            RequestError::RequestInvalid => Some("evaluation_request_invalid".to_string()),
            RequestError::BindingInvalid => Some("checkpoint_binding_invalid".to_string()),
        }
    }
}

/// §G.3: the evaluation request for a binding.
pub fn evaluation_request(
    binding: &Value,
    protocol_id: &str,
    repeats: i64,
) -> Result<Value, RequestError> {
    if binding.get("artifact_kind").and_then(Value::as_str) != Some("bat_gate_model_binding") {
        return Err(RequestError::BindingInvalid);
    }
    let identity = binding
        .get("model_identity_sha256")
        .and_then(Value::as_str)
        .ok_or(RequestError::BindingInvalid)?;
    let protocol = py_strip(protocol_id);
    if protocol.is_empty() || repeats < 1 {
        return Err(RequestError::RequestInvalid);
    }
    let required = Map::new()
        .with("schema_version", 1)
        .with("status", "complete")
        .with(
            "cells",
            Map::new()
                .with("identity_fields", vec!["track", "task_id", "repeat"])
                .with("score_fields", vec!["task_score", "stages"])
                .with("stage_fields", vec!["S1", "S2", "S3", "S4", "S5"])
                .with("valid_must_equal", true),
        );
    Ok(Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_eval_request")
            .with("checkpoint_sha256", identity)
            .with("protocol_id", protocol)
            .with("repeats", repeats)
            .with("required_output", required),
    ))
}

/// §G.4 command expansion failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The template has no elements.
    #[error("the evaluator command template is empty")]
    Empty,
    /// After expansion, the checkpoint, output or request path is not a whole element.
    #[error("the evaluator command does not give the checkpoint, output and request paths each as a whole argument")]
    PlaceholdersMissing,
}

impl bat_error::Diagnostic for CommandError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }

    fn hint(&self) -> Option<String> {
        match self {
            CommandError::PlaceholdersMissing => Some(
                "give {checkpoint}, {output} and {request} each its own argv element".to_string(),
            ),
            _ => None,
        }
    }

    fn code(&self) -> Option<String> {
        match self {
            CommandError::PlaceholdersMissing => {
                Some("evaluator_command_placeholders_missing".to_string())
            }
            CommandError::Empty => Some("evaluator_command_empty".to_string()),
        }
    }
}

/// §G.4: replace every element that *equals* `{checkpoint}`, `{output}` or
/// `{request}` (no substring substitution); all three values must then occur
/// as whole elements.
pub fn expand_evaluator_command(
    template: &[String],
    checkpoint: &str,
    output: &str,
    request: &str,
) -> Result<Vec<String>, CommandError> {
    if template.is_empty() {
        return Err(CommandError::Empty);
    }
    let expanded: Vec<String> = template
        .iter()
        .map(|item| match item.as_str() {
            "{checkpoint}" => checkpoint.to_string(),
            "{output}" => output.to_string(),
            "{request}" => request.to_string(),
            _ => item.clone(),
        })
        .collect();
    let has = |v: &str| expanded.iter().any(|e| e == v);
    if !(has(output) && has(checkpoint) && has(request)) {
        return Err(CommandError::PlaceholdersMissing);
    }
    Ok(expanded)
}

/// §G.4: `command_sha256` = sha256hex(AJ of the unexpanded command template).
pub fn command_sha256(template: &[String]) -> String {
    let v = Value::Array(template.iter().map(|s| Value::Str(s.clone())).collect());
    sha256_hex(json::ascii_json(&v).unwrap_or_default().as_bytes())
}

/// §G.4: the evaluation run receipt (`protocol_id` unstripped).
pub fn eval_run_receipt(
    checkpoint_sha256: &str,
    protocol_id: &str,
    template: &[String],
    raw_evaluation_sha256: &str,
    summary_sha256: &str,
) -> Value {
    Value::Object(
        Map::new()
            .with("schema_version", 1)
            .with("artifact_kind", "bat_eval_run_receipt")
            .with("checkpoint_sha256", checkpoint_sha256)
            .with("protocol_id", protocol_id)
            .with("command_sha256", command_sha256(template))
            .with("raw_evaluation_sha256", raw_evaluation_sha256)
            .with("summary_sha256", summary_sha256)
            .with("status", "valid"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_path_strings() {
        assert_eq!(python_path_str("out//x.json"), "out/x.json");
        assert_eq!(python_path_str("./a/./b/"), "a/b");
        assert_eq!(python_path_str("/a/b"), "/a/b");
        assert_eq!(python_path_str("//a"), "//a");
        assert_eq!(python_path_str("///a"), "/a");
        assert_eq!(python_path_str("."), ".");
        assert_eq!(python_path_str("../x"), "../x");
    }

    #[test]
    fn binder_stdout_is_python_default_json() {
        assert_eq!(
            binder_stdout("ab", "o/é.json"),
            "{\"model_identity_sha256\": \"ab\", \"output\": \"o/\\u00e9.json\"}"
        );
    }

    #[test]
    fn request_checks() {
        let b = Value::Object(
            Map::new()
                .with("artifact_kind", "bat_gate_model_binding")
                .with("model_identity_sha256", "x"),
        );
        let r = evaluation_request(&b, "  proto ", 2).expect("valid request");
        assert_eq!(r.get("protocol_id").and_then(Value::as_str), Some("proto"));
        assert_eq!(
            evaluation_request(&b, " \t", 1),
            Err(RequestError::RequestInvalid)
        );
        assert_eq!(
            evaluation_request(&b, "p", 0),
            Err(RequestError::RequestInvalid)
        );
        assert_eq!(
            evaluation_request(&Value::Null, "p", 1),
            Err(RequestError::BindingInvalid)
        );
        let receipt = eval_run_receipt("c", " p ", &["a".into(), "{output}".into()], "r", "s");
        assert_eq!(
            receipt.get("protocol_id").and_then(Value::as_str),
            Some(" p ")
        );
        assert_eq!(command_sha256(&["a".into()]), sha256_hex(b"[\"a\"]"));
        let t = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            expand_evaluator_command(
                &t(&[
                    "ev",
                    "{checkpoint}",
                    "--o={output}",
                    "{output}",
                    "{request}"
                ]),
                "/c",
                "/o",
                "/r"
            ),
            Ok(t(&["ev", "/c", "--o={output}", "/o", "/r"]))
        );
        assert_eq!(
            expand_evaluator_command(&[], "/c", "/o", "/r"),
            Err(CommandError::Empty)
        );
        assert_eq!(
            expand_evaluator_command(
                &t(&["ev", "--o={output}", "{checkpoint}", "{request}"]),
                "/c",
                "/o",
                "/r"
            ),
            Err(CommandError::PlaceholdersMissing)
        );
        // A literal element equal to the value counts, as in the reference.
        assert!(expand_evaluator_command(&t(&["/c", "/o", "/r"]), "/c", "/o", "/r").is_ok());
    }
}
