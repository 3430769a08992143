//! Joint coding of a sparse delta of 16-bit elements (bf16, f16, i16, u16):
//! one Huffman symbol per changed element gives both the gap since the
//! previous change and the element's change as a small wrapping difference
//! of its 16-bit code (`new - old`), in a few interleaved bit streams.
//!
//! Why: a fine-tuning step moves a bf16 weight by one or two code points,
//! so the difference of the codes takes about 2.3 bits where the low XOR
//! byte took 3.1 (and the high XOR byte another plane); and a sparse link
//! was decoded as three zstd frames (gaps, two planes) and then applied in a
//! fourth pass. Here one table lookup per change decodes and applies it in
//! the same pass, and the streams (each a contiguous range of the piece)
//! are decoded side by side so the processor overlaps their lookups. See
//! FORMAT.md §12.3.
//!
//! Body layout (the single "frame" of a payload with
//! [`super::FLAG_JOINT`]):
//!
//! ```text
//! [ (SYMBOLS + 1) / 2 bytes ] code length of every symbol, 4 bits each
//!                             (low nibble first), 0 = unused, at most 12
//! u8                          S = number of streams, 1..=8
//! S × (u32 changes, u32 bytes)
//! the S streams' bytes, in order
//! ```
//!
//! Stream `j` covers elements `[j n / S, (j + 1) n / S)`; its gaps count
//! from the start of that range. Bits are read least significant first;
//! codes are canonical (shorter codes first, then by symbol).

/// Symbols `0..1024`: a change after `s % 64` unchanged elements, by
/// `VALUES[s / 64]`.
const SMALL: u16 = 1024;
/// Symbols `1024..1088`: a change after `s - 1024` unchanged elements whose
/// difference (outside `-8..=8`) follows in raw bits, in the payload's
/// [`Escapes`] form.
const ESCAPE_END: u16 = 1088;
/// Symbol 1088: 64 unchanged elements, no change.
const SKIP: u16 = 1088;
/// Number of symbols.
pub const SYMBOLS: usize = 1089;
/// Elements a gap symbol can express (`0..64`) and the skip length.
const GAP: usize = 64;
/// Longest code, in bits (the decoding table has `2^MAX_LEN` entries).
const MAX_LEN: u32 = 12;
/// Streams written by the encoder.
pub const STREAMS: usize = 4;
/// Most streams a decoder accepts.
const MAX_STREAMS: usize = 8;

/// The differences the 16 value classes stand for: ±1 .. ±8.
const VALUES: [u16; 16] = {
    let mut v = [0u16; 16];
    let mut i = 0;
    while i < 8 {
        v[2 * i] = (i + 1) as u16;
        v[2 * i + 1] = 0u16.wrapping_sub((i + 1) as u16);
        i += 1;
    }
    v
};

/// Value class of `d + 8` for `d` in `-8..=8` (0xFF: none, for 0): a
/// lookup, because the sign of a change is a coin toss that a branch would
/// mispredict half the time.
const CLASS: [u8; 17] = [15, 13, 11, 9, 7, 5, 3, 1, 0xFF, 0, 2, 4, 6, 8, 10, 12, 14];

/// Value class of a nonzero difference, if it has one.
#[inline(always)]
fn class_of(d: u16) -> Option<u16> {
    let c = CLASS.get(usize::from(d.wrapping_add(8))).copied()?;
    (c != 0xFF).then_some(u16::from(c))
}

/// One change: element index and wrapping difference (nonzero).
pub type Change = (u32, u16);

/// How the difference of an escaped change (one outside `-8..=8`) follows
/// its symbol. Which form a payload uses is in its flags
/// ([`super::FLAG_GOLOMB_ESCAPES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escapes {
    /// The 16-bit wrapping difference as 16 raw bits (nonzero): what
    /// builds before the Golomb form wrote.
    Raw16,
    /// Sign and magnitude, the magnitude minus 9 as an exponential-Golomb
    /// code of order 3: `k` one bits and a zero (`k <= 11`), the sign bit
    /// (1: negative), then `k + 3` bits of offset; `2k + 5` bits in all.
    /// Differences of 9 to 16 code points, half of the escapes on the main
    /// series, take 5 bits instead of 16 (FORMAT.md §12.3.1).
    Golomb,
}

