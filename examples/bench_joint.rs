//! The joint decoder alone: applies nine real links of one tensor, one
//! thread, and prints nanoseconds per change (`delta::joint::apply`).
//!
//! ```text
//! cargo run --release --example bench_joint -- SERIES_DIR|--new-mantissas [TENSOR] [PIECE_KIB]
//! ```
//!
//! SERIES_DIR holds `r00/model.safetensors` .. `r09/model.safetensors` (as
//! `bench/make_series.py` writes them); TENSOR defaults to `lm_head.weight`
//! and PIECE_KIB to 4096 (`delta::MAX_PIECE`). With `--new-mantissas` in
//! place of SERIES_DIR the ten rounds of one 32000 × 1024 bf16 tensor are
//! made in memory instead, each round giving about 3 elements in 8 a new
//! random mantissa, as `bench_remote_speed`'s series does: most changes
//! are then escapes (a difference of more than 8 code points).
//!
//! Each round's tensor is cut into pieces, each piece's nine links are
//! encoded as the commit path does (Golomb escapes), and every repetition
//! restores r09's pieces from r00's by applying them in order, checking
//! the result. Why a harness of its own: a restore's wall time mixes
//! reading, hashing and two threads, so a change to the decoder's inner
//! loop is compared here, run against run.
#[path = "support/series.rs"]
mod series;

use bat_ledger::delta::joint::{self, Escapes};
use series::Xorshift;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The bytes of tensor `name` in the safetensors file at `path`.
fn tensor(path: &str, name: &str) -> Res<Vec<u8>> {
    let b = std::fs::read(path)?;
    let n = u64::from_le_bytes(b.get(..8).ok_or("short file")?.try_into()?) as usize;
    let h: serde_json::Value = serde_json::from_slice(b.get(8..8 + n).ok_or("short header")?)?;
    let o = &h[name]["data_offsets"];
    let (s, e) = match (o[0].as_u64(), o[1].as_u64()) {
        (Some(s), Some(e)) => (s as usize, e as usize),
        _ => return Err(format!("no tensor {name} in {path}").into()),
    };
    Ok(b.get(8 + n + s..8 + n + e)
        .ok_or("tensor past the file")?
        .to_vec())
}

/// Changes from `a` to `b` (16-bit elements), as the encoder takes them.
fn changes(a: &[u8], b: &[u8]) -> Vec<joint::Change> {
    let mut out = vec![];
    for (i, (x, y)) in a.chunks_exact(2).zip(b.chunks_exact(2)).enumerate() {
        let (x, y) = (
            u16::from_le_bytes([x[0], x[1]]),
            u16::from_le_bytes([y[0], y[1]]),
        );
        if x != y {
            out.push((i as u32, y.wrapping_sub(x)));
        }
    }
    out
}

/// Ten rounds of `n` bf16 elements (little-endian bytes): round 0 of
/// magnitudes about 0.002 to 0.06, either sign; each later round gives
/// each element a new random 7-bit mantissa with probability 3/8.
fn new_mantissas(n: usize) -> Vec<Vec<u8>> {
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
    // Sign, an exponent of 2^-9 .. 2^-5, any mantissa.
    let mut codes: Vec<u16> = (0..n)
        .map(|_| {
            let r = rng.next();
            ((r & 1) << 15 | (0x76 + (r >> 1) % 5) << 7 | (r >> 8) & 0x7F) as u16
        })
        .collect();
    let mut rounds = Vec::with_capacity(10);
    for r in 0..10 {
        if r > 0 {
            for c in codes.iter_mut() {
                let v = rng.next();
                if v % 8 < 3 {
                    *c = (*c & 0xFF80) | ((v >> 8) & 0x7F) as u16;
                }
            }
        }
        rounds.push(codes.iter().flat_map(|c| c.to_le_bytes()).collect());
    }
    rounds
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(series) = args.get(1) else {
        eprintln!("usage: bench_joint SERIES_DIR|--new-mantissas [TENSOR] [PIECE_KIB]");
        std::process::exit(2);
    };
    let name = args.get(2).map_or("lm_head.weight", String::as_str);
    let piece: usize = args.get(3).map_or(Ok(4096), |s| s.parse())? << 10;
    let synthetic = series == "--new-mantissas";
    let name = if synthetic { "new mantissas" } else { name };
    let rounds = if synthetic {
        new_mantissas(32000 * 1024)
    } else {
        (0..10)
            .map(|r| tensor(&format!("{series}/r{r:02}/model.safetensors"), name))
            .collect::<Res<Vec<_>>>()?
    };
    let npieces = rounds[0].len() / piece;
    if npieces == 0 {
        return Err(format!("{name} is smaller than one piece").into());
    }
    let cut = |r: usize, p: usize| &rounds[r][p * piece..(p + 1) * piece];
    let mut links = vec![];
    let mut count = 0usize;
    for p in 0..npieces {
        for k in 1..10 {
            let ch = changes(cut(k - 1, p), cut(k, p));
            count += ch.len();
            links.push((joint::encode(&ch, piece / 2, Escapes::Golomb), ch.len()));
        }
    }
    let mut times = vec![];
    let mut buf = vec![0u8; piece];
    for _ in 0..11 {
        let t = Instant::now();
        for p in 0..npieces {
            buf.copy_from_slice(cut(0, p));
            for (body, n) in &links[9 * p..9 * p + 9] {
                joint::apply(body, &mut buf, *n, Escapes::Golomb)?;
            }
            assert!(buf == cut(9, p), "piece {p} of r09 restored wrong");
        }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let ns = |t: f64| t * 1e9 / count as f64;
    println!(
        "| tensor | piece KiB | pieces | changes (9 links) | ns per change, min | median | max |"
    );
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| {name} | {} | {npieces} | {count} | {:.2} | {:.2} | {:.2} |",
        piece >> 10,
        ns(times[0]),
        ns(times[5]),
        ns(times[10])
    );
    Ok(())
}
