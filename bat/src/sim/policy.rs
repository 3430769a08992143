//! The simulated agent's policy, stored as a real model folder
//! (`config.json` + `model.safetensors`, two F32 tensors):
//!
//! - `policy.logits` [track, stage, condition, action]: what the agent does
//!   at each decision point;
//! - `policy.habit` [track, action]: a per-track preference shared by every
//!   stage of the track. The action logits of a decision point are
//!   `logits[t,s,c] + habit[t]`, so training one stage also moves the habit
//!   the other stages use — the interference a shared-weight model has.

use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use super::actions::{ACTIONS, CONDITIONS};
use super::num::{softmax, KeyedStream};
use super::SimError;
use bat_contract::json::{self, Map, Value};

/// `model_type` in the config.
pub const MODEL_TYPE: &str = "bat-sim-policy";
/// Name of the logits tensor.
pub const TENSOR_NAME: &str = "policy.logits";
/// Name of the shared per-track habit tensor.
pub const HABIT_TENSOR_NAME: &str = "policy.habit";
/// Version of the model folder layout.
pub const FORMAT_VERSION: i64 = 1;
/// The simulator's learning rate (see docs/simulator.md for how it was
/// chosen). The prescription's 2.5e-7 is sized for LLM weights; on a table
/// of logits it would not move anything.
pub const DEFAULT_LEARNING_RATE: f64 = 0.5;

/// The starting preference of each stage over [`ACTIONS`] before seeded
/// noise: a mediocre agent with a different habit at every stage.
///
/// S1 mostly verifies; S2 tends to rush; S3 tends to describe work instead
/// of executing it; S4 verifies even when the evidence it inherits is
/// broken; S5 splits between rushing and describing.
const INITIAL_PREFERENCES: [[f64; 4]; 5] = [
    [0.6, 0.0, 0.2, 0.4],
    [0.0, -0.2, 0.8, 0.3],
    [0.0, -0.3, 0.2, 1.0],
    [0.9, -0.5, 0.3, 0.2],
    [0.2, 0.0, 0.5, 0.6],
];
/// Half-width of the seeded noise added to every initial logit.
const INITIAL_NOISE: f64 = 0.25;
/// Half-width of the seeded initial habits.
const INITIAL_HABIT_NOISE: f64 = 0.1;

/// A tabular softmax policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Track names, in the pack's order.
    pub tracks: Vec<String>,
    /// Stage names, in the pack's order.
    pub stages: Vec<String>,
    /// Logits, row-major over [track][stage][condition][action].
    pub logits: Vec<f64>,
    /// Shared habits, row-major over [track][action].
    pub habit: Vec<f64>,
    /// The seed the initial policy was drawn from (kept in the config).
    pub init_seed: u64,
    /// The simulator learning rate (kept in the config).
    pub learning_rate: f64,
}

impl Policy {
    /// Number of condition × action logits per (track, stage).
    pub const BLOCK: usize = CONDITIONS.len() * ACTIONS.len();

    /// The initial policy for `seed`.
    pub fn initial(tracks: &[String], stages: &[String], seed: u64) -> Policy {
        let mut stream = KeyedStream::new("bat-sim initial policy v1", &[&seed.to_le_bytes()]);
        let mut logits = Vec::with_capacity(tracks.len() * stages.len() * Self::BLOCK);
        for _ in tracks {
            for s in 0..stages.len() {
                let pref = INITIAL_PREFERENCES[s % INITIAL_PREFERENCES.len()];
                for _ in CONDITIONS {
                    for p in pref {
                        let noise = (stream.uniform() * 2.0 - 1.0) * INITIAL_NOISE;
                        // Stored as F32: start from a representable value.
                        logits.push(f64::from((p + noise) as f32));
                    }
                }
            }
        }
        let habit = (0..tracks.len() * ACTIONS.len())
            .map(|_| f64::from(((stream.uniform() * 2.0 - 1.0) * INITIAL_HABIT_NOISE) as f32))
            .collect();
        Policy {
            tracks: tracks.to_vec(),
            stages: stages.to_vec(),
            logits,
            habit,
            init_seed: seed,
            learning_rate: DEFAULT_LEARNING_RATE,
        }
    }

    /// Offset of the logits of (track, stage, condition).
    pub fn offset(&self, track: usize, stage: usize, condition: usize) -> usize {
        ((track * self.stages.len() + stage) * CONDITIONS.len() + condition) * ACTIONS.len()
    }

