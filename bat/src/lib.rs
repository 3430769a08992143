//! bat: the Benchmark-as-Teacher domain on top of `bat-ledger` and
//! `bat-contract` — rounds as commits, the loop engine, replay, inspection,
//! reports, sharing, serving and the simulator. No terminal I/O and no
//! environment reads: the `bat-cli` crate prints.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod checkpoint;
mod ctx;
pub use ctx::Ctx;
pub mod clone;
pub mod demo;
pub mod engine;
pub mod experiment;
pub mod inspect;
pub mod remote;
pub mod replay;
pub mod report;
pub mod retention;
pub mod round;
pub mod serve;
pub mod sim;
