//! Property tests for the joint (gap, difference) Huffman coder of sparse
//! 16-bit deltas (`delta::joint`, FORMAT.md §12.3): exact round trips on
//! random and adversarial change sets, and malformed bodies rejected with an
//! error, never a panic or a wrong count.

use bat_ledger::delta::{decode_planes, encode_planes, joint, PlanesHeader, FLAG_JOINT};
use bat_ledger::ObjectId;
use proptest::prelude::*;

/// Apply `changes` to `base` the plain way.
fn apply_plain(base: &[u8], changes: &[joint::Change]) -> Vec<u8> {
    let mut out = base.to_vec();
    for &(i, d) in changes {
        let i = i as usize;
        let v = u16::from_le_bytes([out[2 * i], out[2 * i + 1]]).wrapping_add(d);
        out[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
    }
    out
}

/// A change set over `n` elements: distinct sorted indices, nonzero
/// differences drawn from `diff`.
fn changes(
    n: usize,
    diff: impl Strategy<Value = u16> + Clone,
) -> impl Strategy<Value = Vec<joint::Change>> {
    proptest::collection::btree_set(0..n.max(1) as u32, 0..=(n / 2).min(2000))
        .prop_flat_map(move |idx| {
            let idx: Vec<u32> = idx.into_iter().filter(|&i| (i as usize) < n).collect();
            let k = idx.len();
            (
                Just(idx),
                proptest::collection::vec(diff.clone().prop_filter("nonzero", |d| *d != 0), k),
            )
        })
        .prop_map(|(idx, d)| idx.into_iter().zip(d).collect())
}

/// Differences as fine-tuning makes them (mostly ±1, ±2), or any 16-bit value.
fn diffs() -> impl Strategy<Value = u16> + Clone {
    prop_oneof![
        4 => prop_oneof![Just(1u16), Just(0xFFFF), Just(2), Just(0xFFFE)],
        1 => (1u16..=8).prop_map(|v| v.wrapping_neg()),
        1 => any::<u16>(),
    ]
}

/// Both forms of escaped differences: the Golomb codes written today and
/// the 16 raw bits of older payloads.
fn escapes() -> impl Strategy<Value = joint::Escapes> {
    prop_oneof![Just(joint::Escapes::Golomb), Just(joint::Escapes::Raw16)]
}

fn case() -> impl Strategy<Value = (usize, Vec<joint::Change>)> {
    (0usize..6000).prop_flat_map(|n| (Just(n), changes(n, diffs())))
}

proptest! {
    #[test]
    fn round_trip((n, ch) in case(), seed in any::<u8>(), esc in escapes()) {
        let base: Vec<u8> = (0..2 * n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let body = joint::encode(&ch, n, esc);
        let mut out = base.clone();
        joint::apply(&body, &mut out, ch.len(), esc).unwrap();
        prop_assert_eq!(out, apply_plain(&base, &ch));
    }

    #[test]
    fn round_trip_sparse_and_escape_heavy(
        n in 1usize..20000,
        every in prop_oneof![Just(1usize), Just(63), Just(64), Just(65), Just(127), Just(4000)],
        d in any::<u16>().prop_filter("nonzero", |d| *d != 0),
        esc in escapes(),
    ) {
        // Long runs of skips, escapes only, or every element changed.
        let ch: Vec<joint::Change> = (0..n).step_by(every).map(|i| (i as u32, d)).collect();
        let base = vec![0x5Au8; 2 * n];
        let body = joint::encode(&ch, n, esc);
        let mut out = base.clone();
        joint::apply(&body, &mut out, ch.len(), esc).unwrap();
        prop_assert_eq!(out, apply_plain(&base, &ch));
    }

    /// Changes of every kind the decoder tells apart, in any order: plain
    /// (up to 8 code points), escapes short enough for two per peek (9 to
    /// 128), longer ones (129 to 32768), after gaps short, just under and
    /// over 64 (skips) and long: each pair of neighbours takes one of the
    /// decoder's paths (both from one peek, the second one by one, both
    /// one by one).
    #[test]
    fn round_trip_mixed_kinds_of_changes(
        steps in proptest::collection::vec(
            (
                prop_oneof![Just(0u32), 1u32..63, Just(63), Just(64), 65u32..300],
                prop_oneof![1u16..=8, 9u16..=128, 129u16..=32768],
                any::<bool>(),
            ),
            0..600,
        ),
        esc in escapes(),
    ) {
        let mut ch: Vec<joint::Change> = Vec::with_capacity(steps.len());
        let mut at = 0u32;
        for (gap, mag, neg) in steps {
            at += gap;
            ch.push((at, if neg { mag.wrapping_neg() } else { mag }));
            at += 1;
        }
        let n = at as usize + 3;
        let base: Vec<u8> = (0..2 * n).map(|i| (i as u8).wrapping_mul(29)).collect();
        let body = joint::encode(&ch, n, esc);
        let mut out = base.clone();
        joint::apply(&body, &mut out, ch.len(), esc).unwrap();
        prop_assert_eq!(out, apply_plain(&base, &ch));
    }

    #[test]
    fn damaged_bodies_fail_or_differ_without_panicking(
        (n, ch) in (64usize..3000).prop_flat_map(|n| (Just(n), changes(n, diffs()))),
        at in any::<usize>(),
        x in 1u8..=255,
        cut in any::<usize>(),
        extra in any::<u8>(),
        esc in escapes(),
    ) {
        let base = vec![0u8; 2 * n];
        let body = joint::encode(&ch, n, esc);
        let mut out = base.clone();
        // A flipped byte: an error, or (a code swapped for another of the
        // same length) other bytes, which the object digest catches.
        let mut bad = body.clone();
        let i = at % bad.len();
        bad[i] ^= x;
        let _ = joint::apply(&bad, &mut out, ch.len(), esc);
        // Truncated or extended bodies and a wrong count are refused.
        let short = &body[..cut % body.len()];
        prop_assert!(joint::apply(short, &mut base.clone(), ch.len(), esc).is_err());
        let mut long = body.clone();
        long.push(extra);
        prop_assert!(joint::apply(&long, &mut base.clone(), ch.len(), esc).is_err());
        prop_assert!(joint::apply(&body, &mut base.clone(), ch.len() + 1, esc).is_err());
        if !ch.is_empty() {
            prop_assert!(joint::apply(&body, &mut base.clone(), ch.len() - 1, esc).is_err());
        }
        // Applied to an empty piece, any change is past its end.
        if !ch.is_empty() {
            prop_assert!(joint::apply(&body, &mut [], ch.len(), esc).is_err());
        }
    }

    #[test]
    fn random_bodies_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..2000),
        n in 0usize..5000,
        count in 0usize..5000,
        esc in escapes(),
    ) {
        let _ = joint::apply(&body, &mut vec![0u8; 2 * n], count, esc);
    }

    #[test]
    fn planes_payloads_choose_joint_coding_for_many_changes(
        n in 2000usize..6000,
        every in 1usize..4,
        seed in any::<u16>(),
    ) {
        let base: Vec<u8> = (0..n).flat_map(|i| (i as u16 ^ seed).to_le_bytes()).collect();
        let mut raw = base.clone();
        // every = 1 changes all elements (a dense delta, not joint), and
        // every = 2 one more than half when n is odd.
        for i in (0..n).step_by(every) {
            let v = u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]).wrapping_add((i % 5) as u16 + 1);
            raw[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
        }
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let bid = ObjectId([3; 32]);
        let payload = encode_planes(&mut comp, &raw, 2, Some((&bid, &base)), true).unwrap();
        let h = PlanesHeader::decode(&payload).unwrap();
        let changed = (0..n).step_by(every).count();
        let joint = changed <= n / 2;
        prop_assert_eq!(h.joint, joint);
        prop_assert_eq!(payload[2] & FLAG_JOINT != 0, joint);
        if joint {
            prop_assert_eq!(h.escapes, joint::Escapes::Golomb);
        }
        prop_assert_eq!(decode_planes(&payload, raw.len() as u64, Some(&base)).unwrap(), raw.clone());
        prop_assert!(decode_planes(&payload[..payload.len() - 1], raw.len() as u64, Some(&base)).is_err());
        if h.joint {
            let mut bad = payload.clone();
            bad[36] ^= 1; // the changed-element count
            prop_assert!(decode_planes(&bad, raw.len() as u64, Some(&base)).is_err());
        }
    }
}

