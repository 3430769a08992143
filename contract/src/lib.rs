//! bat-contract: the public BaT contract, reproduced exactly (its place among the parts:
//! `docs/ARCHITECTURE.md`):
//! encodings, source grid, round views, evaluation summary, promotion gate,
//! firewall scan and model binding. Pure library code: no terminal I/O and no
//! environment reads.
//!
//! What the contract is, section by section (the `§X` references in these
//! modules): `docs/contract/README.md`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod binding;
pub mod conformance;
pub mod conformance_case;
pub mod contract_pack;
pub mod eval_conformance;
pub mod fasthash;
pub mod firewall;
pub mod fsutil;
pub mod gate;
pub mod json;
pub mod numeric;
pub mod pack;
pub mod pack_reader;
pub mod pack_schema;
pub mod prompt;
pub mod protocol;
pub mod reward;
pub mod reward_score;
pub mod rng;
pub mod round;
pub mod round_conformance;
pub mod source;
pub mod summary;
pub mod task;
pub mod template;
pub mod unicode_tables;
pub mod vocabulary;
