//! One wire object per stored key (the S3 layout): a complete wire stream
//! with one frame, and the raw bytes of small self-contained records.

use bat_ledger::remote::wire::{decode_stream, WireWriter};
use bat_ledger::remote::{RemoteError, WireBody, WireObject};

/// Most raw bytes of a structured object read back for checks (commits).
pub const MAX_STRUCTURED_RAW: u64 = 64 << 20;

fn corrupt(obj: &WireObject, reason: impl Into<String>) -> RemoteError {
    RemoteError::Corrupt {
        id: obj.id,
        reason: reason.into(),
    }
}

/// One object as a one-frame wire stream.
pub fn encode_one(obj: &WireObject) -> Vec<u8> {
    let mut w = WireWriter::new(Vec::with_capacity(obj.payload_len() as usize + 256))
        .expect("writing to memory cannot fail");
    w.write(obj).expect("writing to memory cannot fail");
    w.finish().expect("writing to memory cannot fail")
}

/// Decode a one-frame wire stream (limits and checksums of the wire format
/// apply; the object itself is verified by whoever imports it).
pub fn decode_one(bytes: &[u8]) -> Result<WireObject, RemoteError> {
    let mut objs = decode_stream(bytes)?;
    if objs.len() != 1 {
        return Err(RemoteError::Protocol {
            reason: format!("an object key holds {} objects, expected 1", objs.len()),
        });
    }
    Ok(objs.pop().expect("length checked"))
}

/// The raw bytes of a self-contained record stored plainly or as one zstd
/// frame, decompressed to at most its declared length (the caller checks
/// the digest).
pub fn raw_bytes(obj: &WireObject) -> Result<Vec<u8>, RemoteError> {
    let WireBody::Record {
        compression,
        payload,
    } = &obj.body
    else {
        return Err(corrupt(obj, "expected a self-contained record"));
    };
    if obj.raw_len > MAX_STRUCTURED_RAW {
        return Err(corrupt(
            obj,
            format!("declared length {} is too large", obj.raw_len),
        ));
    }
    let raw = match compression {
        0 => payload.clone(),
        1 => zstd::bulk::decompress(payload, obj.raw_len as usize)
            .map_err(|e| corrupt(obj, format!("zstd: {e}")))?,
        c => {
            return Err(corrupt(
                obj,
                format!("compression {c} is not used for this kind"),
            ))
        }
    };
    if raw.len() as u64 != obj.raw_len {
        return Err(corrupt(
            obj,
            format!("decoded to {} bytes, declared {}", raw.len(), obj.raw_len),
        ));
    }
    Ok(raw)
}
