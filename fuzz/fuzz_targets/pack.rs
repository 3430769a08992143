//! Pack files: the header check and the record scan used to rebuild a
//! catalog from packs.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(data).expect("write temp file");
    let _ = bat_ledger::pack::check_pack_header(f.as_file());
    let _ = bat_ledger::pack::scan_pack(f.path());
});