/// Largest exponential-Golomb class of an escaped difference: class `k`
/// holds the magnitudes `9 + 8 (2^k - 1) ..= 8 + 8 (2^(k+1) - 1)`, and
/// class 11 ends exactly at 32768, the largest wrapping magnitude.
const GOLOMB_MAX_CLASS: u32 = 11;

/// The raw bits (least significant first) and their count that follow an
/// escape symbol for the difference `d` (nonzero) in the form `esc`.
fn escape_bits(d: u16, esc: Escapes) -> (u64, u32) {
    match esc {
        Escapes::Raw16 => (u64::from(d), 16),
        Escapes::Golomb => {
            let neg = (d as i16) < 0;
            let mag = u32::from(if neg { d.wrapping_neg() } else { d });
            // Only differences outside -8..=8 are escaped (`push` takes
            // nonzero ones); a smaller one has no Golomb code, and coding
            // it as 9 would store a wrong checkpoint.
            assert!(mag >= 9, "escape of the small difference {d}");
            let v = mag - 9;
            let k = (v / 8 + 1).ilog2();
            let offset = v - 8 * ((1 << k) - 1);
            let bits = ((1u64 << k) - 1) | u64::from(neg) << (k + 1) | u64::from(offset) << (k + 2);
            (bits, 2 * k + 5)
        }
    }
}

/// Decode the raw bits `w` after an escape symbol: the difference and how
/// many bits it took. Inlined into the decoding loop, not kept cold: where
/// a round gives many elements a new mantissa, most changes are escapes
/// (`bat fsck` of the 2.6 GB transfer series spent about a tenth less CPU).
#[inline(always)]
fn escape_value(w: u64, esc: Escapes) -> Result<(u16, usize), String> {
    match esc {
        Escapes::Raw16 => match w as u16 {
            0 => Err("an escaped change of zero".into()),
            d => Ok((d, 16)),
        },
        Escapes::Golomb => {
            let k = w.trailing_ones();
            if k > GOLOMB_MAX_CLASS {
                return Err("an escaped difference longer than 16 bits".into());
            }
            let neg = (w >> (k + 1)) & 1 == 1;
            let offset = ((w >> (k + 2)) & ((1 << (k + 3)) - 1)) as u32;
            let mag = 9 + 8 * ((1u32 << k) - 1) + offset;
            // Class 11 ends at 32768 exactly, so `mag` fits 16 bits
            // (32768 is 0x8000 with either sign).
            let d = mag as u16;
            Ok((if neg { d.wrapping_neg() } else { d }, 2 * k as usize + 5))
        }
    }
}

/// Bits of the short escapes' table index: class 3, the longest it holds,
/// takes `2 * 3 + 5` bits.
const SHORT_ESCAPE_BITS: u32 = 11;

/// The Golomb escapes of classes 0 to 3 (differences of 9 to 128 code
/// points either way, 5 to 11 bits), by the raw bits after the escape
/// symbol: the difference in bits 0-15 and its length in bits 16-23; 0
/// where the bits begin a longer class. Why: where most changes are
/// escapes, [`escape_value`]'s shifts and sums were most of a change's
/// instructions, and its variable length kept [`step2`] from decoding two
/// changes from one peek; a new bf16 mantissa moves a code by at most 127
/// points, so one lookup decodes nearly every escape.
const SHORT_ESCAPES: [u32; 1 << SHORT_ESCAPE_BITS] = {
    let mut t = [0u32; 1 << SHORT_ESCAPE_BITS];
    let mut i = 0usize;
    while i < t.len() {
        let w = i as u64;
        let k = w.trailing_ones();
        if k <= 3 {
            let neg = (w >> (k + 1)) & 1 == 1;
            let offset = ((w >> (k + 2)) & ((1 << (k + 3)) - 1)) as u32;
            let mag = (9 + 8 * ((1u32 << k) - 1) + offset) as u16;
            let d = if neg { mag.wrapping_neg() } else { mag };
            t[i] = d as u32 | (2 * k + 5) << 16;
        }
        i += 1;
    }
    t
};