/// Every nonzero 16-bit difference, one per element, round-trips in both
/// escape forms: the Golomb classes meet without a gap or an overlap, and
/// the largest class ends exactly at the largest magnitude (32768).
#[test]
fn every_difference_round_trips_in_both_escape_forms() {
    let n = 1 << 16;
    let ch: Vec<joint::Change> = (1..n as u32).map(|i| (i, i as u16)).collect();
    let base: Vec<u8> = (0..n)
        .flat_map(|i| (i as u16 ^ 0x3C5A).to_le_bytes())
        .collect();
    let mut sizes = vec![];
    for esc in [joint::Escapes::Golomb, joint::Escapes::Raw16] {
        let body = joint::encode(&ch, n, esc);
        let mut out = base.clone();
        joint::apply(&body, &mut out, ch.len(), esc).unwrap();
        assert_eq!(out, apply_plain(&base, &ch), "{esc:?}");
        sizes.push(body.len());
    }
    // Uniform differences are mostly large: a Golomb code takes up to 27
    // bits where the raw form takes 16, never more than 11 bits more.
    assert!(sizes[0] > sizes[1], "{sizes:?}");
    assert!(sizes[0] <= sizes[1] + 11 * ch.len() / 8 + 64, "{sizes:?}");
}

/// Escapes of 9 to 64 code points, what small weights see in a
/// fine-tuning step, take at most 11 bits in the Golomb form instead of
/// 16: the body shrinks by at least 5 bits per change.
#[test]
fn golomb_escapes_are_shorter_for_moderate_differences() {
    let n = 1 << 16;
    let ch: Vec<joint::Change> = (0..n as u32)
        .step_by(4)
        .map(|i| (i, (9 + i % 56) as u16 ^ if i % 3 == 0 { 0 } else { 0xFFFF }))
        .filter(|c| c.1 != 0)
        .collect();
    let golomb = joint::encode(&ch, n, joint::Escapes::Golomb);
    let raw = joint::encode(&ch, n, joint::Escapes::Raw16);
    assert!(
        (golomb.len() as f64) < raw.len() as f64 - 5.0 * ch.len() as f64 / 8.0,
        "{} vs {} bytes for {} changes",
        golomb.len(),
        raw.len(),
        ch.len()
    );
}

