//! Remotes of a ledger (transfer engine: other branch). This branch adds the
//! HTTP and S3 remotes.

pub mod frame;
pub mod http;
pub mod iface;
pub mod s3;
