//! The BaT contract (../shared/spec/BAT_CONTRACT.md), reproduced exactly.
