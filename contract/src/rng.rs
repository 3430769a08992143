//! CPython-compatible random numbers (contract §C.1): MT19937 seeded from a
//! string the way `random.Random(str)` does it ("version 2" seeding), and
//! `shuffle`. The reference only ever shuffles, so that is all this offers.

use sha2::{Digest, Sha512};

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_B0DF;
const UPPER: u32 = 0x8000_0000;
const LOWER: u32 = 0x7FFF_FFFF;

/// The MT19937 init key CPython derives from a string seed: the big-endian
/// integer of `utf8(seed) ‖ sha512(utf8(seed))`, as 32-bit words, least
/// significant word first.
pub fn init_key(seed: &str) -> Vec<u32> {
    let mut bytes = seed.as_bytes().to_vec();
    bytes.extend_from_slice(&Sha512::digest(seed.as_bytes()));
    // Leading zero bytes do not change the integer; dropping them keeps the
    // word count equal to CPython's (which sizes the key by bit length).
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    let significant = &bytes[first..];
    if significant.is_empty() {
        return vec![0];
    }
    let pad = (4 - significant.len() % 4) % 4;
    let mut padded = vec![0u8; pad];
    padded.extend_from_slice(significant);
    let mut words: Vec<u32> = padded
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    words.reverse();
    words
}

/// A Mersenne Twister in CPython's exact configuration.
#[derive(Clone)]
pub struct Mt19937 {
    mt: [u32; N],
    index: usize,
}

impl std::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Mt19937 {
    /// `random.Random(seed)` for a `str` seed.
    pub fn from_str_seed(seed: &str) -> Self {
        Self::from_key(&init_key(seed))
    }

    /// `init_by_array(key)`.
    pub fn from_key(key: &[u32]) -> Self {
        let mut mt = [0u32; N];
        mt[0] = 19_650_218;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        let klen = key.len().max(1);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            let kj = key.get(j).copied().unwrap_or(0);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(kj)
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= klen {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        Mt19937 { mt, index: N }
    }

    fn regenerate(&mut self) {
        for k in 0..N {
            let y = (self.mt[k] & UPPER) | (self.mt[(k + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.mt[k] = self.mt[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// The next tempered 32-bit output (`genrand_uint32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.regenerate();
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9D2C_5680;
        y ^= (y << 15) & 0xEFC6_0000;
        y ^= y >> 18;
        y
    }

    /// `getrandbits(k)` for 1 ≤ k ≤ 32 (k is clamped into that range).
    pub fn getrandbits(&mut self, k: u32) -> u32 {
        let k = k.clamp(1, 32);
        self.next_u32() >> (32 - k)
    }

    /// `_randbelow(n)`: rejection sampling on `bit_length(n)` bits; `n` ≥ 1
    /// (0 is treated as 1, which always yields 0).
    pub fn randbelow(&mut self, n: u32) -> u32 {
        let n = n.max(1);
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `shuffle(list)`: Fisher–Yates from the back, as CPython does it.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            // Lists here are tiny (≤ 21); the u32 bound is never reached.
            let j = self.randbelow((i + 1) as u32) as usize;
            items.swap(i, j);
        }
    }
}

/// A permutation of `0..n` as a fresh generator seeded with `seed` shuffles it.
pub fn shuffled_indices(seed: &str, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    Mt19937::from_str_seed(seed).shuffle(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_seed_key_is_the_digest_alone() {
        // An empty string still carries a 64-byte SHA-512, so 16 words.
        assert_eq!(init_key("").len(), 16);
    }

    #[test]
    fn known_python_value() {
        // The first output of the first seed in rng-vectors.json (CPython 3.11).
        let v = Mt19937::from_str_seed("r01:S3:bat-core-v1:target:0").next_u32();
        assert_eq!(v, 30_362_425);
    }
}
