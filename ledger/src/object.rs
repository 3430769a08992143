//! Structured objects (tree, commit, chunk list) and their canonical binary
//! encodings. Encodings are byte-exact and documented in FORMAT.md; decoders
//! reject anything that would not re-encode to the same bytes, so an id
//! identifies exactly one value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::id::{CommitId, ObjectId, TreeId, CONTEXT_CHUNK_LIST, CONTEXT_COMMIT, CONTEXT_TREE};

/// Encoding version byte that starts every structured object.
const ENCODING_VERSION: u8 = 1;

/// Kind of a stored object (also the `kind` byte of pack records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Raw bytes: a small file, a chunk of a large file, a symlink target.
    Bytes,
    /// A tree.
    Tree,
    /// A commit.
    Commit,
    /// The ordered chunk list of a large file.
    ChunkList,
}

impl Kind {
    /// The on-disk code.
    pub fn code(self) -> u8 {
        match self {
            Kind::Bytes => 1,
            Kind::Tree => 2,
            Kind::Commit => 3,
            Kind::ChunkList => 4,
        }
    }
    /// Inverse of [`Kind::code`].
    pub fn from_code(c: u8) -> Option<Kind> {
        Some(match c {
            1 => Kind::Bytes,
            2 => Kind::Tree,
            3 => Kind::Commit,
            4 => Kind::ChunkList,
            _ => return None,
        })
    }
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bytes => "bytes",
            Kind::Tree => "tree",
            Kind::Commit => "commit",
            Kind::ChunkList => "chunk list",
        }
    }
    /// The id of `raw` bytes of this kind.
    pub fn id_of(self, raw: &[u8]) -> ObjectId {
        match self {
            Kind::Bytes => ObjectId::of_bytes(raw),
            Kind::Tree => ObjectId::of_structured(CONTEXT_TREE, raw),
            Kind::Commit => ObjectId::of_structured(CONTEXT_COMMIT, raw),
            Kind::ChunkList => ObjectId::of_structured(CONTEXT_CHUNK_LIST, raw),
        }
    }
}

/// The mode of a tree entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A regular file.
    File,
    /// A regular file with an executable bit.
    Executable,
    /// A symlink; the id names a bytes object holding the target.
    Symlink,
    /// A subdirectory; the id names a tree.
    Tree,
}

impl Mode {
    fn code(self) -> u8 {
        match self {
            Mode::File => 1,
            Mode::Executable => 2,
            Mode::Symlink => 3,
            Mode::Tree => 4,
        }
    }
    fn from_code(c: u8) -> Option<Mode> {
        Some(match c {
            1 => Mode::File,
            2 => Mode::Executable,
            3 => Mode::Symlink,
            4 => Mode::Tree,
            _ => return None,
        })
    }
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    /// Validated file name (one path component, UTF-8).
    pub name: String,
    /// What the entry is.
    pub mode: Mode,
    /// File/symlink-target bytes id, or subtree id.
    pub id: ObjectId,
    /// Byte length of the file or symlink target; 0 for subtrees.
    pub size: u64,
}

/// A directory: entries sorted by name bytes, names unique.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tree {
    /// The entries, strictly ascending by name.
    pub entries: Vec<TreeEntry>,
}

/// Check that `name` can be a tree entry name.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty file name".into());
    }
    if name == "." || name == ".." {
        return Err(format!("{name:?} is not allowed as a file name"));
    }
    if name.contains('/') {
        return Err("file name contains '/'".into());
    }
    if name.contains('\0') {
        return Err("file name contains NUL".into());
    }
    if name.len() > u16::MAX as usize {
        return Err("file name longer than 65535 bytes".into());
    }
    Ok(())
}

impl Tree {
    /// Build a tree from entries in any order; fails on invalid or duplicate names.
    pub fn new(mut entries: Vec<TreeEntry>) -> Result<Tree, String> {
        entries.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        for w in entries.windows(2) {
            if w[0].name == w[1].name {
                return Err(format!("duplicate entry name {:?}", w[0].name));
            }
        }
        for e in &entries {
            validate_name(&e.name)?;
        }
        Ok(Tree { entries })
    }