/// Encode the changes (ascending indices, all `< n`, nonzero differences) of
/// a piece of `n` 16-bit elements as a joint body, escapes in the form
/// `esc`.
pub fn encode(changes: &[Change], n: usize, esc: Escapes) -> Vec<u8> {
    let mut e = Encoder::new(n, changes.len(), esc);
    for &(idx, d) in changes {
        e.push(idx as usize, d);
    }
    e.finish()
}

/// Builds a joint body from changes pushed in ascending element order.
pub struct Encoder {
    ranges: Vec<(usize, usize)>,
    /// Symbol, and the difference above it (for escapes), per entry.
    syms: Vec<u32>,
    /// Where each stream's symbols end in `syms`.
    bounds: [usize; STREAMS],
    counts: [u32; STREAMS],
    freq: Vec<u32>,
    /// Current stream, the element after its last change, and the end of
    /// its range.
    j: usize,
    next: usize,
    end: usize,
    changes: usize,
    escapes: Escapes,
}

impl Encoder {
    /// An encoder for a piece of `n` elements, expecting about `expect`
    /// changes, writing escapes in the form `escapes`.
    pub fn new(n: usize, expect: usize, escapes: Escapes) -> Encoder {
        let ranges = stream_ranges(n, STREAMS);
        Encoder {
            end: ranges[0].1,
            ranges,
            syms: Vec::with_capacity(expect + expect / 32 + 16),
            bounds: [0; STREAMS],
            counts: [0; STREAMS],
            freq: vec![0u32; SYMBOLS],
            j: 0,
            next: 0,
            changes: 0,
            escapes,
        }
    }

    /// Changes pushed so far.
    pub fn changes(&self) -> usize {
        self.changes
    }

    /// Record a change of element `idx` (above the previous one, below
    /// `n`) by the wrapping difference `d` (nonzero). Inlined into the
    /// scan: one call per change was a tenth of a commit's CPU time.
    #[inline(always)]
    pub fn push(&mut self, idx: usize, d: u16) {
        if idx >= self.end {
            self.enter_stream_of(idx);
        }
        let mut gap = idx - self.next;
        if gap >= GAP {
            gap = self.skip(gap);
        }
        let sym = match class_of(d) {
            Some(c) => c * GAP as u16 + gap as u16,
            None => SMALL + gap as u16,
        };
        self.syms.push(u32::from(sym) | u32::from(d) << 16);
        self.freq[usize::from(sym)] += 1;
        self.counts[self.j] += 1;
        self.next = idx + 1;
        self.changes += 1;
    }

    /// Close streams until the one whose range holds `idx`.
    #[cold]
    fn enter_stream_of(&mut self, idx: usize) {
        while idx >= self.ranges[self.j].1 {
            self.bounds[self.j] = self.syms.len();
            self.j += 1;
            self.next = self.ranges[self.j].0;
        }
        self.end = self.ranges[self.j].1;
    }

    /// Emit skips for all but the last `gap % GAP` unchanged elements.
    #[cold]
    fn skip(&mut self, mut gap: usize) -> usize {
        while gap >= GAP {
            self.syms.push(u32::from(SKIP));
            self.freq[usize::from(SKIP)] += 1;
            gap -= GAP;
        }
        gap
    }

    /// The body.
    pub fn finish(mut self) -> Vec<u8> {
        for b in &mut self.bounds[self.j..] {
            *b = self.syms.len();
        }
        let lens = code_lengths(&self.freq);
        let codes = canonical_codes(&lens);
        let mut out =
            Vec::with_capacity(SYMBOLS.div_ceil(2) + 1 + 8 * STREAMS + self.syms.len() + 16);
        for pair in lens.chunks(2) {
            out.push(pair[0] | (pair.get(1).copied().unwrap_or(0) << 4));
        }
        out.push(STREAMS as u8);
        let table_at = out.len();
        out.resize(table_at + 8 * STREAMS, 0);
        let mut from = 0usize;
        for k in 0..STREAMS {
            let before = out.len();
            let mut w = BitWriter::new(&mut out);
            for &e in &self.syms[from..self.bounds[k]] {
                let s = e as u16;
                let (code, len) = codes[usize::from(s)];
                w.put(u64::from(code), u32::from(len));
                if (SMALL..ESCAPE_END).contains(&s) {
                    // Up to 27 bits: a second put, as one may take 32.
                    let (raw, n) = escape_bits((e >> 16) as u16, self.escapes);
                    w.put(raw, n);
                }
            }
            from = self.bounds[k];
            w.finish();
            let bytes = (out.len() - before) as u32;
            let at = table_at + 8 * k;
            out[at..at + 4].copy_from_slice(&self.counts[k].to_le_bytes());
            out[at + 4..at + 8].copy_from_slice(&bytes.to_le_bytes());
        }
        out
    }
}

