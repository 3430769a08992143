//! The contract's three-pool round view (§C): 4 S-target + 2 S-mix + 2 E2E
//! rows per batch. The contract code in [`bat_contract::round`] is the
//! view; this entry only registers it.

use super::kind::{RoundView, ViewKind};
use bat_contract::json::Value;
use bat_contract::prompt::Prompter;
use bat_contract::round::{
    materialize, verify_dataset, BuildInputs, BuiltRound, ViewError, THREE_POOL_ARTIFACT_KIND,
};
use bat_contract::task::ContractPack;

impl ViewKind {
    /// The contract's three-pool view (the default mixture).
    pub const THREE_POOL: ViewKind = ViewKind::named("three_pool");
}

/// The registry entry of the three-pool view.
pub struct ThreePool;

impl RoundView for ThreePool {
    fn kind(&self) -> ViewKind {
        ViewKind::THREE_POOL
    }

    fn artifact_kind(&self) -> &'static str {
        THREE_POOL_ARTIFACT_KIND
    }

    fn build(
        &self,
        k: &ContractPack,
        prompter: &Prompter<'_>,
        inp: &BuildInputs<'_>,
    ) -> Result<BuiltRound, ViewError> {
        materialize(k, prompter, inp)
    }

    fn verify(
        &self,
        k: &ContractPack,
        prompter: &Prompter<'_>,
        train: &[u8],
        manifest: &[u8],
    ) -> Result<Value, ViewError> {
        verify_dataset(k, prompter, train, manifest)
    }
}