    /// Canonical encoding (see FORMAT.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + self.entries.len() * 64);
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            out.push(e.mode.code());
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(e.name.as_bytes());
            out.extend_from_slice(e.id.as_bytes());
            out.extend_from_slice(&e.size.to_le_bytes());
        }
        out
    }

    /// The tree's id.
    pub fn id(&self) -> TreeId {
        TreeId(Kind::Tree.id_of(&self.encode()))
    }

    /// Strict decoder: rejects unsorted, duplicate, invalid names and trailing bytes.
    pub fn decode(buf: &[u8]) -> Result<Tree, String> {
        let mut r = Reader::new(buf);
        r.version()?;
        let n = r.u32()? as usize;
        let mut entries = Vec::with_capacity(n.min(buf.len() / 43 + 1));
        for _ in 0..n {
            let mode = Mode::from_code(r.u8()?).ok_or("unknown entry mode")?;
            let len = r.u16()? as usize;
            let name = r.string(len)?;
            validate_name(&name)?;
            let id = r.id()?;
            let size = r.u64()?;
            entries.push(TreeEntry {
                name,
                mode,
                id,
                size,
            });
        }
        r.end()?;
        for w in entries.windows(2) {
            if w[0].name.as_bytes() >= w[1].name.as_bytes() {
                return Err("entries not strictly sorted by name".into());
            }
        }
        Ok(Tree { entries })
    }
}

/// A scalar value of an indexed commit field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldValue {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// A finite float.
    Float(f64),
    /// A string.
    Str(String),
}

impl FieldValue {
    /// Convert a JSON scalar; `None` for arrays, objects, null, non-finite
    /// or out-of-range numbers.
    pub fn from_json(v: &serde_json::Value) -> Option<FieldValue> {
        match v {
            serde_json::Value::Bool(b) => Some(FieldValue::Bool(*b)),
            serde_json::Value::String(s) => Some(FieldValue::Str(s.clone())),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Some(FieldValue::Int(i))
                } else {
                    n.as_f64().filter(|f| f.is_finite()).map(FieldValue::Float)
                }
            }
            _ => None,
        }
    }
}

/// A commit: a tree plus history and caller metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// The root tree.
    pub tree: TreeId,
    /// Parent commits (first parent = previous tip of the branch).
    pub parents: Vec<CommitId>,
    /// Who made it (free text).
    pub author: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// The message.
    pub message: String,
    /// Opaque caller metadata (any JSON value; `null` when absent).
    pub metadata: serde_json::Value,
    /// Caller-declared indexed scalar fields, indexed by the catalog.
    pub fields: BTreeMap<String, FieldValue>,
}

impl Commit {
    /// Canonical encoding (see FORMAT.md). Fails on non-finite floats or
    /// oversize strings, which cannot be encoded canonically.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(256 + self.message.len());
        out.push(ENCODING_VERSION);
        out.extend_from_slice(self.tree.0.as_bytes());
        if self.parents.len() > u16::MAX as usize {
            return Err("too many parents".into());
        }
        out.extend_from_slice(&(self.parents.len() as u16).to_le_bytes());
        for p in &self.parents {
            out.extend_from_slice(p.0.as_bytes());
        }
        out.extend_from_slice(&self.time.to_le_bytes());
        put_str32(&mut out, &self.author)?;
        put_str32(&mut out, &self.message)?;
        let meta = serde_json::to_vec(&self.metadata).map_err(|e| format!("metadata: {e}"))?;
        put_bytes32(&mut out, &meta)?;
        if self.fields.len() > u16::MAX as usize {
            return Err("too many indexed fields".into());
        }
        out.extend_from_slice(&(self.fields.len() as u16).to_le_bytes());
        for (k, v) in &self.fields {
            if k.is_empty() || k.len() > u16::MAX as usize {
                return Err(format!("field name {k:?} must be 1..65535 bytes"));
            }
            out.extend_from_slice(&(k.len() as u16).to_le_bytes());
            out.extend_from_slice(k.as_bytes());
            match v {
                FieldValue::Str(s) => {
                    out.push(0);
                    put_str32(&mut out, s)?;
                }
                FieldValue::Int(i) => {
                    out.push(1);
                    out.extend_from_slice(&i.to_le_bytes());
                }
                FieldValue::Float(f) => {
                    if !f.is_finite() {
                        return Err(format!("field {k:?} is not a finite number"));
                    }
                    out.push(2);
                    out.extend_from_slice(&f.to_bits().to_le_bytes());
                }
                FieldValue::Bool(b) => {
                    out.push(3);
                    out.push(u8::from(*b));
                }
            }
        }
        Ok(out)
    }

    /// The commit's id.
    pub fn id(&self) -> Result<CommitId, String> {
        Ok(CommitId(Kind::Commit.id_of(&self.encode()?)))
    }

    /// Strict decoder: the metadata must be canonical JSON (what
    /// [`Commit::encode`] writes), so decoding and re-encoding gives the
    /// same bytes and the same id.
    pub fn decode(buf: &[u8]) -> Result<Commit, String> {
        let p = CommitParts::decode(buf)?;
        let metadata: serde_json::Value =
            serde_json::from_slice(p.metadata).map_err(|e| format!("metadata JSON: {e}"))?;
        if serde_json::to_vec(&metadata).map_err(|e| e.to_string())? != p.metadata {
            return Err("metadata JSON is not canonical".into());
        }
        Ok(Commit {
            tree: p.tree,
            parents: p.parents,
            author: p.author,
            time: p.time,
            message: p.message,
            metadata,
            fields: p.fields,
        })
    }
}

