//! The simulator's vocabulary: evidence conditions and agent actions, shared
//! by the environment and the policy (kept below both).

/// Conditions of the evidence a stage starts from.
pub const CONDITIONS: [&str; 3] = ["clean", "inconsistent", "missing"];
/// The agent's choices at every stage.
pub const ACTIONS: [&str; 4] = ["verify", "repair", "rush", "narrate"];
/// Index of `missing` in [`CONDITIONS`].
pub const MISSING: usize = 2;
/// Index of `clean` in [`CONDITIONS`].
pub const CLEAN: usize = 0;
/// Index of `repair` in [`ACTIONS`].
pub const REPAIR: usize = 1;
/// Index of `narrate` in [`ACTIONS`].
pub const NARRATE: usize = 3;
