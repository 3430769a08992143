//! Remotes of a ledger. This module holds the network remotes: the HTTP
//! client of `bat serve` and S3-compatible object storage. The `Remote`
//! trait and the wire format live in `bat_ledger::remote`.

pub mod frame;
pub mod http;
pub mod s3;