/// A commit whose metadata is kept as the stored JSON text instead of a
/// decoded tree: for walks over long histories that print or filter the
/// metadata, where decoding every commit's metadata into a
/// [`serde_json::Value`] and encoding it again was most of the time.
#[derive(Debug, Clone)]
pub struct RawCommit {
    /// The root tree.
    pub tree: TreeId,
    /// Parent commits (first parent = previous tip of the branch).
    pub parents: Vec<CommitId>,
    /// Who made it (free text).
    pub author: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// The message.
    pub message: String,
    /// The metadata exactly as stored (canonical JSON text).
    pub metadata: Box<serde_json::value::RawValue>,
    /// Caller-declared indexed scalar fields.
    pub fields: BTreeMap<String, FieldValue>,
}

impl RawCommit {
    /// Decode a commit object's bytes. The metadata's JSON syntax is
    /// checked, its canonical form is not: use this only on bytes that
    /// passed [`Commit::decode`] when they entered the ledger (the commit
    /// index holds only such bodies, each checked against its id when read).
    pub fn decode(buf: &[u8]) -> Result<RawCommit, String> {
        let p = CommitParts::decode(buf)?;
        let text = std::str::from_utf8(p.metadata).map_err(|e| format!("metadata JSON: {e}"))?;
        let metadata = serde_json::value::RawValue::from_string(text.to_owned())
            .map_err(|e| format!("metadata JSON: {e}"))?;
        Ok(RawCommit {
            tree: p.tree,
            parents: p.parents,
            author: p.author,
            time: p.time,
            message: p.message,
            metadata,
            fields: p.fields,
        })
    }

    /// The same commit with its metadata as stored (for commits read
    /// through the strict decoder).
    pub fn from_commit(c: Commit) -> RawCommit {
        let text = serde_json::to_string(&c.metadata).expect("a JSON value encodes");
        RawCommit {
            tree: c.tree,
            parents: c.parents,
            author: c.author,
            time: c.time,
            message: c.message,
            metadata: serde_json::value::RawValue::from_string(text)
                .expect("serde_json's own output is JSON"),
            fields: c.fields,
        }
    }
}

/// A commit object's fields with the metadata still as bytes: the one
/// parser behind [`Commit::decode`] and [`RawCommit::decode`].
struct CommitParts<'a> {
    tree: TreeId,
    parents: Vec<CommitId>,
    author: String,
    time: i64,
    message: String,
    metadata: &'a [u8],
    fields: BTreeMap<String, FieldValue>,
}

