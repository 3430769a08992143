//! The statistics section of planes deltas (FORMAT.md §12.3.3). Any input
//! is parsed as a payload prefix and as a whole payload without panicking,
//! and statistics that are accepted are in range and hold the readings
//! header byte 3 names; then the input is read as a control byte (width,
//! joint coding, statistics reading) and two equal halves (old, new),
//! encoded as a delta, and the payload must carry exactly the statistics
//! of the two halves in that reading and decode back to the new half.
#![no_main]
use bat_ledger::delta::{
    decode_planes, encode_planes_with, piece_stats, planes_compressor, FloatKind, PlanesHeader,
    PlanesOptions, StatsReading,
};
use bat_ledger::ObjectId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((h, at)) = PlanesHeader::decode_prefix(data) {
        assert!(at <= data.len());
        if let Some(s) = h.stats {
            assert_eq!(Some(s.reading.code()), data.get(3).copied());
            assert_eq!(s.floats.len(), s.reading.kinds(h.width).len());
            for (k, f) in &s.floats {
                assert_eq!(k.width(), h.width);
                assert!(f.nonfinite <= s.changed);
                assert!(f.max_abs >= 0.0 && f.sumsq >= 0.0);
            }
        }
    }
    let _ = PlanesHeader::decode(data);
    let Some((&w, rest)) = data.split_first() else {
        return;
    };
    let width = [1usize, 2, 4, 8][usize::from(w & 3)];
    let stats = match (w >> 3) % 6 {
        0 => StatsReading::All,
        1 => StatsReading::One(FloatKind::Bf16),
        2 => StatsReading::One(FloatKind::F16),
        3 => StatsReading::One(FloatKind::F32),
        4 => StatsReading::One(FloatKind::F64),
        _ => StatsReading::Count,
    };
    let n = rest.len() / 2 / width * width;
    let (old, new) = (&rest[..n], &rest[n..2 * n]);
    let id = ObjectId::from_slice(&[7u8; 32]).expect("32 bytes");
    let mut comp = planes_compressor(1).expect("compressor");
    let opts = PlanesOptions {
        joint: w & 4 != 0,
        high_exceptions: w & 0x80 != 0,
        stats,
    };
    let p = encode_planes_with(&mut comp, new, width, Some((&id, old)), opts).expect("encodes");
    let h = PlanesHeader::decode(&p).expect("its own payload parses");
    assert_eq!(h.stats, Some(piece_stats(new, old, width as u8, stats)));
    let back = decode_planes(&p, n as u64, Some(old)).expect("its own payload decodes");
    assert_eq!(back, new);
});
