//! Encoding of single wire objects for remotes that store one object per
//! key (S3), and raw-byte recovery of small structured objects.
//!
//! INTERIM: replaced by `bat_ledger::remote::wire` once merged.

use bat_ledger::{Kind, ObjectId};

use super::iface::{RemoteError, WireBody, WireObject};

/// Most raw bytes of one object (the pack record limit).
pub const MAX_RAW: u64 = 256 << 20;

fn corrupt(id: ObjectId, reason: impl Into<String>) -> RemoteError {
    RemoteError::Corrupt {
        id,
        reason: reason.into(),
    }
}

/// One object as bytes.
pub fn encode_one(obj: &WireObject) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"BATW");
    out.push(obj.kind.code());
    out.extend_from_slice(obj.id.as_bytes());
    out.extend_from_slice(&obj.raw_len.to_le_bytes());
    match &obj.body {
        WireBody::Record {
            compression,
            payload,
        } => {
            out.push(1);
            out.push(*compression);
            out.extend_from_slice(payload);
        }
        WireBody::Delta {
            base,
            compression,
            payload,
        } => {
            out.push(2);
            out.extend_from_slice(base.as_bytes());
            out.push(*compression);
            out.extend_from_slice(payload);
        }
        WireBody::Chunked { list } => {
            out.push(3);
            out.extend_from_slice(list.as_bytes());
        }
    }
    out
}

/// Decode what [`encode_one`] wrote (structure only; contents are verified
/// by the importing ledger).
pub fn decode_one(b: &[u8]) -> Result<WireObject, RemoteError> {
    let p = |r: &str| RemoteError::Protocol {
        reason: format!("bad object frame: {r}"),
    };
    if b.len() < 46 || &b[..4] != b"BATW" {
        return Err(p("bad header"));
    }
    let kind = Kind::from_code(b[4]).ok_or_else(|| p("unknown kind"))?;
    let id = ObjectId::from_slice(&b[5..37]).ok_or_else(|| p("id"))?;
    let raw_len = u64::from_le_bytes(b[37..45].try_into().expect("8 bytes"));
    if raw_len > MAX_RAW {
        return Err(corrupt(id, format!("raw length {raw_len} over the limit")));
    }
    let rest = &b[46..];
    let body = match b[45] {
        1 if !rest.is_empty() => WireBody::Record {
            compression: rest[0],
            payload: rest[1..].to_vec(),
        },
        2 if rest.len() >= 33 => WireBody::Delta {
            base: ObjectId::from_slice(&rest[..32]).ok_or_else(|| p("base"))?,
            compression: rest[32],
            payload: rest[33..].to_vec(),
        },
        3 if rest.len() == 32 => WireBody::Chunked {
            list: ObjectId::from_slice(rest).ok_or_else(|| p("list"))?,
        },
        _ => return Err(p("bad body")),
    };
    Ok(WireObject {
        id,
        kind,
        raw_len,
        body,
    })
}

/// The raw bytes of a self-contained record (compression none or zstd),
/// decompressed within `raw_len`; digest checked by the caller.
pub fn raw_bytes(obj: &WireObject) -> Result<Vec<u8>, RemoteError> {
    let WireBody::Record {
        compression,
        payload,
    } = &obj.body
    else {
        return Err(corrupt(obj.id, "expected a self-contained record"));
    };
    if obj.raw_len > MAX_RAW {
        return Err(corrupt(obj.id, "raw length over the limit"));
    }
    let raw = match compression {
        0 => payload.clone(),
        1 => zstd::bulk::decompress(payload, obj.raw_len as usize)
            .map_err(|e| corrupt(obj.id, format!("zstd: {e}")))?,
        c => return Err(corrupt(obj.id, format!("compression {c} not allowed here"))),
    };
    if raw.len() as u64 != obj.raw_len {
        return Err(corrupt(obj.id, "length mismatch"));
    }
    Ok(raw)
}
