//! Wire streams (the HTTP body of get and put) and single frame headers.
#![no_main]
use bat_ledger::remote::wire::{decode_frame_header, decode_stream, FRAME_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_stream(data);
    if let Some(h) = data.get(..FRAME_HEADER_LEN) {
        let h: &[u8; FRAME_HEADER_LEN] = h.try_into().expect("exact length");
        let _ = decode_frame_header(h);
    }
});
