//! Property tests for the planes codec: split/join and delta encode/decode
//! are exact inverses for every element width, with and without a base.

use bat_ledger::delta::{
    decode_planes, encode_planes, join_planes, sparse_planes, split_planes, PlanesHeader,
};
use bat_ledger::ObjectId;
use proptest::prelude::*;

fn case() -> impl Strategy<Value = (usize, Vec<u8>, Option<Vec<u8>>)> {
    prop_oneof![Just(1usize), Just(2), Just(4), Just(8)].prop_flat_map(|w| {
        (0usize..300).prop_flat_map(move |n| {
            (
                Just(w),
                proptest::collection::vec(any::<u8>(), n * w),
                proptest::option::of(proptest::collection::vec(any::<u8>(), n * w)),
            )
        })
    })
}

proptest! {
    #[test]
    fn split_join_round_trip((w, raw, base) in case()) {
        let planes = split_planes(&raw, base.as_deref(), w);
        prop_assert_eq!(planes.len(), w);
        prop_assert_eq!(join_planes(&planes, base.as_deref(), w), raw);
    }

    #[test]
    fn encode_decode_round_trip((w, raw, base) in case()) {
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let bid = ObjectId([7; 32]);
        let b = base.as_ref().map(|b| (&bid, b.as_slice()));
        let payload = encode_planes(&mut comp, &raw, w, b, false).unwrap();
        let h = PlanesHeader::decode(&payload).unwrap();
        prop_assert_eq!(h.base, base.as_ref().map(|_| bid));
        prop_assert_eq!(decode_planes(&payload, raw.len() as u64, base.as_deref()).unwrap(), raw.clone());
        // decoding with the wrong base presence or a truncated payload fails, never panics
        let other: Option<&[u8]> = if base.is_some() { None } else { Some(&raw) };
        prop_assert!(decode_planes(&payload, raw.len() as u64, other).is_err());
        prop_assert!(decode_planes(&payload[..payload.len() - 1], raw.len() as u64, base.as_deref()).is_err());
    }

    #[test]
    fn sparse_deltas_round_trip(
        (w, base) in prop_oneof![Just(1usize), Just(2), Just(4), Just(8)].prop_flat_map(|w| {
            (Just(w), proptest::collection::vec(any::<u8>(), 0..3000 * w)
                .prop_map(move |mut v| { v.truncate(v.len() / w * w); v }))
        }),
        flips in proptest::collection::vec((any::<u16>(), 1u8..=255), 0..40),
        damage in (any::<usize>(), 1u8..=255),
    ) {
        let mut raw = base.clone();
        for (at, x) in &flips {
            if !raw.is_empty() {
                let i = usize::from(*at) % raw.len();
                raw[i] ^= x;
            }
        }
        let n = raw.len() / w;
        let changed = raw.chunks_exact(w).zip(base.chunks_exact(w)).filter(|(a, b)| a != b).count();
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let bid = ObjectId([9; 32]);
        let payload = encode_planes(&mut comp, &raw, w, Some((&bid, &base)), false).unwrap();
        let h = PlanesHeader::decode(&payload).unwrap();
        prop_assert_eq!(h.sparse_count.is_some(), changed <= n / 2, "sparse exactly when at most half changed");
        if let Some(c) = h.sparse_count {
            prop_assert_eq!(c as usize, changed);
        }
        prop_assert_eq!(decode_planes(&payload, raw.len() as u64, Some(&base)).unwrap(), raw.clone());
        // a sparse delta applied to another base of the same length gives other bytes, not an error
        // (the final digest check catches it); a truncated or bit-flipped table fails cleanly
        prop_assert!(decode_planes(&payload[..payload.len() - 1], raw.len() as u64, Some(&base)).is_err());
        // any damaged byte gives an error or other bytes, never a panic
        let mut bad = payload.clone();
        let at = damage.0 % bad.len();
        bad[at] ^= damage.1;
        let _ = decode_planes(&bad, raw.len() as u64, Some(&base));
        if h.sparse_count.is_some() && payload.len() > 36 {
            let mut bad = payload.clone();
            bad[36] ^= 0x01; // the changed-element count
            prop_assert!(decode_planes(&bad, raw.len() as u64, Some(&base)).is_err());
        }
    }

    #[test]
    fn sparse_planes_matches_element_by_element_definition(
        (w, base) in prop_oneof![Just(1usize), Just(2), Just(4), Just(8)].prop_flat_map(|w| {
            (Just(w), proptest::collection::vec(any::<u8>(), 0..3000 * w)
                .prop_map(move |mut v| { v.truncate(v.len() / w * w); v }))
        }),
        flips in proptest::collection::vec((any::<u16>(), 1u8..=255), 0..120),
    ) {
        let mut raw = base.clone();
        for (at, x) in &flips {
            if !raw.is_empty() {
                let i = usize::from(*at) % raw.len();
                raw[i] ^= x;
            }
        }
        let mut gaps = Vec::new();
        let mut planes = vec![Vec::new(); w];
        let mut next = 0usize;
        for (i, (a, b)) in raw.chunks_exact(w).zip(base.chunks_exact(w)).enumerate() {
            if a != b {
                let mut gap = i - next;
                while gap >= 255 {
                    gaps.push(255u8);
                    gap -= 255;
                }
                gaps.push(gap as u8);
                next = i + 1;
                for k in 0..w {
                    planes[k].push(a[k] ^ b[k]);
                }
            }
        }
        let count = planes[0].len();
        prop_assert_eq!(sparse_planes(&raw, &base, w), (gaps, count, planes));
    }

    #[test]
    fn header_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = PlanesHeader::decode(&bytes);
        let _ = decode_planes(&bytes, 64, None);
    }
}

#[test]
fn a_bit_mask_sparse_payload_from_an_earlier_build_is_refused_by_name() {
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    let base = vec![0u8; 64];
    let mut raw = base.clone();
    raw[6] = 1;
    let bid = ObjectId([5; 32]);
    let mut payload = encode_planes(&mut comp, &raw, 2, Some((&bid, &base)), false).unwrap();
    assert_eq!(
        payload[2],
        2 | 4 | 1 | bat_ledger::delta::FLAG_STATS,
        "a sparse delta is written gap-coded, with statistics"
    );
    payload[2] = 1 | 2;
    let err = PlanesHeader::decode(&payload).unwrap_err();
    assert!(err.contains("earlier development build"), "{err}");
    assert!(decode_planes(&payload, 64, Some(&base)).is_err());
}
