//! The framed byte stream that carries [`WireObject`]s (PROTOCOL.md §3):
//! a 16-byte stream header, one frame per object (a 96-byte frame header
//! with its own checksum, then the payload), and a 48-byte end marker that
//! counts the frames and carries the BLAKE3 of every byte before it.
//!
//! Decoding enforces limits before allocating: a frame header must be
//! well-formed and checksummed, a record's declared raw length is at most
//! [`MAX_RECORD_RAW`], its payload at most [`MAX_WIRE_PAYLOAD`], and a
//! stream that ends without its end marker is an error. Decoding does not
//! verify objects against their ids; [`crate::Ledger::import_wire`] does.

use std::io::{Read, Write};

use super::{RemoteError, WireBody, WireObject};
use crate::id::ObjectId;
use crate::object::Kind;
use crate::pack::{COMPRESSION_NONE, COMPRESSION_PLANES, COMPRESSION_ZSTD, MAX_RECORD_RAW};

/// First 8 bytes of a wire stream.
pub const STREAM_MAGIC: &[u8; 8] = b"BATWIRE\0";
/// Wire stream version.
pub const STREAM_VERSION: u32 = 1;
/// Length of the stream header.
pub const STREAM_HEADER_LEN: usize = 16;
/// First 4 bytes of an object frame.
pub const FRAME_MAGIC: &[u8; 4] = b"BATO";
/// Length of a frame header.
pub const FRAME_HEADER_LEN: usize = 96;
/// First 4 bytes of the end marker.
pub const END_MAGIC: &[u8; 4] = b"BATE";
/// Length of the end marker.
pub const END_LEN: usize = 48;
/// Largest payload a frame may carry (a record's payload can exceed its raw
/// length slightly when compression does not help).
pub const MAX_WIRE_PAYLOAD: u64 = MAX_RECORD_RAW + (1 << 20);
/// Largest file a chunked alias may describe (1 TiB).
pub const MAX_CHUNKED_RAW: u64 = 1 << 40;

/// Body tag: a self-contained record.
pub const TAG_RECORD: u8 = 1;
/// Body tag: a delta record.
pub const TAG_DELTA: u8 = 2;
/// Body tag: a chunked-file alias.
pub const TAG_CHUNKED: u8 = 3;
/// Body tag: a file object the sender does not store because a retention
/// gc pruned it there (no bytes; the payload is the sender's policy text).
pub const TAG_ABSENT: u8 = 4;
/// Longest policy text an absent entry may carry.
pub const MAX_ABSENT_POLICY: u64 = 1024;

fn protocol(reason: impl Into<String>) -> RemoteError {
    RemoteError::Protocol {
        reason: reason.into(),
    }
}

/// The 16-byte stream header.
pub fn stream_header() -> [u8; STREAM_HEADER_LEN] {
    let mut h = [0u8; STREAM_HEADER_LEN];
    h[0..8].copy_from_slice(STREAM_MAGIC);
    h[8..12].copy_from_slice(&STREAM_VERSION.to_le_bytes());
    h
}

/// Encode the 96-byte frame header of `o`.
pub fn encode_frame_header(o: &WireObject) -> [u8; FRAME_HEADER_LEN] {
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[0..4].copy_from_slice(FRAME_MAGIC);
    h[4] = o.kind.code();
    let (tag, comp, other, plen) = match &o.body {
        WireBody::Record {
            compression,
            payload,
        } => (TAG_RECORD, *compression, None, payload.len() as u64),
        WireBody::Delta {
            base,
            compression,
            payload,
        } => (TAG_DELTA, *compression, Some(*base), payload.len() as u64),
        WireBody::Chunked { list } => (TAG_CHUNKED, 0, Some(*list), 0),
        WireBody::Absent { policy } => (TAG_ABSENT, 0, None, policy.len() as u64),
    };
    h[5] = tag;
    h[6] = comp;
    h[8..40].copy_from_slice(o.id.as_bytes());
    h[40..48].copy_from_slice(&o.raw_len.to_le_bytes());
    if let Some(x) = other {
        h[48..80].copy_from_slice(x.as_bytes());
    }
    h[80..88].copy_from_slice(&plen.to_le_bytes());
    let sum = blake3::hash(&h[0..88]);
    h[88..96].copy_from_slice(&sum.as_bytes()[0..8]);
    h
}

/// What a decoded frame header announces (the payload follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Object kind.
    pub kind: Kind,
    /// Body tag.
    pub tag: u8,
    /// Compression code (records and deltas).
    pub compression: u8,
    /// Object id.
    pub id: ObjectId,
    /// Declared raw length.
    pub raw_len: u64,
    /// Delta base or chunk list, by tag.
    pub other: ObjectId,
    /// Payload length that follows.
    pub payload_len: u64,
}