/// A Golomb class above 11 (twelve or more one bits) would describe a
/// difference wider than 16 bits: refused, in every stream position.
#[test]
fn golomb_escapes_longer_than_sixteen_bits_are_refused() {
    let n = 256;
    // One escape (+9) at element 0 of the one stream, a table with the
    // escape symbol 1024 and the skip as the only codes (length 1 each).
    let mut body = vec![0u8; joint::SYMBOLS.div_ceil(2)];
    body[1024 / 2] = 1;
    body[1088 / 2] = 1;
    body.push(1);
    body.extend_from_slice(&1u32.to_le_bytes());
    // Codes: escape = 0, skip = 1 (canonical, by symbol). Then class k
    // ones, a zero, the sign and k + 3 offset bits.
    let stream = |k: u32| -> Vec<u8> {
        let bits: u64 = ((1u64 << k) - 1) << 1;
        let len = 1 + 2 * k + 5;
        bits.to_le_bytes()[..len.div_ceil(8) as usize].to_vec()
    };
    for k in 0..14u32 {
        let mut b = body.clone();
        let s = stream(k);
        b.extend_from_slice(&(s.len() as u32).to_le_bytes());
        b.extend_from_slice(&s);
        let mut out = vec![0u8; 2 * n];
        let r = joint::apply(&b, &mut out, 1, joint::Escapes::Golomb);
        if k <= 11 {
            r.unwrap();
            let want = 9 + 8 * ((1u32 << k) - 1);
            assert_eq!(
                u16::from_le_bytes([out[0], out[1]]),
                want as u16,
                "class {k}"
            );
        } else {
            assert!(r.is_err(), "class {k}");
        }
    }
}

