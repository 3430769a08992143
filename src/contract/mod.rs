//! The BaT contract (`../shared/spec/BAT_CONTRACT.md`), reproduced exactly:
//! encodings, source grid, round views, evaluation summary, promotion gate,
//! firewall scan and model binding. Pure library code: no terminal I/O and no
//! environment reads.

pub mod conformance;
pub mod json;
pub mod pack;
pub mod prompt;
pub mod reward;
pub mod rng;
pub mod round;
pub mod round_conformance;
pub mod source;
pub mod task;
