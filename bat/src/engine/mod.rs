//! The loop engine: the BaT round loop of contract §H driven by external
//! trainer and evaluator commands, the §G.4 evaluation adapter, child
//! processes, and resuming an interrupted campaign from the ledger.
//!
//! The engine does no terminal I/O and reads no environment variables:
//! progress and child output go through the [`rounds::Observer`] the caller
//! provides, and finished rounds are handed to a [`rounds::RoundSink`]
//! (the CLI's sink commits them with [`crate::round::commit_round`]).

pub mod arms;
pub mod child;
pub mod evaluation;
pub mod hook;
pub mod live;
pub mod resume;
pub mod rounds;
pub mod runlock;
pub mod template;
