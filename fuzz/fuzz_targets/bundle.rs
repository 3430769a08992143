//! Bundle files: open (checksum, refs, frame index), then read every
//! object back through the remote interface.
#![no_main]
use bat_ledger::remote::{Bundle, Remote};
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(data).expect("write temp file");
    // Reseal the trailing checksum so the parser is reached.
    if data.len() >= 48 {
        let body = &data[..data.len() - 32];
        let sum = blake3::hash(body);
        let mut sealed = body.to_vec();
        sealed.extend_from_slice(sum.as_bytes());
        let mut g = tempfile::NamedTempFile::new().expect("temp file");
        g.write_all(&sealed).expect("write temp file");
        if let Ok(mut b) = Bundle::open(g.path()) {
            let _ = b.list_refs();
            let ids: Vec<_> = b.summary().refs.iter().map(|r| r.1 .0).collect();
            let _ = b.get(&ids, &mut |_| Ok(()));
        }
    }
    let _ = Bundle::open(f.path());
});
