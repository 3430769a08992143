//! Custom metrics of a round: the numeric fields the trainer wrote into its
//! training-health file and the per-track and per-stage scores of the
//! round's gating evaluation, as named values. One reader for `bat export`
//! (extra columns), `bat query` (the `metrics` table), `bat report
//! --metric` (extra curves) and the Python API.
//!
//! Keys are dotted and prefixed by where the value came from:
//!
//! - `health.<path>`: a number in `training-health.json`; nested objects
//!   are flattened with dots (`health.sim.kl_to_reference`); strings,
//!   booleans, nulls and arrays are not metrics and are skipped;
//! - `eval.track.<name>`: `track_scores` of `candidate-eval/summary.json`;
//! - `eval.stage.<S>`: `stage_scores` of the same summary (or of the round
//!   metadata when a commit has no summary file).
//!
//! Keys sort by source (health, then tracks, then stages) and then by name,
//! which is the column order of `bat export`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bat_ledger::{CommitId, Ledger};

use crate::inspect::audit::gating_scores;
use crate::inspect::{InspectError, RoundTree};

/// Path of the trainer's health file inside a round commit.
pub const HEALTH_PATH: &str = "training-health.json";

/// Where a metric comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MetricSource {
    /// The training-health file.
    Health,
    /// A track score of the gating evaluation.
    EvalTrack,
    /// A stage score of the gating evaluation.
    EvalStage,
}

impl MetricSource {
    /// The key prefix without its final dot: `health`, `eval.track`,
    /// `eval.stage` (the `source` column of `bat query`'s `metrics`).
    pub fn as_str(self) -> &'static str {
        match self {
            MetricSource::Health => "health",
            MetricSource::EvalTrack => "eval.track",
            MetricSource::EvalStage => "eval.stage",
        }
    }

    const ALL: [MetricSource; 3] = [
        MetricSource::Health,
        MetricSource::EvalTrack,
        MetricSource::EvalStage,
    ];
}

/// A metric's name: its source and the dotted path inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetricKey {
    /// Where it comes from.
    pub source: MetricSource,
    /// The name inside the source (`sim.kl_to_reference`, `core`, `S1`).
    pub name: String,
}

impl MetricKey {
    /// Parse a full key (`health.kl`, `eval.track.core`, `eval.stage.S1`);
    /// `None` for a key without a known prefix or with an empty name.
    pub fn parse(key: &str) -> Option<MetricKey> {
        // Longest prefixes first: `eval.track.` before anything shorter.
        let mut sources = MetricSource::ALL;
        sources.sort_by_key(|s| std::cmp::Reverse(s.as_str().len()));
        sources.into_iter().find_map(|source| {
            let name = key.strip_prefix(source.as_str())?.strip_prefix('.')?;
            (!name.is_empty()).then(|| MetricKey {
                source,
                name: name.to_string(),
            })
        })
    }
}

impl fmt::Display for MetricKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.source.as_str(), self.name)
    }
}

impl Ord for MetricKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.source
            .cmp(&other.source)
            .then_with(|| self.name.cmp(&other.name))
    }
}

impl PartialOrd for MetricKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The metrics of one round, in key order.
pub type Metrics = BTreeMap<MetricKey, f64>;

/// Numbers of a JSON document, nested objects flattened with dots.
pub fn flatten_numbers(v: &serde_json::Value) -> BTreeMap<String, f64> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, f64>) {
        match v {
            serde_json::Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
                    out.insert(prefix.to_string(), f);
                }
            }
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, x, out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    if v.is_object() {
        walk("", v, &mut out);
    }
    out
}

/// The metrics of the round commit `commit`. A health file that is not
/// JSON is an error (it names the commit and path); a commit without one
/// has no `health.*` metrics.
pub fn round_metrics(ledger: &Ledger, commit: CommitId) -> Result<Metrics, InspectError> {
    let tree = RoundTree::open(ledger, commit)?;
    let mut out = Metrics::new();
    if let Some(h) = tree.json(HEALTH_PATH)? {
        for (name, v) in flatten_numbers(&h) {
            out.insert(
                MetricKey {
                    source: MetricSource::Health,
                    name,
                },
                v,
            );
        }
    }
    let (_, scores) = gating_scores(&tree)?;
    for (source, map) in [
        (MetricSource::EvalTrack, &scores.tracks),
        (MetricSource::EvalStage, &scores.stages),
    ] {
        for (name, v) in map {
            out.insert(
                MetricKey {
                    source,
                    name: name.clone(),
                },
                *v,
            );
        }
    }
    Ok(out)
}

/// Every key of `rows`, sorted (the extra columns of an export).
pub fn union_keys<'a>(rows: impl IntoIterator<Item = &'a Metrics>) -> Vec<MetricKey> {
    let set: BTreeSet<&MetricKey> = rows.into_iter().flat_map(|m| m.keys()).collect();
    set.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_numbers_flatten_with_dots_and_the_rest_is_skipped() {
        let f = flatten_numbers(&serde_json::json!({
            "status": "passed", "kl": 0.5, "ok": true, "none": null, "list": [1, 2],
            "sim": {"mean_reward": 0.25, "deep": {"x": -1}}
        }));
        let got: Vec<(&str, f64)> = f.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            vec![("kl", 0.5), ("sim.deep.x", -1.0), ("sim.mean_reward", 0.25)]
        );
        assert!(flatten_numbers(&serde_json::json!(3)).is_empty());
    }

    #[test]
    fn keys_parse_back_from_their_text_and_sort_by_source_then_name() {
        for k in ["health.sim.kl", "eval.track.core", "eval.stage.S1"] {
            let p = MetricKey::parse(k).expect("parses");
            assert_eq!(p.to_string(), k);
        }
        assert_eq!(
            MetricKey::parse("eval.track.a.b").map(|k| (k.source, k.name)),
            Some((MetricSource::EvalTrack, "a.b".to_string()))
        );
        assert!(MetricKey::parse("overall").is_none());
        assert!(MetricKey::parse("health.").is_none());
        assert!(MetricKey::parse("eval.trackx").is_none());
        let mut keys: Vec<MetricKey> = ["eval.stage.S1", "eval.track.z", "health.z", "health.a"]
            .iter()
            .filter_map(|k| MetricKey::parse(k))
            .collect();
        keys.sort();
        let text: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            ["health.a", "health.z", "eval.track.z", "eval.stage.S1"]
        );
    }
}