#[test]
fn golomb_flag_is_refused_without_joint_coding() {
    use bat_ledger::delta::FLAG_GOLOMB_ESCAPES;
    let mut p = vec![1u8, 2, 1 | 2 | 4 | FLAG_JOINT | FLAG_GOLOMB_ESCAPES, 0];
    p.extend_from_slice(&[0; 32]);
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    let h = PlanesHeader::decode(&p).unwrap();
    assert_eq!(h.escapes, joint::Escapes::Golomb);
    p[2] = 1 | 2 | 4 | FLAG_JOINT;
    assert_eq!(
        PlanesHeader::decode(&p).unwrap().escapes,
        joint::Escapes::Raw16
    );
    p[2] = 1 | 2 | 4 | FLAG_GOLOMB_ESCAPES;
    assert!(
        PlanesHeader::decode(&p).is_err(),
        "Golomb escapes without joint coding"
    );
}

/// Payloads written before the Golomb escapes (flag bit 5 clear, 16 raw
/// bits per escape) still decode through `decode_planes`.
#[test]
fn older_joint_payloads_with_raw_escapes_still_decode() {
    let n = 5000;
    let base: Vec<u8> = (0..n)
        .flat_map(|i| (i as u16).wrapping_mul(7).to_le_bytes())
        .collect();
    let ch: Vec<joint::Change> = (0..n as u32)
        .step_by(3)
        .map(|i| (i, [1u16, 0xFFFF, 40, 0xFF00, 0x8000][i as usize % 5]))
        .collect();
    let body = joint::encode(&ch, n, joint::Escapes::Raw16);
    let mut p = vec![1u8, 2, 1 | 2 | 4 | FLAG_JOINT, 0];
    p.extend_from_slice(&[9; 32]);
    p.extend_from_slice(&(ch.len() as u32).to_le_bytes());
    p.extend_from_slice(&(body.len() as u32).to_le_bytes());
    p.extend_from_slice(&body);
    let out = decode_planes(&p, base.len() as u64, Some(&base)).unwrap();
    assert_eq!(out, apply_plain(&base, &ch));
    // The same body read as Golomb escapes does not give the same bytes.
    p[2] |= bat_ledger::delta::FLAG_GOLOMB_ESCAPES;
    let wrong = decode_planes(&p, base.len() as u64, Some(&base));
    assert!(wrong.map_or(true, |w| w != out));
}

#[test]
fn joint_flag_is_refused_with_other_widths_or_without_gaps() {
    let mut p = vec![1u8, 4, 1 | 2 | 4 | FLAG_JOINT, 0];
    p.extend_from_slice(&[0; 32]);
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    assert!(PlanesHeader::decode(&p).is_err(), "width 4");
    p[1] = 2;
    assert!(PlanesHeader::decode(&p).is_ok());
    p[2] = 1 | FLAG_JOINT;
    assert!(
        PlanesHeader::decode(&p).is_err(),
        "joint without sparse gaps"
    );
}

#[test]
fn fine_tuning_changes_cost_about_six_and_a_half_bits_each() {
    // One change in eight, ±1 mostly: the body should be near the entropy
    // of (gap, difference), far below the 16 bits of a raw element.
    let esc = joint::Escapes::Golomb;
    let n = 1 << 20;
    let mut state = 0x1234_5678_u32;
    let mut rnd = || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let ch: Vec<joint::Change> = (0..n as u32)
        .filter_map(|i| {
            let r = rnd();
            (r % 8 == 0).then_some((i, if r & 0x100 != 0 { 1 } else { 0xFFFF }))
        })
        .collect();
    let body = joint::encode(&ch, n, esc);
    let bits = body.len() as f64 * 8.0 / ch.len() as f64;
    // gap entropy of p = 1/8 is 4.35 bits per change, the sign 1 bit.
    assert!(bits < 5.6, "{bits} bits per change");
    let mut out = vec![0u8; 2 * n];
    joint::apply(&body, &mut out, ch.len(), esc).unwrap();
    assert_eq!(out, apply_plain(&vec![0u8; 2 * n], &ch));
}