impl FrameHeader {
    /// The object this header announces, with its payload.
    pub fn into_object(self, payload: Vec<u8>) -> Result<WireObject, RemoteError> {
        let body = match self.tag {
            TAG_RECORD => WireBody::Record {
                compression: self.compression,
                payload,
            },
            TAG_DELTA => WireBody::Delta {
                base: self.other,
                compression: self.compression,
                payload,
            },
            TAG_ABSENT => WireBody::Absent {
                policy: String::from_utf8(payload).map_err(|_| {
                    protocol(format!(
                        "object {}: the policy of an absent entry is not UTF-8",
                        self.id
                    ))
                })?,
            },
            _ => WireBody::Chunked { list: self.other },
        };
        Ok(WireObject {
            id: self.id,
            kind: self.kind,
            raw_len: self.raw_len,
            body,
        })
    }
}

/// Parse and check a frame header: checksum, magic, codes, and limits.
pub fn decode_frame_header(h: &[u8; FRAME_HEADER_LEN]) -> Result<FrameHeader, RemoteError> {
    if &h[0..4] != FRAME_MAGIC {
        return Err(protocol("bad object frame magic"));
    }
    let sum = blake3::hash(&h[0..88]);
    if h[88..96] != sum.as_bytes()[0..8] {
        return Err(protocol("object frame header checksum mismatch"));
    }
    let kind =
        Kind::from_code(h[4]).ok_or_else(|| protocol(format!("unknown kind code {}", h[4])))?;
    let tag = h[5];
    let compression = h[6];
    if h[7] != 0 {
        return Err(protocol("reserved frame byte is not zero"));
    }
    let id = ObjectId::from_slice(&h[8..40]).expect("32 bytes");
    let raw_len = u64::from_le_bytes(h[40..48].try_into().expect("8 bytes"));
    let other = ObjectId::from_slice(&h[48..80]).expect("32 bytes");
    let payload_len = u64::from_le_bytes(h[80..88].try_into().expect("8 bytes"));
    let limit = |what: String| RemoteError::LimitExceeded { what };
    match tag {
        TAG_RECORD | TAG_DELTA => {
            if !matches!(
                compression,
                COMPRESSION_NONE | COMPRESSION_ZSTD | COMPRESSION_PLANES
            ) {
                return Err(protocol(format!(
                    "object {id}: unknown compression code {compression}"
                )));
            }
            if raw_len > MAX_RECORD_RAW {
                return Err(limit(format!(
                    "object {id} declares {raw_len} raw bytes (at most {MAX_RECORD_RAW} per record)"
                )));
            }
            if payload_len > MAX_WIRE_PAYLOAD {
                return Err(limit(format!(
                    "object {id} carries a {payload_len}-byte payload (at most {MAX_WIRE_PAYLOAD})"
                )));
            }
            if tag == TAG_RECORD && other != ObjectId([0; 32]) {
                return Err(protocol(format!(
                    "object {id}: a plain record names a base"
                )));
            }
            if tag == TAG_DELTA && (kind != Kind::Bytes || compression != COMPRESSION_PLANES) {
                return Err(protocol(format!(
                    "object {id}: only planes-encoded bytes objects can be deltas"
                )));
            }
        }
        TAG_CHUNKED => {
            if kind != Kind::Bytes || compression != 0 || payload_len != 0 {
                return Err(protocol(format!(
                    "object {id}: a chunked alias must be a bytes object without payload"
                )));
            }
            if raw_len > MAX_CHUNKED_RAW {
                return Err(limit(format!(
                    "object {id} declares a {raw_len}-byte file (at most {MAX_CHUNKED_RAW})"
                )));
            }
        }
        TAG_ABSENT => {
            if kind != Kind::Bytes || compression != 0 || other != ObjectId([0; 32]) {
                return Err(protocol(format!(
                    "object {id}: an absent entry must be a bytes object naming nothing else"
                )));
            }
            if payload_len > MAX_ABSENT_POLICY {
                return Err(limit(format!(
                    "object {id}: an absent entry carries {payload_len} bytes of policy (at most {MAX_ABSENT_POLICY})"
                )));
            }
            if raw_len > MAX_CHUNKED_RAW {
                return Err(limit(format!(
                    "object {id} declares a {raw_len}-byte file (at most {MAX_CHUNKED_RAW})"
                )));
            }
        }
        t => return Err(protocol(format!("object {id}: unknown body tag {t}"))),
    }
    Ok(FrameHeader {
        kind,
        tag,
        compression,
        id,
        raw_len,
        other,
        payload_len,
    })
}

/// Writes a wire stream: header first, then [`WireWriter::write`] per
/// object, then [`WireWriter::finish`] for the end marker.
pub struct WireWriter<W: Write> {
    out: W,
    hasher: blake3::Hasher,
    count: u64,
    bytes: u64,
}