/// Element ranges of `s` streams over `n` elements.
fn stream_ranges(n: usize, s: usize) -> Vec<(usize, usize)> {
    (0..s).map(|j| (j * n / s, (j + 1) * n / s)).collect()
}

/// Huffman code lengths for `freq`, none longer than [`MAX_LEN`]: if the
/// optimal code is too deep, the counts are halved (keeping every used
/// symbol at least 1) until it fits; with all counts 1 the depth is
/// `ceil(log2(SYMBOLS)) = 11`, so this ends. (Cutting long codes to the
/// limit and lengthening the rarest ones instead was 5 times cheaper but
/// made the main series' deltas 0.8 % larger.) A single used symbol gets
/// length 1.
fn code_lengths(freq: &[u32]) -> Vec<u8> {
    let mut f: Vec<u64> = freq.iter().map(|&x| u64::from(x)).collect();
    loop {
        let lens = huffman_lengths(&f);
        if lens.iter().all(|&l| u32::from(l) <= MAX_LEN) {
            return lens;
        }
        for x in f.iter_mut().filter(|x| **x > 0) {
            *x = (*x / 2).max(1);
        }
    }
}

/// Unlimited Huffman code lengths (0 for unused symbols), by the
/// two-queue method: leaves sorted by count, internal nodes made in
/// nondecreasing weight order, so the two lightest nodes are always at the
/// fronts of the two queues (a binary heap here was 4 % of a commit's CPU
/// time).
fn huffman_lengths(f: &[u64]) -> Vec<u8> {
    let mut used: Vec<usize> = (0..f.len()).filter(|&s| f[s] > 0).collect();
    let mut lens = vec![0u8; f.len()];
    match used[..] {
        [] => return lens,
        [only] => {
            lens[only] = 1;
            return lens;
        }
        _ => {}
    }
    used.sort_by_key(|&s| (f[s], s));
    let leaves = used.len();
    // Nodes: leaves 0..leaves (in count order), then internal nodes.
    let mut weight: Vec<u64> = used.iter().map(|&s| f[s]).collect();
    let mut parent: Vec<usize> = vec![usize::MAX; leaves];
    let (mut leaf, mut inner) = (0usize, leaves);
    // The lighter front of the two queues, taken off its queue.
    let lightest = |weight: &[u64], leaf: &mut usize, inner: &mut usize| {
        let take_leaf =
            *leaf < leaves && (*inner >= weight.len() || weight[*leaf] <= weight[*inner]);
        let front = if take_leaf { leaf } else { inner };
        *front += 1;
        *front - 1
    };
    for _ in 0..leaves - 1 {
        let a = lightest(&weight, &mut leaf, &mut inner);
        let b = lightest(&weight, &mut leaf, &mut inner);
        let node = weight.len();
        weight.push(weight[a] + weight[b]);
        parent.push(usize::MAX);
        parent[a] = node;
        parent[b] = node;
    }
    // Parents come after their children, so one walk down from the root
    // (the last node) gives every depth.
    let mut depth = vec![0u32; parent.len()];
    for node in (0..parent.len()).rev() {
        if parent[node] != usize::MAX {
            depth[node] = depth[parent[node]] + 1;
        }
    }
    for (i, &s) in used.iter().enumerate() {
        lens[s] = depth[i].min(255) as u8;
    }
    lens
}

/// Canonical codes (bit-reversed, for least-significant-first reading) of
/// valid code lengths.
fn canonical_codes(lens: &[u8]) -> Vec<(u16, u8)> {
    let mut order: Vec<usize> = (0..lens.len()).filter(|&s| lens[s] > 0).collect();
    order.sort_by_key(|&s| (lens[s], s));
    let mut codes = vec![(0u16, 0u8); lens.len()];
    let mut code = 0u32;
    let mut prev = 0u8;
    for s in order {
        let l = lens[s];
        code <<= l - prev;
        prev = l;
        codes[s] = (reverse(code, l), l);
        code += 1;
    }
    codes
}

