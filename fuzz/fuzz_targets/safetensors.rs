//! The strict safetensors header parser (delta storage, and the round
//! checkpoint check of `bat bind` / `bat commit`).
#![no_main]
use bat_ledger::delta::safetensors::{header_len, parse_layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let _ = header_len(data, len);
    if let Some(l) = parse_layout(data, len) {
        for t in &l.tensors {
            assert!(t.start >= l.data_start && t.start <= t.end && t.end <= len);
        }
    }
    // The same header claimed for a longer file (data not in memory).
    let _ = parse_layout(data, len.saturating_mul(2));
});
