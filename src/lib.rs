//! bat: the Benchmark-as-Teacher domain on top of `bat-ledger`, and the CLI.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checkpoint;
pub mod cli;
pub mod clone;
pub mod contract;
pub mod demo;
pub mod engine;
pub mod fsutil;
pub mod inspect;
pub mod remote;
pub mod replay;
pub mod report;
pub mod retention;
pub mod round;
pub mod serve;
pub mod sim;