/// The low `len` bits of `code`, reversed.
fn reverse(code: u32, len: u8) -> u16 {
    (code.reverse_bits() >> (32 - u32::from(len))) as u16
}

/// Least-significant-first bit writer appending to a byte vector.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    n: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter { out, acc: 0, n: 0 }
    }

    /// Append `len <= 32` bits (fewer than 32 stay pending between calls).
    #[inline(always)]
    fn put(&mut self, bits: u64, len: u32) {
        self.acc |= bits << self.n;
        self.n += len;
        if self.n >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.n -= 32;
        }
    }

    fn finish(self) {
        let bytes = self.n.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
    }
}

/// Decoding table indexed by the next 12 bits of a stream. Entry bits
/// 0-15: the difference of a plain change (0 otherwise); bits 16-19: code
/// length; bits 20-27: how far the stream's next element moves (gap + 1 for
/// a change, [`GAP`] for a skip); bits 28-29: the kind of a special entry
/// ([`KIND_ESCAPE`], [`KIND_SKIP`], [`KIND_NONE`]); bit 31: special. A plain
/// change, nearly every symbol, takes one lookup and no shift for its
/// difference: the decoder is bound by instructions per change, not by
/// latency (four streams in flight).
type Table = [u32; 1 << MAX_LEN];
/// Set on entries that are not a plain change.
const SPECIAL: u32 = 1 << 31;
/// A change whose difference follows in raw bits ([`Escapes`]).
const KIND_ESCAPE: u32 = 1;
/// 64 unchanged elements.
const KIND_SKIP: u32 = 2;
/// No code starts with these bits.
const KIND_NONE: u32 = 3;

/// Build the decoding table of code lengths, refusing an over-subscribed
/// set (an incomplete one is fine: its unused entries decode as errors).
fn decode_table(lens: &[u8]) -> Result<Box<Table>, String> {
    let kraft: u64 = lens
        .iter()
        .filter(|&&l| l > 0)
        .map(|&l| 1u64 << (MAX_LEN - u32::from(l)))
        .sum();
    if kraft > 1 << MAX_LEN {
        return Err("over-subscribed code lengths".into());
    }
    let mut t: Box<Table> = Box::new([SPECIAL | KIND_NONE << 28; 1 << MAX_LEN]);
    for (s, (code, len)) in canonical_codes(lens).into_iter().enumerate() {
        if len == 0 {
            continue;
        }
        let s = s as u16;
        let len = u32::from(len);
        let entry = if s < SMALL {
            let value = u32::from(VALUES[usize::from(s) / GAP]);
            value | len << 16 | (u32::from(s) % GAP as u32 + 1) << 20
        } else if s < ESCAPE_END {
            len << 16 | (u32::from(s - SMALL) + 1) << 20 | SPECIAL | KIND_ESCAPE << 28
        } else {
            len << 16 | (GAP as u32) << 20 | SPECIAL | KIND_SKIP << 28
        };
        let mut i = usize::from(code);
        while i < t.len() {
            t[i] = entry;
            i += 1 << len;
        }
    }
    Ok(t)
}

/// Where one stream is: its next bit (counted from the start of the first
/// stream, since all streams are read from one slice) and its next element.
/// Two words, so four streams and the shared state fit in registers.
#[derive(Clone, Copy)]
struct Pos {
    bit: usize,
    at: usize,
}

/// The 57 or more bits of `data` from bit `bit` on (zeros past the end).
#[inline(always)]
fn peek(data: &[u8], bit: usize) -> u64 {
    let p = bit >> 3;
    let w = match data.get(p..p + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => peek_tail(data, p),
    };
    w >> (bit & 7)
}

/// [`peek`] within the last 8 bytes: out of line, so the hot loop keeps
/// its registers.
#[cold]
#[inline(never)]
fn peek_tail(data: &[u8], p: usize) -> u64 {
    let tail = data.get(p..).unwrap_or(&[]);
    let mut le = [0u8; 8];
    le[..tail.len()].copy_from_slice(tail);
    u64::from_le_bytes(le)
}

