//! The change statistics stored with every delta (FORMAT.md §12.3.3): each
//! payload form carries exactly what a naive element-by-element pass over
//! the two versions computes, readers refuse statistics out of range, and
//! a stored delta's statistics are read back from its record alone.

use std::sync::atomic::AtomicBool;

use bat_ledger::delta::{
    encode_planes, encode_planes_with, FloatKind, FloatStats, PlanesHeader, PlanesOptions,
    StatsReading, FLAG_STATS,
};
use bat_ledger::{CommitRequest, Ledger, Location, NoProgress, ObjectId};
use proptest::prelude::*;

/// The statistics by the definition under readings `kinds`: every
/// element, in order.
fn naive(new: &[u8], old: &[u8], w: usize, kinds: &[FloatKind]) -> (u64, Vec<FloatStats>) {
    let mut floats = vec![FloatStats::default(); kinds.len()];
    let mut changed = 0;
    for (r, b) in new.chunks_exact(w).zip(old.chunks_exact(w)) {
        if r == b {
            continue;
        }
        changed += 1;
        for (f, k) in floats.iter_mut().zip(kinds) {
            let (o, n) = (k.decode(b), k.decode(r));
            if o.is_finite() && n.is_finite() {
                f.max_abs = f.max_abs.max((n - o).abs());
                f.sumsq += (n - o) * (n - o);
            } else {
                f.nonfinite += 1;
            }
        }
    }
    (changed, floats)
}

/// A base and a version of it with about `per_mille`/1000 elements
/// rewritten (any bits: NaN and infinities included).
fn pair() -> impl Strategy<Value = (usize, Vec<u8>, Vec<u8>)> {
    prop_oneof![Just(1usize), Just(2), Just(4), Just(8)].prop_flat_map(|w| {
        (
            0usize..2000,
            prop_oneof![Just(5u32), Just(130), Just(400), Just(900)],
        )
            .prop_flat_map(move |(n, per_mille)| {
                (
                    proptest::collection::vec(any::<u8>(), n * w),
                    proptest::collection::vec((0u32..1000, any::<u64>()), n),
                )
                    .prop_map(move |(old, edits)| {
                        let mut new = old.clone();
                        for (i, (p, v)) in edits.into_iter().enumerate() {
                            if p < per_mille {
                                new[i * w..i * w + w].copy_from_slice(&v.to_le_bytes()[..w]);
                            }
                        }
                        (w, old, new)
                    })
            })
    })
}

/// Every reading an encoder may be asked for, whatever the width.
fn reading() -> impl Strategy<Value = StatsReading> {
    prop_oneof![
        Just(StatsReading::All),
        Just(StatsReading::Count),
        Just(StatsReading::One(FloatKind::Bf16)),
        Just(StatsReading::One(FloatKind::F16)),
        Just(StatsReading::One(FloatKind::F32)),
        Just(StatsReading::One(FloatKind::F64)),
    ]
}

/// The readings a section written for `reading` at width `w` holds.
fn expected_kinds(reading: StatsReading, w: usize) -> Vec<FloatKind> {
    match reading {
        StatsReading::All => FloatKind::for_width(w as u8).to_vec(),
        StatsReading::One(k) if usize::from(k.width()) == w => vec![k],
        _ => Vec::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn every_form_carries_the_statistics(
        (w, old, new) in pair(),
        joint: bool,
        high: bool,
        reading in reading(),
    ) {
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let bid = ObjectId([9; 32]);
        let opts = PlanesOptions { joint, high_exceptions: high, stats: reading };
        let p = encode_planes_with(&mut comp, &new, w, Some((&bid, &old)), opts).unwrap();
        let h = PlanesHeader::decode(&p).unwrap();
        let s = h.stats.expect("a delta carries statistics");
        // A single reading of another width is written as the count only.
        let kinds = expected_kinds(reading, w);
        prop_assert_eq!(s.reading, reading.for_width(w as u8));
        prop_assert_eq!(p[3], s.reading.code());
        let (_, table) = PlanesHeader::decode_prefix(&p).unwrap();
        let sparse = 4 * usize::from(h.sparse_count.is_some());
        prop_assert_eq!(table, 36 + sparse + 4 + 20 * kinds.len());
        let (changed, floats) = naive(&new, &old, w, &kinds);
        prop_assert_eq!(s.changed, changed);
        prop_assert_eq!(
            s.floats.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            kinds.clone()
        );
        for k in &kinds {
            prop_assert!(s.float(*k).is_some());
        }
        for ((_, got), want) in s.floats.iter().zip(&floats) {
            prop_assert_eq!(got.nonfinite, want.nonfinite);
            prop_assert_eq!(got.max_abs.to_bits(), want.max_abs.to_bits());
            prop_assert_eq!(got.sumsq.to_bits(), want.sumsq.to_bits());
        }
        // A plain payload has none.
        let plain = encode_planes(&mut comp, &new, w, None, joint).unwrap();
        prop_assert!(PlanesHeader::decode(&plain).unwrap().stats.is_none());
    }
}

/// A dense bf16 delta's payload, its statistics starting at byte 36.
fn dense_payload() -> Vec<u8> {
    let old: Vec<u8> = (0..64u16)
        .flat_map(|i| (0x3f80 + i).to_le_bytes())
        .collect();
    let new: Vec<u8> = old.iter().map(|b| b ^ 1).collect();
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    let p = encode_planes(&mut comp, &new, 2, Some((&ObjectId([1; 32]), &old)), false).unwrap();
    assert_eq!(p[2], 1 | FLAG_STATS, "a dense delta with statistics");
    assert_eq!(p[3], 0, "every reading of the width");
    p
}

/// Header byte 3 names the readings: with one reading the section is a
/// block shorter and the header still parses to the end; unknown codes, a
/// reading of another width and the byte without statistics are refused.
#[test]
fn the_reading_byte_is_checked() {
    let old: Vec<u8> = (0..64u16)
        .flat_map(|i| (0x3f80 + i).to_le_bytes())
        .collect();
    let new: Vec<u8> = old.iter().map(|b| b ^ 1).collect();
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    let bid = ObjectId([1; 32]);
    let enc = |comp: &mut zstd::bulk::Compressor<'static>, stats| {
        let opts = PlanesOptions {
            joint: false,
            high_exceptions: false,
            stats,
        };
        encode_planes_with(comp, &new, 2, Some((&bid, &old)), opts).unwrap()
    };
    let all = enc(&mut comp, StatsReading::All);
    let one = enc(&mut comp, StatsReading::One(FloatKind::F16));
    let count = enc(&mut comp, StatsReading::Count);
    assert_eq!((one[3], count[3]), (2, 5));
    assert_eq!(all.len() - one.len(), 20);
    assert_eq!(one.len() - count.len(), 20);
    let (ha, hb) = (
        PlanesHeader::decode(&all).unwrap(),
        PlanesHeader::decode(&one).unwrap(),
    );
    let (sa, sb) = (ha.stats.unwrap(), hb.stats.unwrap());
    assert_eq!(sa.float(FloatKind::F16), sb.float(FloatKind::F16));
    assert!(sb.float(FloatKind::Bf16).is_none());
    for (payload, byte) in [(&one, 6u8), (&one, 3), (&one, 4), (&one, 255)] {
        let mut bad = payload.clone();
        bad[3] = byte;
        assert!(
            PlanesHeader::decode_prefix(&bad).is_err(),
            "byte 3 = {byte}"
        );
    }
    let plain = encode_planes(&mut comp, &new, 2, None, false).unwrap();
    let mut bad = plain.clone();
    bad[3] = 1;
    assert!(PlanesHeader::decode(&bad).is_err());
}

