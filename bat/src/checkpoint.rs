//! Strict checks of model checkpoints a round or a binding names: every
//! `*.safetensors` file of a model folder must be a well-formed safetensors
//! file (header length within the file and the 100 MB cap, a JSON header,
//! known dtypes, every tensor's byte range inside the data section, sized
//! by its shape, no two overlapping). A checkpoint that fails is refused
//! instead of being bound, gated and promoted.

use std::io::Read;
use std::path::{Path, PathBuf};

use bat_ledger::delta::safetensors::{header_len, parse_layout, MAX_HEADER};

/// Why a checkpoint file is refused.
#[derive(Debug, thiserror::Error)]
#[error("{path} is not a valid safetensors file: {reason}")]
pub struct CheckpointError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub reason: String,
}

impl bat_ledger::Diagnostic for CheckpointError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }
}

/// Check one safetensors file (reads only its header).
pub fn check_safetensors(path: &Path) -> Result<(), CheckpointError> {
    let bad = |reason: String| CheckpointError {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let len = f.metadata().map_err(|e| bad(e.to_string()))?.len();
    let mut prefix = [0u8; 8];
    f.read_exact(&mut prefix).map_err(|_| {
        bad(format!(
            "{len} bytes is shorter than the 8-byte header length"
        ))
    })?;
    let declared = u64::from_le_bytes(prefix);
    let n = header_len(&prefix, len).ok_or_else(|| {
        bad(format!(
            "header length {declared} does not fit a {len}-byte file (or exceeds {MAX_HEADER})"
        ))
    })?;
    let mut head = vec![0u8; 8 + n as usize];
    head[..8].copy_from_slice(&prefix);
    f.read_exact(&mut head[8..])
        .map_err(|e| bad(format!("reading the header: {e}")))?;
    if serde_json::from_slice::<serde_json::Value>(&head[8..]).is_err() {
        return Err(bad("the header is not JSON".into()));
    }
    parse_layout(&head, len).ok_or_else(|| {
        bad(
            "a tensor has an unknown dtype, a byte range outside the data (truncated?), \
             a size that does not match its shape, or overlaps another"
                .into(),
        )
    })?;
    Ok(())
}

/// Check every `*.safetensors` file directly in `model` or in its
/// subdirectories (shards).
pub fn check_model_dir(model: &Path) -> Result<(), CheckpointError> {
    let mut stack = vec![model.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| CheckpointError {
            path: d.clone(),
            reason: e.to_string(),
        })?;
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && p.extension().is_some_and(|x| x == "safetensors") {
                check_safetensors(&p)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(header: &str, data_len: usize) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend(std::iter::repeat_n(0u8, data_len));
        out
    }

    /// The nine malformed checkpoints of issue 19, each refused; the
    /// well-formed one accepted.
    #[test]
    fn malformed_checkpoints_are_refused() {
        let t = tempfile::tempdir().expect("tempdir");
        let good = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut huge = st(good, 8);
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("header length 2^64-1", huge),
            ("not JSON", st("{not json at all}", 8)),
            (
                "overlap",
                st(
                    r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                    12,
                ),
            ),
            (
                "out of file",
                st(
                    r#"{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
                    8,
                ),
            ),
            (
                "unknown dtype",
                st(
                    r#"{"w":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}}"#,
                    8,
                ),
            ),
            ("truncated data", st(good, 5)),
            (
                "size not shape",
                st(
                    r#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                    8,
                ),
            ),
            ("empty", Vec::new()),
            ("header past the end", {
                let mut v = st(good, 8);
                v.truncate(20);
                v
            }),
        ];
        for (what, bytes) in cases {
            let p = t.path().join("m.safetensors");
            std::fs::write(&p, &bytes).expect("write");
            let e = check_safetensors(&p).expect_err(what);
            assert!(
                e.to_string().contains("not a valid safetensors"),
                "{what}: {e}"
            );
        }
        let p = t.path().join("ok.safetensors");
        std::fs::write(&p, st(good, 8)).expect("write");
        check_safetensors(&p).expect("well-formed");
    }
}
