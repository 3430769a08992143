//! What context modelling of sparse links would save, and what its decoder
//! would cost (docs/benchmarks.md): the size target of the delta issue needs
//! links coded below their order-0 entropy, and this harness measures both
//! sides of that trade on a real series before any format is built.
//!
//! ```text
//! cargo run --release --example bench_context -- SERIES_DIR [BASE TARGET [KEYFRAME]]
//! ```
//!
//! SERIES_DIR holds `rNN/model.safetensors` rounds (as
//! `bench/make_series.py` writes them); BASE and TARGET default to `r04`
//! and `r05`, KEYFRAME (the chain's stored-whole version) to `r00`. Over the
//! bf16 elements of both files it prints, in bits per element, the
//! entropy of the link BASE → TARGET coded at order 0 (as today's joint
//! coder approaches it) and with the exponent of an element as context,
//! taken from the base (known only after the previous link is applied) or
//! from the keyframe (known once per chain): positions as one binary
//! decision per element within its class, differences within ±64 as one
//! symbol each (larger ones as one escape symbol; their payloads cost the
//! same either way and are left out); and the keyframe's order-0 entropy
//! of whole bf16 words, what a keyframe could shrink to without context.
//! Then, on the keyframe's 4 MiB
//! pieces, one thread: the cost of building a per-chain class map (the
//! elements of each class in order, a counting sort) and of applying
//! changes whose positions go through that map, against positions applied
//! directly.
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Every bf16 element of the safetensors file at `path`, in file order.
fn bf16_elements(path: &std::path::Path) -> Res<Vec<u16>> {
    let b = std::fs::read(path)?;
    let layout = bat_ledger::delta::parse_layout(&b, b.len() as u64)
        .ok_or_else(|| format!("{} is not a safetensors file", path.display()))?;
    let mut out = Vec::new();
    for t in layout.tensors.iter().filter(|t| t.dtype == "BF16") {
        let data = b
            .get(t.start as usize..t.end as usize)
            .ok_or("tensor past the end of the file")?;
        out.extend(
            data.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]])),
        );
    }
    Ok(out)
}

fn exponent(x: u16) -> u32 {
    u32::from((x >> 7) & 0xff)
}

/// Binary entropy of probability `p`, bits.
fn binary_entropy(p: f64) -> f64 {
    if p <= 0.0 || p >= 1.0 {
        return 0.0;
    }
    -(p * p.log2() + (1.0 - p) * (1.0 - p).log2())
}

/// Bits to code a histogram's items at its order-0 entropy, in all.
fn total_bits(hist: &[u64]) -> f64 {
    let n: u64 = hist.iter().sum();
    hist.iter()
        .filter(|&&c| c > 0)
        .map(|&c| -(c as f64) * (c as f64 / n as f64).log2())
        .sum()
}

/// Difference symbol of a change: within ±64 its own, else one escape.
fn diff_symbol(base: u16, target: u16) -> usize {
    let d = target.wrapping_sub(base) as i16 as i32;
    if (-64..=64).contains(&d) {
        (d + 64) as usize
    } else {
        129
    }
}

/// Bits per element of the link with `class` as context: (positions,
/// differences), both per element of the file.
fn link_bits(
    base: &[u16],
    target: &[u16],
    classes: usize,
    class: impl Fn(usize) -> usize,
) -> (f64, f64) {
    let mut elems = vec![0u64; classes];
    let mut changed = vec![0u64; classes];
    let mut diffs = vec![vec![0u64; 130]; classes];
    for (i, (&b, &t)) in base.iter().zip(target).enumerate() {
        let c = class(i);
        elems[c] += 1;
        if b != t {
            changed[c] += 1;
            diffs[c][diff_symbol(b, t)] += 1;
        }
    }
    let n = base.len() as f64;
    let pos: f64 = (0..classes)
        .filter(|&c| elems[c] > 0)
        .map(|c| elems[c] as f64 * binary_entropy(changed[c] as f64 / elems[c] as f64))
        .sum();
    let dif: f64 = diffs.iter().map(|h| total_bits(h)).sum();
    (pos / n, dif / n)
}

