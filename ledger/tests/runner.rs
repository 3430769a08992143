//! The ledger's integration tests, one module per former test binary,
//! linked into this one binary (`cargo test -p bat-ledger --test runner
//! delta::` runs one family).
#![forbid(unsafe_code)]

mod common;

mod base_files;
mod chain_bounds;
mod delta;
mod delta_props;
mod delta_stats;
mod encoding_props;
mod error_messages;
mod high_exceptions_props;
mod joint_props;
mod library;
mod remote_absent;
mod remote_bundle;
mod remote_peer;
mod remote_resume;
mod remote_wire;
mod scale;
