//! Record header decoding plus a bounded payload decode, as the importer
//! does it: header bytes, then the payload through the decoder its
//! compression code names.
#![no_main]
use bat_ledger::pack::{RecordHeader, COMPRESSION_PLANES, RECORD_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < RECORD_HEADER_LEN {
        return;
    }
    let (h, payload) = data.split_at(RECORD_HEADER_LEN);
    let h: &[u8; RECORD_HEADER_LEN] = h.try_into().expect("split at the header length");
    // The checksum makes valid headers rare; decode the bytes as given and
    // also re-sealed (same fields, correct checksum) to reach past it.
    let _ = RecordHeader::decode(h);
    let mut sealed = *h;
    let sum = blake3::hash(&sealed[0..72]);
    sealed[72..80].copy_from_slice(&sum.as_bytes()[0..8]);
    if let Ok(hd) = RecordHeader::decode(&sealed) {
        let cap = hd.raw_len.min(1 << 20);
        if hd.compression == COMPRESSION_PLANES {
            let _ = bat_ledger::delta::decode_planes(payload, cap, None);
        } else {
            let _ = bat_ledger::delta::inflate_frame(payload, cap as usize);
        }
    }
});
