//! `bat diff` from delta statistics equals the full decode: random series
//! of safetensors files (BF16, F16, F32, F64, I16 and U8 tensors, changes
//! including NaN and infinities, tensors added, removed and resized) are
//! committed to a real ledger, and every pair compared both ways must give
//! identical per-tensor numbers. Consecutive rounds must be read from the
//! deltas; a pair that is not (commit, delta parent) falls back to decoding.
//! The writer stores each delta's statistics in its dtype's reading only
//! (bf16, half, single, double, or the count for integers), so the series
//! cover every reading; a piece whose record holds another dtype's reading
//! (the same bytes first committed as another tensor) is decoded.
#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat::inspect::diff::{diff_commits, DiffOptions, Section};
use bat_ledger::{CommitId, CommitRequest, Ledger, NoProgress};
use proptest::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::Value;

/// splitmix64: the series' random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone)]
struct T {
    name: String,
    dtype: Dtype,
    data: Vec<u8>,
}

fn width(d: Dtype) -> usize {
    d.bitsize() / 8
}

/// A fresh value's bytes for `d`: mostly ordinary numbers, sometimes NaN
/// or an infinity.
fn value(d: Dtype, rng: &mut Rng) -> Vec<u8> {
    let special = rng.below(16);
    let x: f64 = match special {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        _ => (rng.below(2_000_001) as f64 - 1_000_000.0) / 1000.0,
    };
    match d {
        Dtype::F64 => x.to_le_bytes().to_vec(),
        Dtype::F32 => (x as f32).to_le_bytes().to_vec(),
        Dtype::BF16 => (((x as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        Dtype::F16 => {
            // Any bit pattern is an f16 (incl. NaN payloads, subnormals).
            (rng.next() as u16).to_le_bytes().to_vec()
        }
        _ => {
            let w = width(d);
            rng.next().to_le_bytes()[..w].to_vec()
        }
    }
}

/// Change about `per_mille`/1000 of `t`'s elements: a step of one code
/// point (the common fine-tuning change) or a fresh value.
fn perturb(t: &mut T, rng: &mut Rng, per_mille: u64) {
    let w = width(t.dtype);
    for e in t.data.chunks_mut(w) {
        if rng.below(1000) >= per_mille {
            continue;
        }
        if rng.below(4) == 0 {
            e.copy_from_slice(&value(t.dtype, rng));
        } else {
            // Add one to the low byte with carry.
            for b in e.iter_mut() {
                let (v, carry) = b.overflowing_add(1);
                *b = v;
                if !carry {
                    break;
                }
            }
        }
    }
}

fn tensor(name: &str, dtype: Dtype, n: usize, rng: &mut Rng) -> T {
    let data = (0..n).flat_map(|_| value(dtype, rng)).collect();
    T {
        name: name.into(),
        dtype,
        data,
    }
}

fn write(path: &Path, ts: &[T]) {
    let views: Vec<(String, TensorView<'_>)> = ts
        .iter()
        .map(|t| {
            let shape = vec![t.data.len() / width(t.dtype)];
            let v = TensorView::new(t.dtype, shape, &t.data).expect("view");
            (t.name.clone(), v)
        })
        .collect();
    let bytes = safetensors::serialize(views, None).expect("serialize");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

fn ledger(root: &Path) -> Ledger {
    let mut l = Ledger::init(root).expect("init");
    l.config.chunk_threshold = 1024;
    l
}

fn commit(l: &mut Ledger, dir: &Path, msg: &str) -> CommitId {
    l.commit_dir(
        dir,
        &CommitRequest::new(msg),
        &NoProgress,
        &AtomicBool::new(false),
    )
    .expect("commit")
    .commit
}

/// The `files` section's changed safetensors entries of a diff: (path,
/// tensors, tensors_from).
fn tensors(l: &Ledger, a: CommitId, b: CommitId, decode: bool) -> Vec<(Value, Value, Value)> {
    let opts = DiffOptions {
        sections: vec![Section::Files],
        decode,
        ..DiffOptions::default()
    };
    let d = diff_commits(l, a, b, &opts, &bat::Ctx::quiet()).expect("diff");
    d["files"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f.get("tensors").is_some())
        .map(|f| {
            (
                f["path"].clone(),
                f["tensors"].clone(),
                f["tensors_from"].clone(),
            )
        })
        .collect()
}

/// Compare `a` and `b` both ways; returns where the fast way's numbers came
/// from, per file.
fn same_both_ways(l: &Ledger, a: CommitId, b: CommitId) -> Vec<String> {
    let fast = tensors(l, a, b, false);
    let slow = tensors(l, a, b, true);
    assert_eq!(fast.len(), slow.len());
    for ((pf, tf, _), (ps, ts, from)) in fast.iter().zip(&slow) {
        assert_eq!(pf, ps);
        assert_eq!(from, "decode");
        assert_eq!(tf, ts, "tensors of {pf} differ between the two paths");
    }
    fast.iter()
        .map(|(_, _, f)| f.as_str().expect("tensors_from").to_string())
        .collect()
}

/// One random series of `rounds` rounds from `seed`; every consecutive
/// pair and (first, last) compared both ways.
fn series(seed: u64, rounds: usize, big: bool) {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut l = ledger(&tmp.path().join("ledger"));
    let work = tmp.path().join("work");
    let file = work.join("ckpt/model.safetensors");
    let mut rng = Rng(seed);
    let dtypes = [
        Dtype::BF16,
        Dtype::F16,
        Dtype::F32,
        Dtype::F64,
        Dtype::I16,
        Dtype::U8,
    ];
    let mut ts: Vec<T> = dtypes
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let n = 1 + rng.below(3000) as usize;
            tensor(&format!("t{i}.{d:?}"), d, n, &mut rng)
        })
        .collect();
    // Always changed a little, so every round has a sparse delta.
    let anchor = tensor("anchor", Dtype::BF16, 4096, &mut rng);
    if big {
        // Three pieces of f32 and two and a half of bf16: the norms are
        // folded across piece boundaries.
        ts.push(tensor("big.f32", Dtype::F32, 2_500_000, &mut rng));
        ts.push(tensor("big.bf16", Dtype::BF16, 5_000_000, &mut rng));
    }
    let mut anchor = anchor;
    let mut commits = Vec::new();
    for r in 0..rounds {
        let mut all = ts.clone();
        all.push(anchor.clone());
        write(&file, &all);
        perturb(&mut anchor, &mut rng, 10);
        commits.push(commit(&mut l, &work, &format!("round {r}")));
        for t in ts.iter_mut() {
            let per_mille = [0, 1, 130, 600][rng.below(4) as usize];
            perturb(t, &mut rng, per_mille);
        }
        match rng.below(6) {
            // A tensor resized (shape change: not compared).
            0 => {
                let k = rng.below(ts.len() as u64) as usize;
                let w = width(ts[k].dtype);
                let extra = value(ts[k].dtype, &mut rng);
                ts[k].data.extend_from_slice(&extra[..w]);
            }
            // A tensor removed and another added.
            1 => {
                let k = rng.below(ts.len() as u64) as usize;
                ts.remove(k);
                ts.push(tensor(&format!("new{r}"), Dtype::F32, 17, &mut rng));
            }
            _ => {}
        }
    }
    for pair in commits.windows(2) {
        // A piece the writer stored whole (a delta did not pay) is decoded
        // alone: "mixed".
        let from = same_both_ways(&l, pair[0], pair[1]);
        assert!(
            from.iter().all(|f| f == "deltas" || f == "mixed"),
            "consecutive rounds are read from the deltas, got {from:?}"
        );
    }
    if commits.len() > 2 {
        let (a, z) = (commits[0], commits[commits.len() - 1]);
        same_both_ways(&l, a, z);
        // Reversed: the deltas' numbers are symmetric.
        same_both_ways(&l, commits[1], commits[0]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Small tensors of every dtype, one piece each.
    #[test]
    fn from_deltas_equals_full_decode(seed in any::<u64>(), rounds in 2usize..5) {
        series(seed, rounds, false);
    }
}

/// Tensors of several pieces (4 MiB each).
#[test]
fn from_deltas_equals_full_decode_across_pieces() {
    series(0xd1ff, 3, true);
}

/// The same bytes committed first as an I16 tensor (its deltas hold the
/// changed count only), then as a BF16 one: the BF16 diff finds records
/// without its reading and decodes them, with the same numbers.
#[test]
fn a_record_without_the_dtypes_reading_is_decoded() {
    let tmp = tempfile::tempdir().expect("tmp");
    let mut l = ledger(&tmp.path().join("ledger"));
    let work = tmp.path().join("work");
    let file = work.join("ckpt/model.safetensors");
    let mut rng = Rng(0x5eed);
    let mut old = tensor("x", Dtype::I16, 50_000, &mut rng);
    // Finite bf16 values throughout, so the numbers are not all NaN.
    for e in old.data.chunks_mut(2) {
        e[1] &= 0x3f;
    }
    let mut new = old.clone();
    perturb(&mut new, &mut rng, 130);
    let mut commits = Vec::new();
    for (name, dtype) in [("x", Dtype::I16), ("y", Dtype::BF16)] {
        for t in [&old, &new] {
            let t = T {
                name: name.into(),
                dtype,
                data: t.data.clone(),
            };
            write(&file, &[t]);
            commits.push(commit(&mut l, &work, name));
        }
    }
    assert_eq!(same_both_ways(&l, commits[0], commits[1]), ["deltas"]);
    assert_eq!(same_both_ways(&l, commits[2], commits[3]), ["decode"]);
    let bf16 = tensors(&l, commits[2], commits[3], false);
    assert!(
        bf16[0].1[0]["max_abs_delta"]
            .as_f64()
            .is_some_and(|m| m > 0.0),
        "numbers of a bf16 tensor: {:?}",
        bf16[0].1
    );
}
