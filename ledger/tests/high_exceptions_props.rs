//! Property tests for sparse 16-bit deltas whose high plane is stored as
//! its exceptions (FORMAT.md §12.3.2): exact round trips on random and
//! adversarial changes, the choice against the zstd plane, and refusal of
//! malformed exceptions without panics.

use bat_ledger::delta::{
    decode_planes, encode_planes_with, high_exceptions, PlanesHeader, PlanesOptions, StatsReading,
    FLAG_HIGH_EXCEPTIONS,
};
use bat_ledger::ObjectId;
use proptest::prelude::*;

const ON: PlanesOptions = PlanesOptions {
    joint: false,
    high_exceptions: true,
    stats: StatsReading::All,
};
const OFF: PlanesOptions = PlanesOptions {
    joint: false,
    high_exceptions: false,
    stats: StatsReading::All,
};

/// `base` with `changes` applied: (element, wrapping difference), so most
/// changes move a code by a little and leave the high byte alone.
fn apply_changes(base: &[u8], changes: &[(u16, i16)]) -> Vec<u8> {
    let mut raw = base.to_vec();
    let n = raw.len() / 2;
    for &(at, d) in changes {
        if n == 0 {
            break;
        }
        let i = usize::from(at) % n;
        let v = u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]).wrapping_add(d as u16);
        raw[2 * i..2 * i + 2].copy_from_slice(&v.to_le_bytes());
    }
    raw
}

/// A sparse delta payload with the exceptions flag and the given
/// (uncompressed) exceptions body, for `count` changes each XOR-ing the
/// low byte of consecutive elements from 0 on with 1.
fn crafted(count: usize, exceptions: &[u8]) -> Vec<u8> {
    let gaps = vec![0u8; count];
    let low = vec![1u8; count];
    let mut out = vec![1u8, 2, 1 | 2 | 4 | FLAG_HIGH_EXCEPTIONS, 0];
    out.extend_from_slice(&[3u8; 32]);
    out.extend_from_slice(&(count as u32).to_le_bytes());
    let frames: Vec<Vec<u8>> = [gaps.as_slice(), low.as_slice(), exceptions]
        .iter()
        .map(|f| zstd::bulk::compress(f, 1).unwrap())
        .collect();
    for f in &frames {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
    }
    for f in &frames {
        out.extend_from_slice(f);
    }
    out
}

/// An exceptions body: count, gap bytes, values.
fn body(e: u32, gaps: &[u8], values: &[u8]) -> Vec<u8> {
    let mut b = e.to_le_bytes().to_vec();
    b.extend_from_slice(gaps);
    b.extend_from_slice(values);
    b
}

proptest! {
    #[test]
    fn round_trip_with_and_without_exceptions(
        base in proptest::collection::vec(any::<u8>(), 0..6000)
            .prop_map(|mut v| { v.truncate(v.len() / 2 * 2); v }),
        small in proptest::collection::vec((any::<u16>(), -3i16..=3), 0..400),
        large in proptest::collection::vec((any::<u16>(), any::<i16>()), 0..20),
    ) {
        let mut changes = small;
        changes.extend(large);
        let raw = apply_changes(&base, &changes);
        let bid = ObjectId([7; 32]);
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let on = encode_planes_with(&mut comp, &raw, 2, Some((&bid, &base)), ON).unwrap();
        let off = encode_planes_with(&mut comp, &raw, 2, Some((&bid, &base)), OFF).unwrap();
        prop_assert_eq!(decode_planes(&on, raw.len() as u64, Some(&base)).unwrap(), raw.clone());
        prop_assert_eq!(decode_planes(&off, raw.len() as u64, Some(&base)).unwrap(), raw.clone());
        let (h_on, h_off) = (PlanesHeader::decode(&on).unwrap(), PlanesHeader::decode(&off).unwrap());
        prop_assert!(!h_off.high_exceptions, "off writes what earlier builds wrote");
        // The exceptions form is chosen only when it is smaller, and only
        // for sparse deltas; otherwise the payloads are the same bytes.
        if h_on.high_exceptions {
            prop_assert!(h_on.sparse_count.is_some());
            prop_assert!(on.len() < off.len());
        } else {
            prop_assert_eq!(&on, &off);
        }
        // truncation and any damaged byte: an error or other bytes, never a panic
        prop_assert!(decode_planes(&on[..on.len() - 1], raw.len() as u64, Some(&base)).is_err());
        for at in [2usize, 36, 40, 44, 48, on.len() / 2, on.len() - 1] {
            if at < on.len() {
                let mut bad = on.clone();
                bad[at] ^= 0x5A;
                let _ = decode_planes(&bad, raw.len() as u64, Some(&base));
            }
        }
    }

    #[test]
    fn exceptions_body_matches_its_definition(
        plane in proptest::collection::vec(prop_oneof![9 => Just(0u8), 1 => 1u8..=255], 0..2000),
    ) {
        let b = high_exceptions(&plane);
        let nz: Vec<(usize, u8)> = plane.iter().copied().enumerate().filter(|x| x.1 != 0).collect();
        prop_assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()) as usize, nz.len());
        let values: Vec<u8> = nz.iter().map(|x| x.1).collect();
        prop_assert_eq!(&b[b.len() - nz.len()..], values.as_slice());
        // the gap bytes name exactly the nonzero bytes' indices
        let mut at = 0usize;
        let mut named = Vec::new();
        for &g in &b[4..b.len() - nz.len()] {
            if g == 255 {
                at += 255;
            } else {
                at += usize::from(g);
                named.push(at);
                at += 1;
            }
        }
        prop_assert_eq!(named, nz.iter().map(|x| x.0).collect::<Vec<_>>());
    }

    #[test]
    fn random_exceptions_bodies_never_panic(
        count in 0usize..300,
        junk in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let base = vec![0u8; 2 * count.max(1)];
        let payload = crafted(count, &junk);
        let _ = decode_planes(&payload, base.len() as u64, Some(&base));
    }
}

