//! Portable numerics for the simulator: keyed random streams and `exp`/`ln`
//! built from IEEE-754 basic operations only.
//!
//! `f64::exp` and `f64::ln` call the platform's math library, whose last-bit
//! rounding differs between C libraries. Everything that decides a sampled
//! action or a stored weight goes through [`exp`] and [`ln`] here instead, so
//! the simulator's bytes do not depend on the platform. Addition,
//! multiplication, division and rounding are correctly rounded everywhere,
//! and Rust never fuses them into FMAs on its own.

/// A deterministic stream of random numbers derived from a key: the BLAKE3
/// extendable output of the key's parts under a domain string. Two streams
/// with different domains or parts are independent; the same key always
/// gives the same numbers, whatever thread asks for them.
pub struct KeyedStream {
    reader: blake3::OutputReader,
}

impl KeyedStream {
    /// The stream for `parts` (each length-prefixed, so `["ab","c"]` and
    /// `["a","bc"]` differ) under `domain`.
    pub fn new(domain: &str, parts: &[&[u8]]) -> KeyedStream {
        let mut h = blake3::Hasher::new_derive_key(domain);
        for p in parts {
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p);
        }
        KeyedStream {
            reader: h.finalize_xof(),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.reader.fill(&mut b);
        u64::from_le_bytes(b)
    }

    /// A uniform float in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

/// A uniform float in [0, 1) determined by a key alone.
pub fn keyed_uniform(domain: &str, parts: &[&[u8]]) -> f64 {
    KeyedStream::new(domain, parts).uniform()
}

// ln 2 split so that k·LN2_HI is exact for the k used here (Cody–Waite).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const LN2: f64 = std::f64::consts::LN_2;

/// `e^x` from basic operations: `x = k·ln2 + r` with `|r| ≤ ln2/2`, a
/// degree-16 Taylor polynomial for `e^r`, and an exact scaling by `2^k`.
/// Inputs are clamped to [-700, 700] (the simulator never needs more).
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let x = x.clamp(-700.0, 700.0);
    let k = (x * std::f64::consts::LOG2_E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut p = 1.0;
    for n in (1..=16).rev() {
        p = 1.0 + p * r / f64::from(n);
    }
    // |k| ≤ 1010, so the biased exponent stays in the normal range.
    let biased = (k as i64 + 1023) as u64;
    p * f64::from_bits(biased << 52)
}

/// Natural logarithm from basic operations, for `x > 0` (smaller inputs are
/// clamped to 1e-300): `x = m·2^e` with `m` in [√½, √2), then
/// `ln m = 2·atanh((m−1)/(m+1))` by its series.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let x = x.max(1e-300);
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut sum = 0.0;
    for n in (0..=15).rev() {
        sum = 1.0 / f64::from(2 * n + 1) + s2 * sum;
    }
    e as f64 * LN2 + 2.0 * s * sum
}

/// The logistic function.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + exp(-x))
}

/// Softmax of `logits` (max-subtracted, summed left to right).
pub fn softmax(logits: &[f64]) -> Vec<f64> {
    let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits.iter().map(|z| exp(z - m)).collect();
    let total: f64 = e.iter().fold(0.0, |a, b| a + b);
    e.iter().map(|v| v / total).collect()
}

/// The index `u` falls into when [0, 1) is cut by the cumulative `probs`
/// (the last index takes any rounding remainder).
pub fn sample_index(probs: &[f64], u: f64) -> usize {
    let mut acc = 0.0;
    for (i, p) in probs.iter().enumerate() {
        acc += p;
        if u < acc {
            return i;
        }
    }
    probs.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_ln_match_the_platform_closely() {
        let mut s = KeyedStream::new("bat-sim test", &[b"exp"]);
        for _ in 0..10_000 {
            let x = (s.uniform() - 0.5) * 80.0;
            let (a, b) = (exp(x), x.exp());
            assert!(((a - b) / b).abs() < 4e-16, "exp({x}): {a} vs {b}");
            let y = s.uniform() * 1e6 + 1e-9;
            let (c, d) = (ln(y), y.ln());
            assert!(
                (c - d).abs() <= 4e-16 * d.abs().max(1.0),
                "ln({y}): {c} vs {d}"
            );
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(ln(1.0), 0.0);
    }

    #[test]
    fn streams_are_keyed_and_length_prefixed() {
        let a = KeyedStream::new("d", &[b"ab", b"c"]).next_u64();
        let b = KeyedStream::new("d", &[b"a", b"bc"]).next_u64();
        let c = KeyedStream::new("e", &[b"ab", b"c"]).next_u64();
        let a2 = KeyedStream::new("d", &[b"ab", b"c"]).next_u64();
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_ne!(a, c);
        let u = keyed_uniform("d", &[b"x"]);
        assert!((0.0..1.0).contains(&u));
    }

    #[test]
    fn softmax_sums_to_one_and_sampling_follows_the_cut() {
        let p = softmax(&[0.0, 1.0, 2.0, -1.0]);
        let total: f64 = p.iter().sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!(p[2] > p[1] && p[1] > p[0] && p[0] > p[3]);
        assert_eq!(sample_index(&p, 0.0), 0);
        assert_eq!(sample_index(&p, p[0] + 1e-12), 1);
        assert_eq!(sample_index(&p, 0.999_999_999), 3);
    }
}
