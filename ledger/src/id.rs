//! Object identities: 32-byte BLAKE3 digests printed as 64 lowercase hex.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Derive-key context for tree objects (domain separation from file bytes).
pub const CONTEXT_TREE: &str = "bat-ledger v1 tree";
/// Derive-key context for commit objects.
pub const CONTEXT_COMMIT: &str = "bat-ledger v1 commit";
/// Derive-key context for chunk-list objects.
pub const CONTEXT_CHUNK_LIST: &str = "bat-ledger v1 chunk list";

/// A 32-byte BLAKE3-256 object id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub [u8; 32]);

impl ObjectId {
    /// The id of a byte object (file contents, chunk, symlink target): plain
    /// BLAKE3 of the bytes, identical to `b3sum`.
    pub fn of_bytes(data: &[u8]) -> ObjectId {
        ObjectId(*blake3::hash(data).as_bytes())
    }

    /// The id of a structured object: BLAKE3 in derive_key mode with the
    /// kind's context string, which can never equal a plain hash.
    pub fn of_structured(context: &str, encoding: &[u8]) -> ObjectId {
        let mut h = blake3::Hasher::new_derive_key(context);
        h.update(encoding);
        ObjectId(*h.finalize().as_bytes())
    }

    /// The raw digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Build from a 32-byte slice; `None` if the length is wrong.
    pub fn from_slice(s: &[u8]) -> Option<ObjectId> {
        let arr: [u8; 32] = s.try_into().ok()?;
        Some(ObjectId(arr))
    }

    /// 64-char lowercase hex.
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// Parse exactly 64 hex characters (either case).
    pub fn from_hex(s: &str) -> Option<ObjectId> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        let b = s.as_bytes();
        for (i, o) in out.iter_mut().enumerate() {
            *o = (hex_val(b[2 * i])? << 4) | hex_val(b[2 * i + 1])?;
        }
        Some(ObjectId(out))
    }

    /// The first 12 hex characters, for human output.
    pub fn short(&self) -> String {
        let hex = self.hex();
        std::str::from_utf8(&hex[..12])
            .expect("hex digits are ASCII")
            .to_string()
    }

    /// The 64 lowercase hex digits, on the stack: ids are printed for every
    /// line of `bat log`, where formatting byte by byte was a fifth of the
    /// time.
    fn hex(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(b >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
        }
        out
    }
}

/// Value of one hex digit, if it is one.
pub(crate) fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex();
        f.write_str(std::str::from_utf8(&hex).expect("hex digits are ASCII"))
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self)
    }
}

impl FromStr for ObjectId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObjectId::from_hex(s).ok_or_else(|| format!("not a 64-hex object id: {s:?}"))
    }
}

impl Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let hex = self.hex();
        s.serialize_str(std::str::from_utf8(&hex).expect("hex digits are ASCII"))
    }
}

impl<'de> Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ObjectId::from_hex(&s).ok_or_else(|| serde::de::Error::custom("expected 64 hex chars"))
    }
}

macro_rules! typed_id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub ObjectId);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
        impl From<$name> for ObjectId {
            fn from(v: $name) -> ObjectId {
                v.0
            }
        }
        impl $name {
            /// The untyped object id.
            pub fn id(&self) -> ObjectId {
                self.0
            }
        }
    };
}

typed_id!(
    /// The id of a commit object.
    CommitId
);
typed_id!(
    /// The id of a tree object.
    TreeId
);

#[cfg(test)]
mod tests {
    use super::ObjectId;
    use proptest::prelude::*;

    proptest! {
        /// The table-driven hex agrees with per-byte formatting, parses back,
        /// and serializes to the same string.
        #[test]
        fn hex_matches_byte_formatting(bytes in proptest::array::uniform32(any::<u8>())) {
            let id = ObjectId(bytes);
            let slow: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(id.to_string(), slow.clone());
            prop_assert_eq!(id.short(), slow[..12].to_string());
            prop_assert_eq!(ObjectId::from_hex(&slow), Some(id));
            prop_assert_eq!(serde_json::to_string(&id).expect("serializes"), format!("\"{slow}\""));
        }
    }
}