#[test]
fn a_bf16_like_delta_uses_exceptions_and_is_smaller() {
    // 20 000 elements, one in eight moved by one code point: the high XOR
    // byte is nonzero only where the low byte carries.
    let base: Vec<u8> = (0..40_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let changes: Vec<(u16, i16)> = (0..2500u16)
        .map(|k| (k * 8, if k % 2 == 0 { 1 } else { -1 }))
        .collect();
    let raw = apply_changes(&base, &changes);
    let bid = ObjectId([1; 32]);
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    let on = encode_planes_with(&mut comp, &raw, 2, Some((&bid, &base)), ON).unwrap();
    let off = encode_planes_with(&mut comp, &raw, 2, Some((&bid, &base)), OFF).unwrap();
    assert_eq!(on[2] & FLAG_HIGH_EXCEPTIONS, FLAG_HIGH_EXCEPTIONS);
    assert!(on.len() < off.len(), "{} vs {}", on.len(), off.len());
    assert_eq!(decode_planes(&on, 40_000, Some(&base)).unwrap(), raw);
}

#[test]
fn well_formed_crafted_exceptions_apply() {
    // Four changes at elements 0..4; high bytes 0x80 at changes 1 and 3.
    let base = vec![0u8; 16];
    let ok = crafted(4, &body(2, &[1, 1], &[0x80, 0x80]));
    let out = decode_planes(&ok, 16, Some(&base)).unwrap();
    assert_eq!(&out[..8], &[1, 0, 1, 0x80, 1, 0, 1, 0x80]);
    assert_eq!(&out[8..], &[0; 8]);
    // No exceptions at all is fine too.
    let none = crafted(4, &body(0, &[], &[]));
    assert_eq!(
        &decode_planes(&none, 16, Some(&base)).unwrap()[..8],
        &[1, 0, 1, 0, 1, 0, 1, 0]
    );
}

#[test]
fn malformed_exceptions_are_refused() {
    let base = vec![0u8; 16];
    let cases: [(&str, Vec<u8>); 8] = [
        ("shorter than the count", vec![1, 0]),
        ("more exceptions than changes", body(5, &[0; 5], &[1; 5])),
        ("gaps truncated", body(2, &[1], &[])),
        ("a value missing", body(2, &[0, 0], &[7])),
        ("a trailing byte", body(1, &[0], &[7, 7])),
        ("a zero value", body(1, &[0], &[0])),
        ("an exception past the last change", body(1, &[4], &[7])),
        ("a skip past the changes", body(1, &[255, 0], &[7])),
    ];
    for (what, b) in cases {
        let payload = crafted(4, &b);
        assert!(
            decode_planes(&payload, 16, Some(&base)).is_err(),
            "{what} was accepted"
        );
    }
    // The flag without 16-bit elements, or with the joint coding, is refused.
    let mut p = crafted(4, &body(0, &[], &[]));
    p[1] = 4;
    assert!(PlanesHeader::decode(&p).is_err());
    let mut p = crafted(4, &body(0, &[], &[]));
    p[2] |= 8;
    assert!(PlanesHeader::decode(&p).is_err());
}

/// Ledgers written with the exceptions form on and off: every round of
/// both reads back exactly, fsck accepts both, and the one with the form
/// on stores less (so its deltas do use it; it is chosen only when
/// smaller).
#[test]
fn ledger_round_trip_with_high_exceptions() {
    use bat_ledger::{CommitRequest, Ledger, NoProgress};
    use std::sync::atomic::AtomicBool;
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    let mut ledgers = Vec::new();
    for on in [true, false] {
        let mut l = Ledger::init(&t.path().join(format!("l{on}"))).unwrap();
        l.config.chunk_threshold = 1024;
        // The exceptions form is a form of the zstd sparse deltas, which
        // the (default) joint coding replaces for 16-bit elements.
        l.config.joint_coding = false;
        l.config.high_exceptions = on;
        ledgers.push(l);
    }
    let n = 65536usize;
    let mut state = 0x2545_F491_u32;
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
        let mut commits = Vec::new();
        for l in &mut ledgers {
            let out = l
                .commit_dir(
                    &d,
                    &CommitRequest::new(format!("r{r}")),
                    &NoProgress,
                    &AtomicBool::new(false),
                )
                .unwrap();
            commits.push(out.commit);
        }
        rounds.push((commits, b));
        for x in w.iter_mut() {
            let v = rnd();
            if v % 8 == 0 {
                *x = x.wrapping_add(if v & 0x100 != 0 { 1 } else { 0xFFFF });
            }
        }
    }
    for (k, l) in ledgers.iter().enumerate() {
        for (commits, b) in &rounds {
            let tree = l.read_commit(&commits[k]).unwrap().tree;
            let id = l.walk_files(&tree).unwrap()[0].id;
            assert_eq!(&l.read_bytes(&id).unwrap(), b);
        }
        assert!(l.stats().unwrap().delta_objects >= 3);
        assert!(l.fsck(&NoProgress, &AtomicBool::new(false)).unwrap().ok());
    }
    let (on, off) = (
        ledgers[0].stats().unwrap().delta_stored_bytes,
        ledgers[1].stats().unwrap().delta_stored_bytes,
    );
    assert!(on < off, "exceptions on {on} bytes, off {off}");
}