    /// Number of parameters (logits, then habits).
    pub fn len(&self) -> usize {
        self.logits.len() + self.habit.len()
    }

    /// Whether the policy has no parameters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parameter `i` in the order of [`Policy::len`].
    pub fn param(&self, i: usize) -> f64 {
        match i.checked_sub(self.logits.len()) {
            None => self.logits[i],
            Some(j) => self.habit[j],
        }
    }

    /// Set parameter `i` in the order of [`Policy::len`].
    pub fn set_param(&mut self, i: usize, v: f64) {
        match i.checked_sub(self.logits.len()) {
            None => self.logits[i] = v,
            Some(j) => self.habit[j] = v,
        }
    }

    /// Parameter index of the habit used at the decision point `offset`.
    pub fn habit_index(&self, offset: usize) -> usize {
        let per_track = self.stages.len() * Self::BLOCK;
        self.logits.len() + (offset / per_track) * ACTIONS.len()
    }

    /// Action logits at the decision point starting at `offset`
    /// (its own logits plus the track's habit).
    pub fn logits_at(&self, offset: usize) -> Vec<f64> {
        let h = self.habit_index(offset) - self.logits.len();
        (0..ACTIONS.len())
            .map(|a| self.logits[offset + a] + self.habit[h + a])
            .collect()
    }

    /// Action probabilities at the decision point starting at `offset`.
    pub fn probs_at(&self, offset: usize) -> Vec<f64> {
        softmax(&self.logits_at(offset))
    }

    /// The config.json document.
    pub fn config(&self) -> Value {
        let strs = |v: &[&str]| Value::Array(v.iter().map(|s| Value::from(*s)).collect());
        Value::Object(
            Map::new()
                .with("architectures", vec!["BatSimPolicy"])
                .with("model_type", MODEL_TYPE)
                .with("format_version", FORMAT_VERSION)
                .with("tensors", vec![TENSOR_NAME, HABIT_TENSOR_NAME])
                .with("tracks", self.tracks.clone())
                .with("stages", self.stages.clone())
                .with("conditions", strs(&CONDITIONS))
                .with("actions", strs(&ACTIONS))
                .with("init_seed", self.init_seed)
                .with("learning_rate", self.learning_rate),
        )
    }

