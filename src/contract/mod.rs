//! The BaT contract (`../shared/spec/BAT_CONTRACT.md`), reproduced exactly:
//! encodings, source grid, round views, evaluation summary, promotion gate,
//! firewall scan and model binding. Pure library code: no terminal I/O and no
//! environment reads.

pub mod conformance;
pub mod json;
pub mod pack;