/// Decode one change at `s` from `data` (all streams' bytes) and apply it
/// to `out` (16-bit elements). A stream's codes may run into the next
/// stream's bytes only if the body is damaged: [`apply`] checks at the end
/// that each stream ended exactly at its last byte and inside its element
/// range. Memory safety does not rest on those checks (every access is
/// bounds-checked); skips stop at the end of the piece, so every loop ends.
#[inline(always)]
fn step<const GOLOMB: bool>(
    s: &mut Pos,
    data: &[u8],
    t: &Table,
    out: &mut [[u8; 2]],
) -> Result<(), String> {
    loop {
        let w = peek(data, s.bit);
        let e = t[(w & ((1 << MAX_LEN) - 1)) as usize];
        let len = ((e >> 16) & 15) as usize;
        s.bit += len;
        s.at += ((e >> 20) & 0xFF) as usize;
        let d = if e & SPECIAL == 0 {
            e as u16
        } else {
            match (e >> 28) & 3 {
                KIND_ESCAPE => {
                    let esc = if GOLOMB {
                        Escapes::Golomb
                    } else {
                        Escapes::Raw16
                    };
                    let (d, bits) = escape_value(w >> len, esc)?;
                    s.bit += bits;
                    d
                }
                KIND_SKIP => {
                    if s.at >= out.len() {
                        return Err("a skip past the piece".into());
                    }
                    continue;
                }
                _ => return Err("a code that no symbol has".into()),
            }
        };
        // `at` is the element after the change (at least 1 here).
        let e = out
            .get_mut(s.at.wrapping_sub(1))
            .ok_or("a change past the piece")?;
        *e = u16::from_le_bytes(*e).wrapping_add(d).to_le_bytes();
        return Ok(());
    }
}

/// The difference of the change whose table entry is `e`, the code at the
/// low bits of `w`, and the bits it takes with its escape, when it is a
/// plain change or an escape [`SHORT_ESCAPES`] holds; `None` for anything
/// else (a skip, a long or raw escape, an unused code), which [`step`]
/// decodes or refuses.
#[inline(always)]
fn quick<const GOLOMB: bool>(e: u32, w: u64) -> Option<(u16, u32)> {
    let len = (e >> 16) & 15;
    if e & SPECIAL == 0 {
        return Some((e as u16, len));
    }
    if GOLOMB && (e >> 28) & 3 == KIND_ESCAPE {
        let short = SHORT_ESCAPES[((w >> len) & ((1 << SHORT_ESCAPE_BITS) - 1)) as usize];
        if short != 0 {
            return Some((short as u16, len + (short >> 16)));
        }
    }
    None
}

/// Decode and apply exactly two changes at `s`: both from one peek when
/// both are plain changes or short escapes (the common case), else one by
/// one. Why: the loop is bound by instructions, not by the lookups'
/// latency, and a peek (a load, a shift and a bounds check) is a third of
/// a step's; two codes with their short escapes take at most 46 bits, and a
/// peek gives 57. Decoding nine links of the main series took 8–16 % less
/// time per change than a peek per change (`bench_joint`, four alternating
/// runs). With short escapes decoded here too, from [`SHORT_ESCAPES`],
/// nine links where most changes are escapes took 3.57–3.58 ns per change
/// instead of 5.40–5.41, and the main series 2.22–2.25 instead of
/// 2.37–2.38 (docs/benchmarks.md, "The joint decoder alone").
#[inline(always)]
fn step2<const GOLOMB: bool>(
    s: &mut Pos,
    data: &[u8],
    t: &Table,
    out: &mut [[u8; 2]],
) -> Result<(), String> {
    let w = peek(data, s.bit);
    let e1 = t[(w & ((1 << MAX_LEN) - 1)) as usize];
    let Some((d1, n1)) = quick::<GOLOMB>(e1, w) else {
        step::<GOLOMB>(s, data, t, out)?;
        return step::<GOLOMB>(s, data, t, out);
    };
    let a1 = s.at + ((e1 >> 20) & 0xFF) as usize;
    let x = out.get_mut(a1 - 1).ok_or("a change past the piece")?;
    *x = u16::from_le_bytes(*x).wrapping_add(d1).to_le_bytes();
    s.at = a1;
    s.bit += n1 as usize;
    let w = w >> n1;
    let e2 = t[(w & ((1 << MAX_LEN) - 1)) as usize];
    let Some((d2, n2)) = quick::<GOLOMB>(e2, w) else {
        return step::<GOLOMB>(s, data, t, out);
    };
    let a2 = a1 + ((e2 >> 20) & 0xFF) as usize;
    let x = out.get_mut(a2 - 1).ok_or("a change past the piece")?;
    *x = u16::from_le_bytes(*x).wrapping_add(d2).to_le_bytes();
    s.at = a2;
    s.bit += n2 as usize;
    Ok(())
}

