//! Planes payloads, plain and delta (sparse or dense) against a base made
//! from the input: the first two bytes pick the raw length and the base.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let raw_len = u64::from(u16::from_le_bytes([data[0], data[1]])) * 8;
    let payload = &data[2..];
    let _ = bat_ledger::delta::PlanesHeader::decode(payload);
    let _ = bat_ledger::delta::decode_planes(payload, raw_len, None);
    let base: Vec<u8> = (0..raw_len).map(|i| (i * 31 % 251) as u8).collect();
    let _ = bat_ledger::delta::decode_planes(payload, raw_len, Some(&base));
});