impl<W: Write> WireWriter<W> {
    /// Start a stream (writes the header).
    pub fn new(mut out: W) -> std::io::Result<Self> {
        let h = stream_header();
        out.write_all(&h)?;
        let mut hasher = blake3::Hasher::new();
        hasher.update(&h);
        Ok(WireWriter {
            out,
            hasher,
            count: 0,
            bytes: STREAM_HEADER_LEN as u64,
        })
    }

    /// Append one object frame.
    pub fn write(&mut self, o: &WireObject) -> std::io::Result<()> {
        let h = encode_frame_header(o);
        self.out.write_all(&h)?;
        self.hasher.update(&h);
        self.bytes += FRAME_HEADER_LEN as u64;
        let payload = o.body.payload();
        if !payload.is_empty() {
            self.out.write_all(payload)?;
            self.hasher.update(payload);
            self.bytes += payload.len() as u64;
        }
        self.count += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Write the end marker; returns the inner writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        let mut e = [0u8; END_LEN];
        e[0..4].copy_from_slice(END_MAGIC);
        e[8..16].copy_from_slice(&self.count.to_le_bytes());
        e[16..48].copy_from_slice(self.hasher.finalize().as_bytes());
        self.out.write_all(&e)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Reads a wire stream frame by frame, enforcing the limits.
pub struct WireReader<R: Read> {
    input: R,
    hasher: blake3::Hasher,
    count: u64,
    bytes: u64,
    done: bool,
    max_objects: u64,
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8], what: &str) -> Result<(), RemoteError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => protocol(format!("stream truncated in {what}")),
        _ => protocol(format!("reading {what}: {e}")),
    })
}

impl<R: Read> WireReader<R> {
    /// Read and check the stream header.
    pub fn new(mut input: R) -> Result<Self, RemoteError> {
        let mut h = [0u8; STREAM_HEADER_LEN];
        read_full(&mut input, &mut h, "the stream header")?;
        if &h[0..8] != STREAM_MAGIC {
            return Err(protocol("not a bat wire stream (bad magic)"));
        }
        let v = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
        if v != STREAM_VERSION || h[12..16] != [0, 0, 0, 0] {
            return Err(protocol(format!("unsupported wire stream version {v}")));
        }
        let mut hasher = blake3::Hasher::new();
        hasher.update(&h);
        Ok(WireReader {
            input,
            hasher,
            count: 0,
            bytes: STREAM_HEADER_LEN as u64,
            done: false,
            max_objects: u64::MAX,
        })
    }

    /// Refuse streams with more than `n` objects.
    pub fn with_max_objects(mut self, n: u64) -> Self {
        self.max_objects = n;
        self
    }

    /// Bytes consumed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The next object, or `None` after a verified end marker.
    pub fn next_object(&mut self) -> Result<Option<WireObject>, RemoteError> {
        if self.done {
            return Ok(None);
        }
        let mut magic = [0u8; 4];
        read_full(&mut self.input, &mut magic, "a frame")?;
        if &magic == END_MAGIC {
            let mut rest = [0u8; END_LEN - 4];
            read_full(&mut self.input, &mut rest, "the end marker")?;
            if rest[0..4] != [0, 0, 0, 0] {
                return Err(protocol("reserved end-marker bytes are not zero"));
            }
            let n = u64::from_le_bytes(rest[4..12].try_into().expect("8 bytes"));
            if n != self.count {
                return Err(protocol(format!(
                    "end marker counts {n} objects, the stream had {}",
                    self.count
                )));
            }
            if rest[12..44] != *self.hasher.finalize().as_bytes() {
                return Err(protocol("stream checksum mismatch (damaged stream)"));
            }
            self.bytes += END_LEN as u64;
            self.done = true;
            return Ok(None);
        }
        if self.count >= self.max_objects {
            return Err(RemoteError::LimitExceeded {
                what: format!("more than {} objects in one stream", self.max_objects),
            });
        }
        let mut h = [0u8; FRAME_HEADER_LEN];
        h[0..4].copy_from_slice(&magic);
        read_full(&mut self.input, &mut h[4..], "a frame header")?;
        let fh = decode_frame_header(&h)?;
        self.hasher.update(&h);
        let mut payload = Vec::with_capacity(fh.payload_len.min(1 << 20) as usize);
        let got = (&mut self.input)
            .take(fh.payload_len)
            .read_to_end(&mut payload)
            .map_err(|e| protocol(format!("reading the payload of {}: {e}", fh.id)))?;
        if got as u64 != fh.payload_len {
            return Err(protocol(format!(
                "stream truncated in the payload of {} ({got} of {} bytes)",
                fh.id, fh.payload_len
            )));
        }
        self.hasher.update(&payload);
        self.bytes += FRAME_HEADER_LEN as u64 + fh.payload_len;
        self.count += 1;
        Ok(Some(fh.into_object(payload)?))
    }