/// Classes by exponent: `cuts` are the first exponents of classes 1, 2, ...
fn class_of(cuts: &[u32], x: u16) -> usize {
    let e = exponent(x);
    cuts.iter().filter(|&&c| e >= c).count()
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(series) = args.get(1).map(std::path::PathBuf::from) else {
        eprintln!("usage: bench_context SERIES_DIR [BASE TARGET [KEYFRAME]]");
        std::process::exit(2);
    };
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let (base_r, target_r, key_r) = (arg(2, "r04"), arg(3, "r05"), arg(4, "r00"));
    let file = |r: &str| series.join(r).join("model.safetensors");
    let base = bf16_elements(&file(&base_r))?;
    let target = bf16_elements(&file(&target_r))?;
    let key = bf16_elements(&file(&key_r))?;
    if base.len() != target.len() || base.len() != key.len() {
        return Err("the three rounds do not have the same bf16 elements".into());
    }
    let changed = base.iter().zip(&target).filter(|(a, b)| a != b).count();
    println!(
        "link {base_r} → {target_r}: {} bf16 elements, {:.2} % changed; context from the base or from keyframe {key_r}",
        base.len(),
        100.0 * changed as f64 / base.len() as f64
    );
    println!("| context | classes | positions bits/element | differences bits/element | link bits/element |");
    println!("|---|---|---|---|---|");
    let (p, d) = link_bits(&base, &target, 1, |_| 0);
    println!("| none (order 0) | 1 | {p:.3} | {d:.3} | {:.3} |", p + d);
    // (name, number of classes, class of an element of the context file)
    type ClassOf = Box<dyn Fn(u16) -> usize>;
    let contexts: [(&str, usize, ClassOf); 3] = [
        ("2", 2, Box::new(|x| class_of(&[119], x))),
        ("3", 3, Box::new(|x| class_of(&[117, 120], x))),
        ("every exponent", 256, Box::new(|x| exponent(x) as usize)),
    ];
    for (from, src) in [("base", &base), ("keyframe", &key)] {
        for (name, classes, of) in &contexts {
            let (p, d) = link_bits(&base, &target, *classes, |i| of(src[i]));
            println!(
                "| {from} exponent | {name} | {p:.3} | {d:.3} | {:.3} |",
                p + d
            );
        }
    }
    let mut words = vec![0u64; 1 << 16];
    for &x in &key {
        words[usize::from(x)] += 1;
    }
    println!(
        "\nkeyframe {key_r}: order-0 entropy of its bf16 words {:.2} bits per element",
        total_bits(&words) / key.len() as f64
    );
    decoder_costs(&key);
    Ok(())
}

/// One thread, the keyframe's 4 MiB pieces: ns per element to build a
/// three-class map, and ns per change to apply changes at 1 in 7.5 of the
/// map's entries through it against the same changes at direct positions.
fn decoder_costs(key: &[u16]) {
    const PIECE: usize = 2 << 20;
    const CUTS: [u32; 2] = [117, 120];
    let pieces: Vec<&[u16]> = key.chunks_exact(PIECE).collect();
    let mut map = vec![0u32; PIECE];
    let mut build = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for p in &pieces {
            let mut counts = [0usize; 3];
            for &x in p.iter() {
                counts[class_of(&CUTS, x)] += 1;
            }
            let mut next = [0, counts[0], counts[0] + counts[1]];
            for (i, &x) in p.iter().enumerate() {
                let c = class_of(&CUTS, x);
                map[next[c]] = i as u32;
                next[c] += 1;
            }
            std::hint::black_box(&map);
        }
        build = build.min(t.elapsed().as_secs_f64());
    }
    let elements = (pieces.len() * PIECE) as f64;
    // Ranks with gaps of 1..=14 (mean 7.5, about 13 % of entries), from a
    // fixed linear congruential sequence.
    let mut ranks = Vec::new();
    let (mut r, mut state) = (0usize, 12345u64);
    while r < PIECE {
        ranks.push(r);
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        r += 1 + ((state >> 33) % 14) as usize;
    }
    let mut buf = pieces.first().map(|p| p.to_vec()).unwrap_or_default();
    let time = |buf: &mut Vec<u16>, through_map: bool| {
        let mut best = f64::MAX;
        for _ in 0..11 {
            let t = Instant::now();
            for &rk in &ranks {
                let p = if through_map { map[rk] as usize } else { rk };
                buf[p] ^= 1;
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        std::hint::black_box(&buf);
        best / ranks.len() as f64 * 1e9
    };
    let mapped = time(&mut buf, true);
    let direct = time(&mut buf, false);
    println!(
        "\nper-chain class map, 3 classes: {:.2} ns per element to build ({} pieces, best of 5); applying a change through it {mapped:.2} ns, at its direct position {direct:.2} ns (best of 11)",
        build / elements * 1e9,
        pieces.len()
    );
}
