//! bat-cli: the `bat` command line on top of the `bat` domain crate. One
//! file per verb under `cli/`; this crate is the only one that prints,
//! reads the environment or parses arguments.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