    /// The inner reader (positioned after the end marker once `next_object`
    /// returned `None`).
    pub fn into_inner(self) -> R {
        self.input
    }
}

impl<R: Read> Iterator for WireReader<R> {
    type Item = Result<WireObject, RemoteError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_object() {
            Ok(Some(o)) => Some(Ok(o)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Encode a whole stream into memory.
pub fn encode_stream(objects: &[WireObject]) -> Vec<u8> {
    let mut w = WireWriter::new(Vec::new()).expect("writing to memory cannot fail");
    for o in objects {
        w.write(o).expect("writing to memory cannot fail");
    }
    w.finish().expect("writing to memory cannot fail")
}

/// Decode a whole in-memory stream; trailing bytes after the end marker are
/// an error.
pub fn decode_stream(bytes: &[u8]) -> Result<Vec<WireObject>, RemoteError> {
    let mut r = WireReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(o) = r.next_object()? {
        out.push(o);
    }
    if !r.into_inner().is_empty() {
        return Err(protocol("trailing bytes after the end marker"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<WireObject> {
        let data = b"hello wire".to_vec();
        vec![
            WireObject {
                id: ObjectId::of_bytes(&data),
                kind: Kind::Bytes,
                raw_len: data.len() as u64,
                body: WireBody::Record {
                    compression: 0,
                    payload: data,
                },
            },
            WireObject {
                id: ObjectId([7; 32]),
                kind: Kind::Bytes,
                raw_len: 16,
                body: WireBody::Delta {
                    base: ObjectId([8; 32]),
                    compression: COMPRESSION_PLANES,
                    payload: vec![1, 2, 3],
                },
            },
            WireObject {
                id: ObjectId([9; 32]),
                kind: Kind::Bytes,
                raw_len: 10 << 20,
                body: WireBody::Chunked {
                    list: ObjectId([10; 32]),
                },
            },
        ]
    }

    #[test]
    fn round_trips() {
        let objs = sample();
        let bytes = encode_stream(&objs);
        assert_eq!(
            bytes.len(),
            STREAM_HEADER_LEN + 3 * FRAME_HEADER_LEN + 10 + 3 + END_LEN
        );
        assert_eq!(decode_stream(&bytes).expect("decodes"), objs);
        assert_eq!(decode_stream(&encode_stream(&[])).expect("empty"), vec![]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode_stream(&sample());
        for n in 0..bytes.len() {
            let e = decode_stream(&bytes[..n]).expect_err("truncated");
            assert!(matches!(e, RemoteError::Protocol { .. }), "{n}: {e}");
        }
    }

    #[test]
    fn every_flipped_byte_is_an_error() {
        let bytes = encode_stream(&sample());
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode_stream(&b).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn limits_are_enforced_before_allocation() {
        let mut o = sample().remove(0);
        o.raw_len = MAX_RECORD_RAW + 1;
        let bytes = encode_stream(&[o]);
        let e = decode_stream(&bytes).expect_err("too large");
        assert!(matches!(e, RemoteError::LimitExceeded { .. }), "{e}");
        // A header announcing a huge payload, then nothing: an error, no
        // allocation of the announced size.
        let mut h = encode_frame_header(&sample()[0]);
        h[80..88].copy_from_slice(&(MAX_WIRE_PAYLOAD + 1).to_le_bytes());
        let sum = blake3::hash(&h[0..88]);
        h[88..96].copy_from_slice(&sum.as_bytes()[0..8]);
        let mut s = stream_header().to_vec();
        s.extend_from_slice(&h);
        let e = decode_stream(&s).expect_err("oversized header");
        assert!(matches!(e, RemoteError::LimitExceeded { .. }), "{e}");
        let mut h2 = encode_frame_header(&sample()[0]);
        h2[80..88].copy_from_slice(&(200u64 << 20).to_le_bytes());
        let sum = blake3::hash(&h2[0..88]);
        h2[88..96].copy_from_slice(&sum.as_bytes()[0..8]);
        let mut s = stream_header().to_vec();
        s.extend_from_slice(&h2);
        s.extend_from_slice(b"short");
        let e = decode_stream(&s).expect_err("truncated payload");
        assert!(e.to_string().contains("truncated"), "{e}");
    }

    #[test]
    fn object_count_limit() {
        let bytes = encode_stream(&sample());
        let mut r = WireReader::new(bytes.as_slice())
            .expect("header")
            .with_max_objects(2);
        assert!(r.next_object().is_ok());
        assert!(r.next_object().is_ok());
        assert!(matches!(
            r.next_object(),
            Err(RemoteError::LimitExceeded { .. })
        ));
    }
}
