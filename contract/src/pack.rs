//! Benchmark packs: everything the reference hard-codes (the contract's K) as
//! data. A pack is a JSON document in the shape of `bat-constants.json`.

use std::path::{Path, PathBuf};

use super::json::{self, Value};

/// The default pack (AutoMedBench-Lite structure, the project's own wording),
/// embedded in the binary.
pub const DEFAULT_PACK_JSON: &str = include_str!("default_pack.json");

/// Errors loading a pack.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// The pack file could not be read.
    #[error("cannot read pack {path}: {source}")]
    Read {
        /// The pack file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The pack is not valid JSON.
    #[error("pack {origin} is not valid JSON: {source}")]
    Json {
        /// Where the pack came from.
        origin: String,
        /// The parse error.
        source: json::ParseError,
    },
    /// The pack is JSON but breaks a rule.
    #[error("pack {origin} is invalid: {reason}")]
    Invalid {
        /// Where the pack came from.
        origin: String,
        /// The first rule it breaks.
        reason: String,
    },
}

impl bat_error::Diagnostic for PackError {
    fn kind(&self) -> bat_error::ErrorKind {
        bat_error::ErrorKind::User
    }
}

/// A loaded benchmark pack. Accessors read the underlying JSON, so a pack
/// carries exactly the values (and int/float types) it was written with.
#[derive(Debug, Clone)]
pub struct Pack {
    value: Value,
    origin: String,
}

impl Pack {
    /// The embedded default pack.
    pub fn default_pack() -> Pack {
        Pack::parse(DEFAULT_PACK_JSON, "<default>").expect("the embedded default pack is valid")
    }

    /// Parse a pack from JSON text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Pack, PackError> {
        let value = json::parse(text).map_err(|source| PackError::Json {
            origin: origin.to_string(),
            source,
        })?;
        if value.as_object().is_none() {
            return Err(PackError::Invalid {
                origin: origin.to_string(),
                reason: "the top level must be an object".into(),
            });
        }
        Ok(Pack {
            value,
            origin: origin.to_string(),
        })
    }

    /// Load a pack file.
    pub fn load(path: &Path) -> Result<Pack, PackError> {
        let bytes = crate::fsutil::read_json_input(path).map_err(|source| PackError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| PackError::Read {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        Pack::parse(&text, &path.display().to_string())
    }

    /// `--pack FILE` if given, else the default pack.
    pub fn load_or_default(path: Option<&Path>) -> Result<Pack, PackError> {
        match path {
            Some(p) => Pack::load(p),
            None => Ok(Pack::default_pack()),
        }
    }

    /// The whole pack as JSON.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// Where the pack came from (a path or `<default>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Member `key` of the pack's top level.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key)
    }

    /// A top-level list of strings (e.g. `stages`, `tracks`); empty if absent.
    pub fn str_list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}
