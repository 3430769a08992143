//! The contract's closed vocabularies as types: the gate's two outcomes and
//! the trainer's reward modes. Each is written and read as the lowercase
//! word the contract uses, so stored metadata and every JSON document keep
//! their exact bytes; the words are parsed once, at the edge, and compared
//! as values everywhere else. Stage names are not among them: the
//! benchmark pack defines its stages, and a round's next target may also be
//! the end-to-end target, so `target_stage` stays the pack's word.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A word that is not one of a vocabulary's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}: use {choices}")]
pub struct UnknownWord {
    /// The vocabulary (`reward mode`, `gate status`, `stage`).
    pub what: &'static str,
    /// What was given.
    pub value: String,
    /// The accepted words, for the message (`stage or terminal`).
    pub choices: &'static str,
}

/// Implements `as_str`, `Display` and `FromStr` over a fixed word list.
macro_rules! words {
    ($ty:ident, $what:literal, $choices:literal, { $($variant:ident => $word:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in the contract's order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The contract's word for the value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $word),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownWord;
            fn from_str(s: &str) -> Result<Self, UnknownWord> {
                match s {
                    $($word => Ok($ty::$variant),)+
                    other => Err(UnknownWord {
                        what: $what,
                        value: other.to_string(),
                        choices: $choices,
                    }),
                }
            }
        }
    };
}

/// What the gate decided about a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    /// The candidate becomes the checkpoint later rounds start from.
    Promote,
    /// The candidate is kept on record only.
    Hold,
}

words!(GateStatus, "gate status", "promote or hold", {
    Promote => "promote", Hold => "hold",
});

impl GateStatus {
    /// `Promote` when `promoted`.
    pub fn from_promoted(promoted: bool) -> GateStatus {
        if promoted {
            GateStatus::Promote
        } else {
            GateStatus::Hold
        }
    }

    /// Whether this is `Promote`.
    pub fn is_promote(self) -> bool {
        self == GateStatus::Promote
    }
}

/// How the trainer rewards rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RewardMode {
    /// BaT: stage rows by their stage's rubric score, end-to-end rows by
    /// the end-to-end reward.
    #[default]
    Stage,
    /// Ablation: every row plays the whole workflow and gets only the
    /// terminal end-to-end reward.
    Terminal,
}

words!(RewardMode, "reward mode", "stage or terminal", {
    Stage => "stage", Terminal => "terminal",
});

#[cfg(test)]
mod tests {
    use super::*;

    /// serde, `Display` and `FromStr` agree on the exact word of every value.
    fn round_trips<T>(all: &[T], words: &[&str])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + FromStr + Serialize,
        T: for<'de> Deserialize<'de>,
        <T as FromStr>::Err: fmt::Debug,
    {
        assert_eq!(all.len(), words.len());
        for (v, w) in all.iter().zip(words) {
            assert_eq!(v.to_string(), *w);
            assert_eq!(
                serde_json::to_string(v).expect("encodes"),
                format!("\"{w}\"")
            );
            let back: T = serde_json::from_str(&format!("\"{w}\"")).expect("decodes");
            assert_eq!(back, *v);
            assert_eq!(w.parse::<T>().expect("parses"), *v);
        }
    }

    #[test]
    fn words_are_the_contracts() {
        round_trips(GateStatus::ALL, &["promote", "hold"]);
        round_trips(RewardMode::ALL, &["stage", "terminal"]);
    }

    #[test]
    fn other_words_are_refused_with_the_choices() {
        let e = "E2E".parse::<RewardMode>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown reward mode \"E2E\": use stage or terminal"
        );
        assert!("Promote".parse::<GateStatus>().is_err());
        assert!(serde_json::from_str::<GateStatus>("\"promoted\"").is_err());
    }

    #[test]
    fn gate_status_follows_the_promotion_flag() {
        assert_eq!(GateStatus::from_promoted(true), GateStatus::Promote);
        assert_eq!(GateStatus::from_promoted(false), GateStatus::Hold);
        assert!(GateStatus::Promote.is_promote());
        assert!(!GateStatus::Hold.is_promote());
    }
}
