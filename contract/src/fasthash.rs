//! The hasher of the evaluation key sets (summary cells, gate cells).

/// An Fx-style word-at-a-time hash: the key sets hold short strings and
/// ints, so a cheap non-cryptographic hash is enough and much faster than
/// SipHash.
#[derive(Default)]
pub(crate) struct FxLike(u64);

impl FxLike {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for FxLike {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.add(i as u64);
    }
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    fn write_i128(&mut self, i: i128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }
}

/// The hasher builder for evaluation key sets.
pub(crate) type FastHash = std::hash::BuildHasherDefault<FxLike>;