    /// The model.safetensors bytes (two F32 tensors; no metadata, and the
    /// crate orders tensors by dtype and name, so equal weights give equal
    /// bytes).
    pub fn safetensors_bytes(&self) -> Result<Vec<u8>, SimError> {
        let f32s =
            |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect() };
        let data = f32s(&self.logits);
        let habit = f32s(&self.habit);
        let shape = vec![
            self.tracks.len(),
            self.stages.len(),
            CONDITIONS.len(),
            ACTIONS.len(),
        ];
        let bad = |e: safetensors::SafeTensorError| SimError::Model {
            path: PathBuf::from(TENSOR_NAME),
            reason: e.to_string(),
        };
        let view = TensorView::new(Dtype::F32, shape, &data).map_err(bad)?;
        let habit_view =
            TensorView::new(Dtype::F32, vec![self.tracks.len(), ACTIONS.len()], &habit)
                .map_err(bad)?;
        safetensors::serialize(
            vec![
                (TENSOR_NAME.to_string(), view),
                (HABIT_TENSOR_NAME.to_string(), habit_view),
            ],
            None::<std::collections::HashMap<String, String>>,
        )
        .map_err(|e| SimError::Model {
            path: PathBuf::from(TENSOR_NAME),
            reason: e.to_string(),
        })
    }

    /// Write the model folder `dir` (created; must not exist or be empty).
    /// Both files are written atomically; the weights go first.
    pub fn save(&self, dir: &Path) -> Result<(), SimError> {
        if dir.exists()
            && std::fs::read_dir(dir)
                .map_err(|source| SimError::Io {
                    path: dir.to_path_buf(),
                    source,
                })?
                .next()
                .is_some()
        {
            return Err(SimError::OutputExists {
                path: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).map_err(|source| SimError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let weights = dir.join("model.safetensors");
        bat_contract::fsutil::write_atomic(&weights, &self.safetensors_bytes()?).map_err(
            |source| SimError::Io {
                path: weights.clone(),
                source,
            },
        )?;
        let config = dir.join("config.json");
        bat_contract::fsutil::write_atomic(
            &config,
            json::pretty_json_file(&self.config()).as_bytes(),
        )
        .map_err(|source| SimError::Io {
            path: config.clone(),
            source,
        })
    }

    /// Read a model folder written by [`Policy::save`].
    pub fn load(dir: &Path) -> Result<Policy, SimError> {
        let bad = |path: &Path, reason: String| SimError::Model {
            path: path.to_path_buf(),
            reason,
        };
        let config_path = dir.join("config.json");
        let text = std::fs::read(&config_path).map_err(|source| SimError::Io {
            path: config_path.clone(),
            source,
        })?;
        let config = json::parse_bytes(&text).map_err(|e| bad(&config_path, e.to_string()))?;
        if config.get("model_type").and_then(Value::as_str) != Some(MODEL_TYPE) {
            return Err(bad(
                &config_path,
                format!("not a simulator policy (model_type must be {MODEL_TYPE:?})"),
            ));
        }
        let list = |key: &str| -> Result<Vec<String>, SimError> {
            config
                .get(key)
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
                .ok_or_else(|| bad(&config_path, format!("{key} must be a list of strings")))
        };
        let tracks = list("tracks")?;
        let stages = list("stages")?;
        if list("conditions")? != CONDITIONS || list("actions")? != ACTIONS {
            return Err(bad(
                &config_path,
                "conditions/actions differ from this simulator's".into(),
            ));
        }
        let init_seed = match config.get("init_seed") {
            Some(Value::Int(i)) if *i >= 0 => *i as u64,
            Some(Value::BigInt(s)) => s
                .parse()
                .map_err(|_| bad(&config_path, "init_seed is not an integer".into()))?,
            _ => return Err(bad(&config_path, "init_seed must be an integer ≥ 0".into())),
        };
        let learning_rate = match config.get("learning_rate") {
            Some(Value::Float(f)) if f.is_finite() && *f > 0.0 => *f,
            Some(Value::Int(i)) if *i > 0 => *i as f64,
            _ => {
                return Err(bad(
                    &config_path,
                    "learning_rate must be a positive number".into(),
                ))
            }
        };
        let weights_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&weights_path).map_err(|source| SimError::Io {
            path: weights_path.clone(),
            source,
        })?;
        let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(&weights_path, e.to_string()))?;
        let read = |name: &str, shape: &[usize]| -> Result<Vec<f64>, SimError> {
            let t = st
                .tensor(name)
                .map_err(|e| bad(&weights_path, e.to_string()))?;
            if t.dtype() != Dtype::F32 || t.shape() != shape {
                return Err(bad(
                    &weights_path,
                    format!("{name} must be F32 with shape {shape:?}"),
                ));
            }
            Ok(t.data()
                .chunks_exact(4)
                .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect())
        };
        let logits = read(
            TENSOR_NAME,
            &[tracks.len(), stages.len(), CONDITIONS.len(), ACTIONS.len()],
        )?;
        let habit = read(HABIT_TENSOR_NAME, &[tracks.len(), ACTIONS.len()])?;
        Ok(Policy {
            tracks,
            stages,
            logits,
            habit,
            init_seed,
            learning_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_policy_loads_back_and_its_bytes_depend_only_on_the_seed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let tracks = vec!["a".to_string(), "b".to_string()];
        let stages: Vec<String> = ["S1", "S2", "S3"].iter().map(|s| s.to_string()).collect();
        let p = Policy::initial(&tracks, &stages, 11);
        p.save(&tmp.path().join("m1")).expect("save");
        Policy::initial(&tracks, &stages, 11)
            .save(&tmp.path().join("m2"))
            .expect("save");
        let back = Policy::load(&tmp.path().join("m1")).expect("load");
        assert_eq!(back, p);
        for f in ["model.safetensors", "config.json"] {
            assert_eq!(
                std::fs::read(tmp.path().join("m1").join(f)).expect("read"),
                std::fs::read(tmp.path().join("m2").join(f)).expect("read")
            );
        }
        assert_ne!(Policy::initial(&tracks, &stages, 12).logits, p.logits);
        // A second save into a filled folder is refused.
        assert!(matches!(
            p.save(&tmp.path().join("m1")),
            Err(SimError::OutputExists { .. })
        ));
    }
}