impl<'a> CommitParts<'a> {
    fn decode(buf: &'a [u8]) -> Result<CommitParts<'a>, String> {
        let mut r = Reader::new(buf);
        r.version()?;
        let tree = TreeId(r.id()?);
        let np = r.u16()? as usize;
        let mut parents = Vec::with_capacity(np);
        for _ in 0..np {
            parents.push(CommitId(r.id()?));
        }
        let time = r.u64()? as i64;
        let n = r.u32()? as usize;
        let author = r.string(n)?;
        let n = r.u32()? as usize;
        let message = r.string(n)?;
        let n = r.u32()? as usize;
        let metadata = r.take(n)?;
        let fields = decode_fields(&mut r)?;
        r.end()?;
        Ok(CommitParts {
            tree,
            parents,
            author,
            time,
            message,
            metadata,
            fields,
        })
    }
}

/// The indexed fields of a commit: strictly sorted, typed, finite.
fn decode_fields(r: &mut Reader<'_>) -> Result<BTreeMap<String, FieldValue>, String> {
    let nf = r.u16()? as usize;
    let mut fields = BTreeMap::new();
    let mut last: Option<String> = None;
    for _ in 0..nf {
        let kl = r.u16()? as usize;
        let key = r.string(kl)?;
        if key.is_empty() {
            return Err("empty field name".into());
        }
        if let Some(l) = &last {
            if l.as_bytes() >= key.as_bytes() {
                return Err("fields not strictly sorted".into());
            }
        }
        let v = match r.u8()? {
            0 => {
                let n = r.u32()? as usize;
                FieldValue::Str(r.string(n)?)
            }
            1 => FieldValue::Int(r.u64()? as i64),
            2 => {
                let f = f64::from_bits(r.u64()?);
                if !f.is_finite() {
                    return Err("non-finite float field".into());
                }
                FieldValue::Float(f)
            }
            3 => match r.u8()? {
                0 => FieldValue::Bool(false),
                1 => FieldValue::Bool(true),
                _ => return Err("bad bool".into()),
            },
            _ => return Err("unknown field tag".into()),
        };
        last = Some(key.clone());
        fields.insert(key, v);
    }
    Ok(fields)
}

/// One chunk of a large file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRef {
    /// Plain BLAKE3 of the chunk bytes.
    pub id: ObjectId,
    /// Chunk length in bytes (> 0).
    pub len: u32,
}

/// The ordered chunks of a large file. It names the file it describes, so the
/// catalog's file -> chunk list mapping can be rebuilt from objects alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkList {
    /// Plain BLAKE3 of the whole file.
    pub file: ObjectId,
    /// Total length (sum of chunk lengths).
    pub total: u64,
    /// Chunks in file order.
    pub chunks: Vec<ChunkRef>,
}

impl ChunkList {
    /// Canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(45 + self.chunks.len() * 36);
        out.push(ENCODING_VERSION);
        out.extend_from_slice(self.file.as_bytes());
        out.extend_from_slice(&self.total.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for c in &self.chunks {
            out.extend_from_slice(c.id.as_bytes());
            out.extend_from_slice(&c.len.to_le_bytes());
        }
        out
    }

    /// The chunk list's id.
    pub fn id(&self) -> ObjectId {
        Kind::ChunkList.id_of(&self.encode())
    }

    /// Strict decoder (lengths must be positive and sum to `total`).
    pub fn decode(buf: &[u8]) -> Result<ChunkList, String> {
        let mut r = Reader::new(buf);
        r.version()?;
        let file = r.id()?;
        let total = r.u64()?;
        let n = r.u32()? as usize;
        let mut chunks = Vec::with_capacity(n.min(buf.len() / 36 + 1));
        let mut sum: u64 = 0;
        for _ in 0..n {
            let id = r.id()?;
            let len = r.u32()?;
            if len == 0 {
                return Err("zero-length chunk".into());
            }
            sum = sum.checked_add(u64::from(len)).ok_or("length overflow")?;
            chunks.push(ChunkRef { id, len });
        }
        r.end()?;
        if sum != total {
            return Err(format!("chunk lengths sum to {sum}, expected {total}"));
        }
        Ok(ChunkList {
            file,
            total,
            chunks,
        })
    }
}

fn put_bytes32(out: &mut Vec<u8>, b: &[u8]) -> Result<(), String> {
    let n = u32::try_from(b.len()).map_err(|_| "string longer than 4 GiB".to_string())?;
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(b);
    Ok(())
}

fn put_str32(out: &mut Vec<u8>, s: &str) -> Result<(), String> {
    put_bytes32(out, s.as_bytes())
}

/// Bounds-checked little-endian reader.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or("truncated")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn id(&mut self) -> Result<ObjectId, String> {
        Ok(ObjectId(self.take(32)?.try_into().expect("32 bytes")))
    }
    fn string(&mut self, n: usize) -> Result<String, String> {
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8".to_string())
    }
    fn version(&mut self) -> Result<(), String> {
        match self.u8()? {
            ENCODING_VERSION => Ok(()),
            v => Err(format!("unknown encoding version {v}")),
        }
    }
    fn end(&self) -> Result<(), String> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err("trailing bytes".into())
        }
    }
}