#[test]
fn statistics_out_of_range_are_refused() {
    let p = dense_payload();
    assert_eq!(PlanesHeader::decode(&p).unwrap().stats.unwrap().changed, 64);
    // Non-finite count (first float block) above the changed count.
    let mut bad = p.clone();
    bad[40..44].copy_from_slice(&65u32.to_le_bytes());
    assert!(PlanesHeader::decode(&bad).is_err());
    // A NaN maximum, a negative sum.
    let mut bad = p.clone();
    bad[44..52].copy_from_slice(&f64::NAN.to_le_bytes());
    assert!(PlanesHeader::decode(&bad).is_err());
    let mut bad = p.clone();
    bad[52..60].copy_from_slice(&(-1.0f64).to_le_bytes());
    assert!(PlanesHeader::decode(&bad).is_err());
    // An infinite maximum is possible (f64 differences overflow).
    let mut ok = p.clone();
    ok[44..52].copy_from_slice(&f64::INFINITY.to_le_bytes());
    assert!(PlanesHeader::decode(&ok).is_ok());
    // Truncated inside the section; the flag without a base.
    assert!(PlanesHeader::decode_prefix(&p[..50]).is_err());
    let mut bad = p.clone();
    bad[2] = FLAG_STATS;
    assert!(PlanesHeader::decode(&bad).is_err());
}

#[test]
fn a_stored_delta_reads_its_statistics_from_the_record() {
    let t = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(t.path()).unwrap();
    l.config.chunk_threshold = 1024;
    let work = t.path().join("w");
    std::fs::create_dir_all(&work).unwrap();
    // The same values as F32 and (bit for bit) as I32.
    let header = concat!(
        r#"{"a":{"dtype":"F32","shape":[4096],"data_offsets":[0,16384]},"#,
        r#""b":{"dtype":"I32","shape":[4096],"data_offsets":[16384,32768]}}"#
    );
    let file = |vals: &[f32]| {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend(vals.iter().flat_map(|v| v.to_le_bytes()));
        out.extend(vals.iter().flat_map(|v| (v.to_bits() ^ 1).to_le_bytes()));
        out
    };
    let old: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let mut new = old.clone();
    new[3] += 2.0;
    new[100] = f32::NAN;
    new[4000] -= 0.5;
    let mut commit = |vals: &[f32]| {
        std::fs::write(work.join("m.safetensors"), file(vals)).unwrap();
        let c = l
            .commit_dir(
                &work,
                &CommitRequest::new("r"),
                &NoProgress,
                &AtomicBool::new(false),
            )
            .unwrap()
            .commit;
        let tree = l.read_commit(&c).unwrap().tree;
        l.walk_files(&tree).unwrap()[0].id
    };
    commit(&old);
    let id = commit(&new);
    let Location::Chunked { list } = l.locate(&id).unwrap().unwrap().location else {
        panic!("a chunked file");
    };
    let cl = l.read_chunk_list(&list).unwrap();
    let found: Vec<_> = cl
        .chunks
        .iter()
        .filter_map(|c| l.delta_record_stats(&c.id).unwrap())
        .collect();
    assert_eq!(found.len(), 2, "both tensor pieces are deltas");
    // The commit wrote each piece its dtype's reading only.
    let s = &found[0].stats;
    assert_eq!(s.changed, 3);
    assert_eq!(s.reading, StatsReading::One(FloatKind::F32));
    let f = s.float(FloatKind::F32).expect("the F32 reading");
    assert_eq!((f.nonfinite, f.max_abs, f.sumsq), (1, 2.0, 4.25));
    assert_eq!(found[0].width, 4);
    let s = &found[1].stats;
    assert_eq!((s.changed, s.reading), (3, StatsReading::Count));
    assert!(s.floats.is_empty());
}
