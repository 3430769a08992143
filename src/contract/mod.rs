//! The BaT contract (`../shared/spec/BAT_CONTRACT.md`), reproduced exactly:
//! encodings, source grid, round views, evaluation summary, promotion gate,
//! firewall scan and model binding. Pure library code: no terminal I/O and no
//! environment reads.

pub mod binding;
pub mod conformance;
pub mod eval_conformance;
pub mod firewall;
pub mod gate;
pub mod json;
pub mod numeric;
pub mod pack;
pub mod protocol;
pub mod summary;
pub mod unicode_tables;
