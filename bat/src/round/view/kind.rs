//! What every round view is: its key ([`ViewKind`]) and what it can do
//! ([`RoundView`]). Kept below the registry and the views so they import
//! it, not each other.

use bat_contract::json::Value;
use bat_contract::prompt::Prompter;
use bat_contract::round::{BuildInputs, BuiltRound, ViewError};
use bat_contract::task::ContractPack;

/// The key of a round view in the registry: the mixture name, the word an
/// ablation uses (`--ablate mixture=uniform`). Each view file declares its
/// own constant (`ViewKind::UNIFORM` in `uniform.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViewKind(&'static str);

impl ViewKind {
    /// A view key; only view files make one, next to their registry entry.
    pub(super) const fn named(name: &'static str) -> ViewKind {
        ViewKind(name)
    }

    /// The mixture name (`three_pool`, `uniform`).
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for ViewKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// One round view: how its rows are built from the source grid, how a
/// built view is checked, and the manifest kind that names it.
pub trait RoundView: Sync {
    /// Its registry key.
    fn kind(&self) -> ViewKind;

    /// The manifest's `artifact_kind` of this view.
    fn artifact_kind(&self) -> &'static str;

    /// Build the view (rows and manifest) for `inp`.
    fn build(
        &self,
        k: &ContractPack,
        prompter: &Prompter<'_>,
        inp: &BuildInputs<'_>,
    ) -> Result<BuiltRound, ViewError>;

    /// Check a built view; returns the verifier's result object (`status`,
    /// `rows`, `batches`, `target_stage`, `train_sha256`).
    fn verify(
        &self,
        k: &ContractPack,
        prompter: &Prompter<'_>,
        train: &[u8],
        manifest: &[u8],
    ) -> Result<Value, ViewError>;

    /// Whether `manifest` describes a view of this kind.
    fn recognizes(&self, manifest: &Value) -> bool {
        manifest.get("artifact_kind").and_then(Value::as_str) == Some(self.artifact_kind())
    }
}
