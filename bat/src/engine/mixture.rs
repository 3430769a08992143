//! The `mixture=uniform` ablation's round view now lives in the round-view
//! registry ([`crate::round::view::uniform`]); these re-exports keep the
//! engine's old paths working.

pub use crate::round::view::uniform::{
    is_uniform_manifest, uniform_view, verify_uniform_view, POOL_UNIFORM, UNIFORM_ARTIFACT_KIND,
    UNIFORM_PER_BATCH,
};