/// One stream being decoded: position, changes left.
type Stream = (Pos, u32);

/// Apply a joint body of `count` changes to `out` (`n` 16-bit elements),
/// its escapes in the form `esc`, checking everything a damaged body could
/// get wrong: code lengths, stream table and lengths, every change inside
/// its stream's range, the counts.
pub fn apply(body: &[u8], out: &mut [u8], count: usize, esc: Escapes) -> Result<(), String> {
    let n = out.len() / 2;
    let lens_len = SYMBOLS.div_ceil(2);
    let packed = body
        .get(..lens_len)
        .ok_or("joint body shorter than its code lengths")?;
    let mut lens = Vec::with_capacity(SYMBOLS + 1);
    for b in packed {
        lens.push(b & 15);
        lens.push(b >> 4);
    }
    if lens[SYMBOLS] != 0 {
        return Err("code length for a symbol that does not exist".into());
    }
    lens.truncate(SYMBOLS);
    if lens.iter().any(|&l| u32::from(l) > MAX_LEN) {
        return Err("code longer than 12 bits".into());
    }
    let t = decode_table(&lens)?;
    let s = usize::from(*body.get(lens_len).ok_or("joint body truncated")?);
    if !(1..=MAX_STREAMS).contains(&s) {
        return Err(format!("{s} streams"));
    }
    let first = lens_len + 1 + 8 * s;
    let table = body
        .get(lens_len + 1..first)
        .ok_or("joint stream table truncated")?;
    let data = &body[first..];
    // Per stream: its position, changes left, and where it must end (bit
    // after its last byte, element after its range).
    let mut streams: Vec<Stream> = Vec::with_capacity(s);
    let mut ends: Vec<(usize, usize)> = Vec::with_capacity(s);
    let (mut total, mut at) = (0u64, 0usize);
    for (k, (start, end)) in stream_ranges(n, s).into_iter().enumerate() {
        let e = &table[8 * k..8 * k + 8];
        let left = u32::from_le_bytes(e[0..4].try_into().expect("4 bytes"));
        let bytes = u32::from_le_bytes(e[4..8].try_into().expect("4 bytes")) as usize;
        if left as usize > end - start {
            return Err("a stream with more changes than elements".into());
        }
        total += u64::from(left);
        let pos = Pos {
            bit: 8 * at,
            at: start,
        };
        at += bytes;
        if at > data.len() {
            return Err("joint stream truncated".into());
        }
        streams.push((pos, left));
        ends.push((8 * at, end));
    }
    if at != data.len() {
        return Err("joint body longer than its streams".into());
    }
    if total != count as u64 {
        return Err(format!(
            "the streams hold {total} changes, the header {count}"
        ));
    }
    // Whole elements only (an odd trailing byte is never a change).
    let out = out.as_chunks_mut::<2>().0;
    match esc {
        Escapes::Raw16 => run::<false>(&mut streams, data, &t, out)?,
        Escapes::Golomb => run::<true>(&mut streams, data, &t, out)?,
    }
    for ((pos, _), &(end_bit, end)) in streams.iter().zip(&ends) {
        if pos.at > end {
            return Err("a change past its stream's elements".into());
        }
        // Each stream is padded to whole bytes: its codes must end in its
        // last byte (not short of it, not in the next stream's bytes).
        if pos.bit.div_ceil(8) * 8 != end_bit {
            return Err("a joint stream's length does not match its codes".into());
        }
    }
    Ok(())
}

