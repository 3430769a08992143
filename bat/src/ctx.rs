//! The capabilities a long step of the domain needs from its caller: where
//! to report progress and the flag that asks it to stop. The library never
//! decides either; the CLI passes its progress renderer and its Ctrl-C
//! flag, library users and tests may pass [`Ctx::quiet`].

use std::sync::atomic::{AtomicBool, Ordering};

use bat_ledger::{NoProgress, Progress};

/// Progress and cancellation for one call (copied down to every step).
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// Receives the phases and byte counts of ledger reads and writes.
    pub progress: &'a dyn Progress,
    /// Set (by a signal handler, usually) to stop at the next safe point:
    /// a stopped commit records nothing, a stopped checkout leaves a
    /// folder the next attempt replaces.
    pub cancel: &'a AtomicBool,
}

/// Never set: the cancel flag of [`Ctx::quiet`].
static NEVER_CANCELLED: AtomicBool = AtomicBool::new(false);

impl<'a> Ctx<'a> {
    /// Report to `progress`, stop when `cancel` is set.
    pub fn new(progress: &'a dyn Progress, cancel: &'a AtomicBool) -> Self {
        Ctx { progress, cancel }
    }

    /// Whether the caller asked to stop.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

impl Ctx<'static> {
    /// No progress, never cancelled (library users without a terminal).
    pub fn quiet() -> Self {
        Ctx {
            progress: &NoProgress,
            cancel: &NEVER_CANCELLED,
        }
    }
}

impl Default for Ctx<'static> {
    fn default() -> Self {
        Ctx::quiet()
    }
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("cancelled", &self.cancelled())
            .finish_non_exhaustive()
    }
}
