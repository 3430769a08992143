//! Ctrl-C and SIGTERM: one process-wide flag that every cancellable library
//! operation checks (the ledger checks it between chunks and before it
//! moves a ref). `bat run` and `bat replay` install it too: their children
//! run in their own process group ([`Supervised`]), the signal is forwarded
//! to that group (see [`bat::engine::child::Supervision`]) and a second
//! signal kills the group before bat exits. The first signal sets the flag
//! and the command stops at its next safe point with exit code 130 (143
//! for a supervising verb stopped by SIGTERM); a second signal ends the
//! process at once (still crash-safe: nothing is referenced before it is
//! durable).
//!
//! The signal plumbing is tokio's (already a dependency for `bat serve` and
//! the network remotes), so no unsafe code lives in this crate.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::error::EXIT_INTERRUPTED;
use super::CliError;
use bat::engine::child::{OutputSink, Stream, Supervision};
use bat::engine::rounds::{LoopEvent, Observer};
use bat::replay::{ReplayObserver, RoundReplay};

/// Exit code of a supervising verb stopped by SIGTERM (128 + 15, the shell
/// convention; SIGINT gives 130 as every interrupted verb).
pub const EXIT_TERMINATED: u8 = 143;

/// Set once SIGINT or SIGTERM arrived (after [`install`]).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The first signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The process group of the child `bat run` or `bat replay` is running (0:
/// none), killed when a second signal ends bat at once.
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);

/// The first signal received, once one arrived.
pub fn signal() -> Option<Signal> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        n => Signal::try_from(n).ok(),
    }
}

/// Record the process group of the running child (`None`: none).
pub fn set_child_group(pgid: Option<u32>) {
    let g = pgid.and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    CHILD_GROUP.store(g, Ordering::SeqCst);
}

/// The process-wide cancel flag handed to library operations.
pub fn flag() -> &'static AtomicBool {
    &INTERRUPTED
}

/// True once a signal arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Catch SIGINT and SIGTERM from now on. Only verbs that check the flag
/// install it; every other verb keeps the default (die at once), which is
/// right for commands that write nothing. The handlers are registered
/// before this returns, so a signal sent after the verb printed anything is
/// never lost to the default action.
pub fn install() {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<bool>();
    let spawned = std::thread::Builder::new()
        .name("bat-signals".into())
        .spawn(move || {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
            else {
                let _ = ready_tx.send(false);
                return;
            };
            rt.block_on(async move {
                let (mut int, mut term) = match (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) {
                    (Ok(i), Ok(t)) => (i, t),
                    _ => {
                        let _ = ready_tx.send(false);
                        return;
                    }
                };
                let _ = ready_tx.send(true);
                loop {
                    let sig = tokio::select! {
                        _ = int.recv() => Signal::SIGINT,
                        _ = term.recv() => Signal::SIGTERM,
                    };
                    let _ = SIGNAL.compare_exchange(0, sig as i32, Ordering::SeqCst, Ordering::SeqCst);
                    if INTERRUPTED.swap(true, Ordering::SeqCst) {
                        let g = CHILD_GROUP.load(Ordering::SeqCst);
                        if g > 0 {
                            // Leave no child of `bat run` behind.
                            let _ = nix::sys::signal::killpg(
                                nix::unistd::Pid::from_raw(g),
                                Signal::SIGKILL,
                            );
                        }
                        // A second signal: the user means it. Still safe,
                        // as a kill is: nothing is referenced before it is
                        // durable.
                        std::process::exit(i32::from(EXIT_INTERRUPTED));
                    }
                    eprintln!(
                        "\ninterrupt: stopping at the next safe point (press Ctrl-C again to quit at once)"
                    );
                }
            });
        });
    // Wait until the handlers are registered (or failed to be: then Ctrl-C
    // keeps its default action, which is crash-safe too).
    if spawned.is_ok() {
        let _ = ready_rx.recv();
    }
}

/// `--grace-period`, shared by the verbs that supervise external children.
#[derive(Debug, Clone, clap::Args)]
pub struct GraceArgs {
    /// Seconds a child's process group has to end after a forwarded
    /// SIGINT/SIGTERM before it is killed with SIGKILL.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub grace_period: f64,
}

impl GraceArgs {
    /// The supervision asked for, or a usage error for a negative or
    /// non-finite value (which `Duration` cannot hold).
    pub fn supervision(&self) -> Result<Supervision, CliError> {
        if !self.grace_period.is_finite() || self.grace_period < 0.0 {
            return Err(CliError::usage_error(format!(
                "--grace-period must be a number of seconds ≥ 0, not {}",
                self.grace_period
            )));
        }
        Ok(Supervision {
            grace: Duration::from_secs_f64(self.grace_period),
        })
    }
}

/// An observer whose children run supervised: each in a process group of
/// its own, stopped by the signal this process received (forwarded, then
/// SIGKILL after the grace period), and killed at once by a second signal.
/// Only for verbs that called [`install`]: without the handler a Ctrl-C
/// would end bat and never reach a child outside the terminal's group.
pub struct Supervised<O> {
    /// The observer that shows progress and output.
    pub inner: O,
    /// How the children are stopped.
    pub supervision: Supervision,
}

impl<O: Observer> Observer for Supervised<O> {
    fn event(&mut self, event: &LoopEvent<'_>) {
        self.inner.event(event);
    }
}

impl<O: Observer> OutputSink for Supervised<O> {
    fn output(&mut self, label: &str, stream: Stream, bytes: &[u8]) {
        self.inner.output(label, stream, bytes);
    }

    fn supervision(&self) -> Option<Supervision> {
        Some(self.supervision)
    }

    fn stop_signal(&self) -> Option<Signal> {
        signal()
    }

    fn child_env(&self) -> Vec<(String, String)> {
        self.inner.child_env()
    }

    fn child_started(&mut self, label: &str, pgid: u32) {
        // First, so a second signal kills the group even while the inner
        // observer is still busy recording it.
        set_child_group(Some(pgid));
        self.inner.child_started(label, pgid);
    }

    fn child_ended(&mut self, label: &str, pgid: u32) {
        set_child_group(None);
        self.inner.child_ended(label, pgid);
    }
}

impl<O: Observer + ReplayObserver> ReplayObserver for Supervised<O> {
    fn planned(&mut self, round_ids: &[String]) {
        self.inner.planned(round_ids);
    }

    fn round_replayed(&mut self, round: &RoundReplay) {
        self.inner.round_replayed(round);
    }

    fn loop_observer(&mut self) -> &mut dyn Observer {
        self
    }
}

/// Report a supervising verb stopped by `sig` (its child group was
/// signalled and is gone) and give its exit code: 143 for SIGTERM, else
/// 130. `between_rounds`: no round was in progress, so none was dropped.
pub fn report_stopped(
    sig: Signal,
    error: &dyn std::fmt::Display,
    between_rounds: bool,
    hint: String,
) -> ExitCode {
    let code = if sig == Signal::SIGTERM {
        EXIT_TERMINATED
    } else {
        EXIT_INTERRUPTED
    };
    let msg = if between_rounds {
        error.to_string()
    } else {
        format!("{error}; the round in progress was not committed")
    };
    let _ = CliError::interrupted(msg).with_hint(hint).report(false);
    ExitCode::from(code)
}
