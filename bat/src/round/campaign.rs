//! The inputs of a campaign: what the loop runs and every round commit
//! records, so a run can be resumed or replayed. Plain data, below the
//! engine that runs it.

use std::path::PathBuf;

/// The placeholder a template uses for the path of the bat binary (the
/// simulator backend runs `bat sim` children through it). A resumed or
/// replayed campaign substitutes the bat that runs it now, wherever the
/// recorded one was.
pub const BAT_PLACEHOLDER: &str = "{bat}";

/// The placeholder of the campaign seed (trainer and evaluator templates).
pub const SEED_PLACEHOLDER: &str = "{seed}";

/// The inputs of a campaign, recorded with every round so it can be resumed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Campaign {
    /// The source grid (absolute once started).
    pub source: PathBuf,
    /// The initial checkpoint (absolute once started).
    pub initial_checkpoint: PathBuf,
    /// The work dir (absolute once started).
    pub work_dir: PathBuf,
    /// Trainer argv template.
    pub trainer: Vec<String>,
    /// Evaluator argv template.
    pub evaluator: Vec<String>,
    /// The evaluation protocol id.
    pub protocol_id: String,
    /// The runtime tool format, as given.
    pub runtime_tool_format: String,
    /// Rounds to run in total.
    pub rounds: i64,
    /// Batches per round.
    pub batches: i64,
    /// The benchmark pack file (`None`: the embedded default pack).
    #[serde(default)]
    pub pack: Option<PathBuf>,
    /// The ledger branch rounds are committed to (`None`: the current one).
    #[serde(default)]
    pub branch: Option<String>,
    /// Extra trainer placeholders beyond the contract's, as
    /// `("{name}", value)` pairs (for example `{reward_mode}` and `{seed}`
    /// for the simulator and for ablations). Whole-element replacement like
    /// the others; none of them is required.
    #[serde(default)]
    pub extra_placeholders: Vec<(String, String)>,
    /// The campaign seed, given to the trainer and evaluator as `{seed}`
    /// (`bat run --seed`). `None` in campaigns recorded before seeds were
    /// recorded as such: see [`Campaign::seed`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Campaign {
    /// The campaign seed: the recorded one; for a campaign recorded before
    /// seeds were, the simulator's `{seed}` placeholder value, else 0.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or_else(|| {
            self.extra_placeholders
                .iter()
                .find(|(k, _)| k == SEED_PLACEHOLDER)
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0)
        })
    }

    /// Set the seed (a replay's `--ablate seed=N`, a `--seeds` arm), and
    /// the `{seed}` placeholder value where the campaign records one.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = Some(seed);
        for (k, v) in self.extra_placeholders.iter_mut() {
            if k == SEED_PLACEHOLDER {
                *v = seed.to_string();
            }
        }
    }

    /// The placeholder values the campaign adds to the contract's: the
    /// extra placeholders and `{seed}`.
    pub fn placeholder_values(&self) -> Vec<(String, String)> {
        let mut values = self.extra_placeholders.clone();
        if !values.iter().any(|(k, _)| k == SEED_PLACEHOLDER) {
            values.push((SEED_PLACEHOLDER.to_string(), self.seed().to_string()));
        }
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(extra: &[(&str, &str)], seed: Option<u64>) -> Campaign {
        Campaign {
            source: "s".into(),
            initial_checkpoint: "c".into(),
            work_dir: "w".into(),
            trainer: vec!["t".into()],
            evaluator: vec!["e".into()],
            protocol_id: "p".into(),
            runtime_tool_format: "f".into(),
            rounds: 1,
            batches: 1,
            pack: None,
            branch: None,
            extra_placeholders: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            seed,
        }
    }

    #[test]
    fn a_campaign_without_a_recorded_seed_reads_the_sim_placeholder_or_zero() {
        assert_eq!(campaign(&[], None).seed(), 0);
        assert_eq!(campaign(&[("{seed}", "7")], None).seed(), 7);
        assert_eq!(campaign(&[("{seed}", "7")], Some(3)).seed(), 3);
        let values = campaign(&[], Some(5)).placeholder_values();
        assert_eq!(values, vec![("{seed}".to_string(), "5".to_string())]);
    }

    #[test]
    fn set_seed_keeps_the_placeholder_and_the_field_equal() {
        let mut c = campaign(&[("{seed}", "1"), ("{bat}", "/b")], None);
        c.set_seed(9);
        assert_eq!(c.seed, Some(9));
        assert_eq!(
            c.placeholder_values(),
            vec![
                ("{seed}".to_string(), "9".to_string()),
                ("{bat}".to_string(), "/b".to_string())
            ]
        );
        let json = serde_json::to_value(&c).expect("a campaign encodes");
        assert_eq!(json["seed"], 9);
        let old = serde_json::json!({"source": "s", "initial_checkpoint": "c", "work_dir": "w",
            "trainer": ["t"], "evaluator": ["e"], "protocol_id": "p", "runtime_tool_format": "f",
            "rounds": 1, "batches": 1});
        let back: Campaign = serde_json::from_value(old).expect("an old campaign decodes");
        assert_eq!(back.seed, None);
    }
}
