//! bat-ledger: a domain-free content-addressed store with git-like history.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
