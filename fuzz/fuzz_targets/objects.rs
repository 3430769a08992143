//! Tree, commit and chunk-list decoding; whatever decodes must re-encode to
//! the same bytes (the encodings are canonical).
#![no_main]
use bat_ledger::{ChunkList, Commit, Tree};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = Tree::decode(data) {
        assert_eq!(t.encode(), data);
    }
    if let Ok(c) = Commit::decode(data) {
        assert_eq!(c.encode().expect("a decoded commit encodes"), data);
    }
    if let Ok(l) = ChunkList::decode(data) {
        assert_eq!(l.encode(), data);
    }
});
