//! Round views in one place: the registry of every view a round can train
//! on, keyed by [`ViewKind`] (the mixture name).
//!
//! A view builds its rows and manifest from the source grid, verifies a
//! built view, and recognizes its own manifest (by `artifact_kind`). The
//! loop builds through [`view`], a replay recognizes the recorded view with
//! [`kind_of`] and rebuilds it, and a round commit verifies it the same way,
//! so "which view is this?" is answered here only. Every manifest is made by
//! [`bat_contract::round::view_manifest`].
//!
//! Entries:
//! - [`three_pool`]: the contract's view (the default);
//! - [`uniform`]: the `mixture=uniform` ablation.
//!
//! A new ablation view is one new file (a unit struct implementing
//! [`RoundView`] and its `ViewKind` constant) plus one line in `REGISTRY`.

pub mod kind;
pub mod three_pool;
pub mod uniform;

pub use kind::{RoundView, ViewKind};

use bat_contract::json::Value;

/// Every registered view; the first is the default.
static REGISTRY: [&dyn RoundView; 2] = [&three_pool::ThreePool, &uniform::Uniform];

/// Every registered view, the default first.
pub fn views() -> &'static [&'static dyn RoundView] {
    &REGISTRY
}

/// The view registered under `kind`.
pub fn view(kind: ViewKind) -> &'static dyn RoundView {
    *REGISTRY
        .iter()
        .find(|v| v.kind() == kind)
        .expect("every ViewKind constant is declared next to its registry entry")
}

/// The view a manifest describes. A manifest no view recognizes is taken
/// for the default (three-pool) view, whose verifier then refuses it.
pub fn kind_of(manifest: &Value) -> ViewKind {
    REGISTRY
        .iter()
        .find(|v| v.recognizes(manifest))
        .unwrap_or(&REGISTRY[0])
        .kind()
}

/// The view with mixture name `name` (`three_pool`, `uniform`).
pub fn by_name(name: &str) -> Option<ViewKind> {
    REGISTRY.iter().map(|v| v.kind()).find(|k| k.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_view_is_registered_once_and_recognizes_its_own_manifest() {
        let mut names: Vec<&str> = views().iter().map(|v| v.kind().name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), views().len());
        for v in views() {
            assert_eq!(view(v.kind()).artifact_kind(), v.artifact_kind());
            let manifest = bat_contract::json::parse(&format!(
                "{{\"artifact_kind\":\"{}\"}}",
                v.artifact_kind()
            ))
            .expect("json");
            assert_eq!(kind_of(&manifest), v.kind());
            assert_eq!(by_name(v.kind().name()), Some(v.kind()));
        }
        let other = bat_contract::json::parse("{\"artifact_kind\":\"x\"}").expect("json");
        assert_eq!(kind_of(&other), ViewKind::THREE_POOL);
        assert_eq!(by_name("nope"), None);
    }
}
