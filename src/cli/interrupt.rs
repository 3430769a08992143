//! Ctrl-C and SIGTERM: one process-wide flag that every cancellable library
//! operation checks (the ledger checks it between chunks and before it
//! moves a ref). `bat run` installs it too: its children run in their own
//! process group, the signal is forwarded to that group (see
//! [`crate::engine::command::Supervision`]) and a second signal kills the
//! group before bat exits. `bat replay` does not install it yet: its
//! children get the signal with it and `--resume` continues. The first signal
//! sets the flag and the command stops at its next safe point with exit
//! code 130; a second signal ends the process at once (still crash-safe:
//! nothing is referenced before it is durable).
//!
//! The signal plumbing is tokio's (already a dependency for `bat serve` and
//! the network remotes), so no unsafe code lives in this crate.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use nix::sys::signal::Signal;

use super::error::EXIT_INTERRUPTED;

/// Set once SIGINT or SIGTERM arrived (after [`install`]).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The first signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The process group of the child `bat run` is running (0: none), killed
/// when a second signal ends bat at once.
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