/// A ledger written with the default configuration, which codes sparse
/// 16-bit deltas jointly: every round reads back exactly, fsck accepts it,
/// the delta records are jointly coded, and a damaged joint record is
/// reported as corruption of that record, never returned as bytes.
#[test]
fn ledger_round_trip_with_joint_coding() {
    use bat_ledger::{CommitRequest, Error, Ledger, Location, NoProgress};
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::AtomicBool;
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    let mut l = Ledger::init(&t.path().join("l")).unwrap();
    l.config.chunk_threshold = 1024;
    let n = 65536usize;
    let mut state = 0x9E37_79B9_u32;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    let mut w: Vec<u16> = (0..n).map(|_| 0x3C00 | (rnd() as u16 & 0x3FF)).collect();
    let header = format!(
        "{{\"w\":{{\"dtype\":\"BF16\",\"shape\":[{n}],\"data_offsets\":[0,{}]}}}}",
        2 * n
    );
    let mut rounds = Vec::new();
    for r in 0..4 {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b.extend(w.iter().flat_map(|x| x.to_le_bytes()));
        std::fs::write(d.join("m.safetensors"), &b).unwrap();
        let c = l
            .commit_dir(
                &d,
                &CommitRequest::new(format!("r{r}")),
                &NoProgress,
                &AtomicBool::new(false),
            )
            .unwrap()
            .commit;
        rounds.push((c, b));
        for x in w.iter_mut() {
            let v = rnd();
            if v % 8 == 0 {
                *x = x.wrapping_add(if v & 0x100 != 0 { 1 } else { 0xFFFF });
            }
        }
    }
    let file_of = |l: &Ledger, c| l.walk_files(&l.read_commit(c).unwrap().tree).unwrap()[0].id;
    for (c, b) in &rounds {
        assert_eq!(&l.read_bytes(&file_of(&l, c)).unwrap(), b);
    }
    assert!(l.stats().unwrap().delta_objects >= 3);
    assert!(l.fsck(&NoProgress, &AtomicBool::new(false)).unwrap().ok());
    // Damage the middle of round 3's first joint delta record (its data
    // went into the newest pack).
    let file = file_of(&l, &rounds[3].0);
    let Some(Location::Chunked { list }) = l.locate(&file).unwrap().map(|r| r.location) else {
        panic!("a chunked file")
    };
    let (off, stored) = l
        .read_chunk_list(&list)
        .unwrap()
        .chunks
        .iter()
        .find_map(|c| match l.locate(&c.id).unwrap().map(|r| r.location) {
            Some(Location::Delta {
                offset, stored_len, ..
            }) => Some((offset, stored_len)),
            _ => None,
        })
        .expect("a delta chunk");
    let mut packs: Vec<_> = std::fs::read_dir(l.dir().join("packs"))
        .unwrap()
        .flatten()
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    packs.sort();
    let path = packs.pop().unwrap().1;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    // The payload (after the 80-byte record header) is a planes payload:
    // byte 2 holds its flags.
    let mut flags = [0u8; 1];
    f.read_exact_at(&mut flags, off + 82).unwrap();
    assert_ne!(flags[0] & FLAG_JOINT, 0, "jointly coded by default");
    assert_ne!(
        flags[0] & bat_ledger::delta::FLAG_GOLOMB_ESCAPES,
        0,
        "with Golomb escapes"
    );
    let at = off + 80 + stored / 2;
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x5A], at).unwrap();
    match l.read_bytes(&file) {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("expected Corrupt, got {:?}", other.map(|b| b.len())),
    }
    assert!(!l.fsck(&NoProgress, &AtomicBool::new(false)).unwrap().ok());
}