/// Decode every stream: all four side by side while each has changes left
/// (the processor overlaps their lookups; positions kept in locals, i.e.
/// registers), two changes per stream and step, then the rest one by one.
fn run<const GOLOMB: bool>(
    streams: &mut [Stream],
    data: &[u8],
    t: &Table,
    out: &mut [[u8; 2]],
) -> Result<(), String> {
    loop {
        let live = streams.iter().filter(|c| c.1 > 0).count();
        let Some(rounds) = streams.iter().map(|c| c.1).filter(|&l| l > 0).min() else {
            return Ok(());
        };
        if let (4, [a, b, c, d]) = (live, &mut *streams) {
            let (mut pa, mut pb, mut pc, mut pd) = (a.0, b.0, c.0, d.0);
            for _ in 0..rounds / 2 {
                step2::<GOLOMB>(&mut pa, data, t, out)?;
                step2::<GOLOMB>(&mut pb, data, t, out)?;
                step2::<GOLOMB>(&mut pc, data, t, out)?;
                step2::<GOLOMB>(&mut pd, data, t, out)?;
            }
            for _ in 0..rounds % 2 {
                step::<GOLOMB>(&mut pa, data, t, out)?;
                step::<GOLOMB>(&mut pb, data, t, out)?;
                step::<GOLOMB>(&mut pc, data, t, out)?;
                step::<GOLOMB>(&mut pd, data, t, out)?;
            }
            (a.0, b.0, c.0, d.0) = (pa, pb, pc, pd);
            for x in [a, b, c, d] {
                x.1 -= rounds;
            }
        } else {
            for x in streams.iter_mut().filter(|x| x.1 > 0) {
                let mut p = x.0;
                for _ in 0..rounds {
                    step::<GOLOMB>(&mut p, data, t, out)?;
                }
                x.0 = p;
                x.1 -= rounds;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The cost of an optimal prefix code for `f` (the sum of the weights
    /// of a Huffman tree's internal nodes), by the textbook heap method.
    fn optimal_cost(f: &[u64]) -> u64 {
        use std::cmp::Reverse;
        let mut heap: std::collections::BinaryHeap<Reverse<u64>> =
            f.iter().filter(|&&x| x > 0).map(|&x| Reverse(x)).collect();
        let mut cost = 0;
        while heap.len() > 1 {
            let (Reverse(a), Reverse(b)) = (heap.pop().unwrap(), heap.pop().unwrap());
            cost += a + b;
            heap.push(Reverse(a + b));
        }
        cost
    }

    /// Every entry of the short escapes' table is what the general
    /// decoder makes of the same bits: the difference and length of a
    /// class 0 to 3 code, and 0 exactly where a longer class begins.
    #[test]
    fn short_escapes_agree_with_the_general_decoder() {
        let mut held = 0;
        for (i, &entry) in SHORT_ESCAPES.iter().enumerate() {
            let w = i as u64;
            match escape_value(w, Escapes::Golomb) {
                Ok((d, bits)) if bits <= SHORT_ESCAPE_BITS as usize => {
                    assert_eq!(entry, u32::from(d) | (bits as u32) << 16, "bits {i:#b}");
                    held += 1;
                }
                // A longer class, or more one bits than the index holds.
                _ => assert_eq!(entry, 0, "bits {i:#b}"),
            }
        }
        // Only the indices that begin with four or more one bits (one in
        // sixteen) start a longer class.
        assert_eq!(held, (1 << SHORT_ESCAPE_BITS) * 15 / 16);
    }

    proptest! {
        /// The two-queue lengths are a complete prefix code (Kraft sum
        /// exactly 1) as cheap as the heap-built Huffman code, and only
        /// used symbols get a length.
        #[test]
        fn two_queue_huffman_is_optimal_and_complete(
            f in proptest::collection::vec(
                prop_oneof![3 => Just(0u64), 5 => 1u64..50, 2 => 1u64..1_000_000],
                0..300,
            ),
        ) {
            let lens = huffman_lengths(&f);
            let used = f.iter().filter(|&&x| x > 0).count();
            for (x, l) in f.iter().zip(&lens) {
                prop_assert_eq!(*x > 0, *l > 0);
            }
            if used >= 2 {
                let cost: u64 = f.iter().zip(&lens).map(|(x, &l)| x * u64::from(l)).sum();
                prop_assert_eq!(cost, optimal_cost(&f));
                let kraft: f64 = lens.iter().filter(|&&l| l > 0).map(|&l| 0.5f64.powi(i32::from(l))).sum();
                prop_assert!((kraft - 1.0).abs() < 1e-9, "Kraft sum {}", kraft);
            }
        }
    }
}
