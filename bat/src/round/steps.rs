//! Step metrics: the JSON Lines file a trainer given `{metrics}` appends to,
//! one object per optimizer step, committed with the round as
//! [`STEP_METRICS_PATH`].
//!
//! Every non-blank line is a JSON object with `"step"`, a non-negative
//! integer, and any other members, each a finite number (`reward_mean`,
//! `kl`, `loss`, ... — names are the trainer's, all are kept). Blank lines
//! are ignored. Anything else is refused with the line number: a trainer
//! that writes a bad line fails its round instead of leaving half its
//! curve out. The file is read under the readers' cap
//! ([`bat_contract::fsutil::MAX_JSON_INPUT`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Path of the step metrics file in a round folder and in a round commit.
pub const STEP_METRICS_PATH: &str = "step-metrics.jsonl";

/// One step's values.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepRow {
    /// The trainer's step number.
    pub step: u64,
    /// The other members, by name.
    pub values: BTreeMap<String, f64>,
}

/// A round's step metrics, in file order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct StepMetrics {
    /// The steps.
    pub rows: Vec<StepRow>,
}

/// Why a step metrics file was refused.
#[derive(Debug, thiserror::Error)]
pub enum StepMetricsError {
    /// The file could not be read (or is over the cap).
    #[error("cannot read the step metrics file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not a step object.
    #[error("step metrics file {}, line {line}: {reason}", path.display())]
    Line {
        /// The file (or the round commit path).
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

impl bat_ledger::Diagnostic for StepMetricsError {
    fn kind(&self) -> bat_ledger::ErrorKind {
        bat_ledger::ErrorKind::User
    }

    fn hint(&self) -> Option<String> {
        match self {
            StepMetricsError::Line { .. } => Some(
                "each line must be a JSON object with \"step\" (a non-negative integer) and finite numbers only (see docs/backends.md, {metrics})"
                    .to_string(),
            ),
            StepMetricsError::Read { .. } => None,
        }
    }

    fn code(&self) -> Option<String> {
        Some("step_metrics_invalid".to_string())
    }
}

impl StepMetrics {
    /// Read and parse the file at `path`.
    pub fn read(path: &Path) -> Result<StepMetrics, StepMetricsError> {
        let bytes = bat_contract::fsutil::read_json_input(path).map_err(|source| {
            StepMetricsError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        StepMetrics::parse(path, &bytes)
    }

    /// Parse a file's bytes; `path` names it in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<StepMetrics, StepMetricsError> {
        let bad = |line: usize, reason: String| StepMetricsError::Line {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let mut rows = Vec::new();
        for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
            let line = i + 1;
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let v: serde_json::Value = serde_json::from_slice(raw)
                .map_err(|e| bad(line, format!("not valid JSON ({e})")))?;
            let serde_json::Value::Object(o) = v else {
                return Err(bad(line, "not a JSON object".into()));
            };
            let step = o
                .get("step")
                .ok_or_else(|| bad(line, "it has no \"step\"".into()))?
                .as_u64()
                .ok_or_else(|| bad(line, "\"step\" is not a non-negative integer".into()))?;
            let mut values = BTreeMap::new();
            for (k, v) in o.iter().filter(|(k, _)| k.as_str() != "step") {
                let x = v
                    .as_f64()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad(line, format!("{k:?} is {v}, not a finite number")))?;
                values.insert(k.clone(), x);
            }
            rows.push(StepRow { step, values });
        }
        Ok(StepMetrics { rows })
    }

    /// Whether there are no steps.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every metric name of any step, sorted.
    pub fn keys(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.rows.iter().flat_map(|r| r.values.keys()).collect();
        set.into_iter().cloned().collect()
    }

    /// The (step, value) points of one metric, in file order.
    pub fn series(&self, key: &str) -> Vec<(u64, f64)> {
        self.rows
            .iter()
            .filter_map(|r| r.values.get(key).map(|v| (r.step, *v)))
            .collect()
    }
}

/// The step metrics of a round commit, or `None` when it has none.
pub fn round_steps(
    ledger: &bat_ledger::Ledger,
    commit: bat_ledger::CommitId,
) -> Result<Option<StepMetrics>, crate::inspect::InspectError> {
    let tree = crate::inspect::RoundTree::open(ledger, commit)?;
    let Some(bytes) = tree.bytes(STEP_METRICS_PATH)? else {
        return Ok(None);
    };
    StepMetrics::parse(Path::new(STEP_METRICS_PATH), &bytes)
        .map(Some)
        .map_err(|e| crate::inspect::InspectError::Json {
            path: STEP_METRICS_PATH.to_string(),
            commit: commit.to_string(),
            reason: match e {
                StepMetricsError::Line { line, reason, .. } => format!("line {line}: {reason}"),
                other => other.to_string(),
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<StepMetrics, StepMetricsError> {
        StepMetrics::parse(Path::new("m.jsonl"), s.as_bytes())
    }

    #[test]
    fn keeps_every_numeric_member_and_skips_blank_lines() {
        let m =
            parse("{\"step\":1,\"kl\":0.5,\"loss\":2}\n\n{\"step\":2,\"kl\":0.25,\"x\":-1e3}\n")
                .expect("valid file");
        assert_eq!(m.rows.len(), 2);
        assert_eq!(m.keys(), vec!["kl", "loss", "x"]);
        assert_eq!(m.series("kl"), vec![(1, 0.5), (2, 0.25)]);
        assert_eq!(m.series("loss"), vec![(1, 2.0)]);
    }

    #[test]
    fn refuses_bad_lines_with_their_number() {
        for (text, line, needle) in [
            ("{\"step\":1}\n{\"kl\":1}\n", 2, "no \"step\""),
            ("{\"step\":-1}\n", 1, "non-negative"),
            ("{\"step\":1.5}\n", 1, "non-negative"),
            ("\n\n{\"step\":1,\"kl\":\"a\"}\n", 3, "not a finite number"),
            ("[1]\n", 1, "not a JSON object"),
            ("{\"step\":1,\n", 1, "not valid JSON"),
        ] {
            match parse(text) {
                Err(StepMetricsError::Line {
                    line: l, reason, ..
                }) => {
                    assert_eq!(l, line, "{text:?}");
                    assert!(reason.contains(needle), "{text:?}: {reason}");
                }
                other => panic!("{text:?}: expected a line error, got {other:?}"),
            }
        }
    }
}