/// Where stream `k`'s (changes, bytes) entry sits in a joint body.
fn stream_entry(k: usize) -> usize {
    joint::SYMBOLS.div_ceil(2) + 1 + 8 * k
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn write_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// The streams are read from one slice, so a stream whose codes would run
/// into the next stream's bytes reads valid-looking codes: the decoder must
/// still refuse a body whose streams are split at another byte, or whose
/// changes are counted in another stream, with the totals unchanged.
#[test]
fn streams_must_end_exactly_at_their_own_bytes_and_elements() {
    let (n, esc) = (4096, joint::Escapes::Golomb);
    // One change in eight, all +1.
    let ch: Vec<joint::Change> = (0..n as u32).step_by(8).map(|i| (i, 1)).collect();
    let body = joint::encode(&ch, n, esc);
    let mut out = vec![0u8; 2 * n];
    joint::apply(&body, &mut out, ch.len(), esc).unwrap();
    for (from, to) in [(0, 1), (1, 0), (2, 3), (3, 2)] {
        for delta in [1u32, 2] {
            // Bytes moved from one stream to its neighbour.
            let mut bad = body.clone();
            let (a, b) = (stream_entry(from) + 4, stream_entry(to) + 4);
            write_u32(&mut bad, a, read_u32(&body, a) - delta);
            write_u32(&mut bad, b, read_u32(&body, b) + delta);
            let r = joint::apply(&bad, &mut vec![0u8; 2 * n], ch.len(), esc);
            assert!(r.is_err(), "bytes {from}→{to} by {delta}");
            // A change moved from one stream's count to its neighbour's.
            let mut bad = body.clone();
            let (a, b) = (stream_entry(from), stream_entry(to));
            write_u32(&mut bad, a, read_u32(&body, a) - delta);
            write_u32(&mut bad, b, read_u32(&body, b) + delta);
            let r = joint::apply(&bad, &mut vec![0u8; 2 * n], ch.len(), esc);
            assert!(r.is_err(), "changes {from}→{to} by {delta}");
        }
    }
}

/// A code table whose only symbol is the 64-element skip, and streams
/// without bytes (read as zero bits: skip after skip): decoding ends with
/// an error at the end of the piece instead of looping, for every piece
/// size.
#[test]
fn a_body_of_endless_skips_ends_at_the_piece() {
    let mut body = vec![0u8; joint::SYMBOLS.div_ceil(2)];
    // Symbol 1088 (the skip) has length 1: the low nibble of byte 544.
    body[1088 / 2] = 1;
    body.push(4);
    for k in 0..4u32 {
        body.extend_from_slice(&(k % 2).to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
    }
    for n in [0usize, 1, 63, 64, 65, 4096, 1 << 20] {
        for esc in [joint::Escapes::Golomb, joint::Escapes::Raw16] {
            let r = joint::apply(&body, &mut vec![0u8; 2 * n], 2, esc);
            assert!(r.is_err(), "{n} elements");
        }
    }
}

/// A piece where most elements change (a high learning rate) is stored as
/// a dense XOR delta whether the joint coding is on or off, decided from a
/// sample without coding its changes first; it still reads back exactly.
/// A sparse piece of the same size is still jointly coded.
#[test]
fn mostly_changed_pieces_go_straight_to_the_dense_form() {
    use bat_ledger::delta::{encode_planes_with, PlanesOptions, StatsReading, FLAG_SPARSE};
    let n = 1 << 16;
    let base: Vec<u8> = (0..n as u32)
        .flat_map(|i| (0x3C00u16 | (i.wrapping_mul(2_654_435_761) >> 22) as u16).to_le_bytes())
        .collect();
    let bump = |every_of_10: u32| -> Vec<u8> {
        let mut raw = base.clone();
        for i in 0..n {
            if (i as u32).wrapping_mul(7) % 10 < every_of_10 {
                let v = u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]).wrapping_add(1);
                raw[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        raw
    };
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    let bid = ObjectId([9; 32]);
    for joint in [true, false] {
        let opts = PlanesOptions {
            joint,
            high_exceptions: false,
            stats: StatsReading::All,
        };
        let raw = bump(8);
        let p = encode_planes_with(&mut comp, &raw, 2, Some((&bid, &base)), opts).unwrap();
        assert_eq!(p[2] & (FLAG_SPARSE | FLAG_JOINT), 0, "80 % changed: dense");
        assert_eq!(
            decode_planes(&p, raw.len() as u64, Some(&base)).unwrap(),
            raw
        );
        let raw = bump(1);
        let p = encode_planes_with(&mut comp, &raw, 2, Some((&bid, &base)), opts).unwrap();
        assert_ne!(p[2] & FLAG_SPARSE, 0, "10 % changed: sparse");
        assert_eq!(p[2] & FLAG_JOINT != 0, joint);
        assert_eq!(
            decode_planes(&p, raw.len() as u64, Some(&base)).unwrap(),
            raw
        );
    }
}
