//! Whole-file digests of chunked files assembled from their pieces in any
//! order.
//!
//! A chunked file's id is the BLAKE3 hash of all its bytes. An import
//! used to check it by decoding every chunk of the file once more after
//! storing it (and with it each chunk's whole delta chain). BLAKE3 is a
//! tree hash: every node of the tree over the file covers a fixed byte
//! range and its chaining value depends only on those bytes and where they
//! start. So a piece decoded (and checked against its own id) while it is
//! imported can hand over, there and then, the chaining values of the tree
//! nodes that lie inside it, plus the few bytes of the 1 KiB BLAKE3 chunks
//! it shares with its neighbours. Once every piece has been seen the root
//! is merged from those values: the same hash, computed from the same
//! bytes, without decoding anything a second time. Pieces not seen during
//! the import (stored before, or repeated) are decoded from the store as
//! before.

use std::collections::HashMap;
use std::sync::Mutex;

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};

use crate::id::ObjectId;
use crate::object::ChunkList;

/// BLAKE3's chunk length (the leaves of its tree).
const LEAF: u64 = 1024;

/// Places one piece is hashed into when it is offered. A piece listed more
/// often (a run of zeros is one small record named many times) fills the
/// rest from the store, where the import's budget for decoding repeated
/// pieces ([`crate::remote::import`]'s `VERIFY_FACTOR`) applies: an
/// offered piece never costs more than this many hashes of its bytes.
const MAX_PLACES: usize = 16;

/// Pieces one [`FileDigests`] assembles at most (a piece's share of its
/// tree is about 3 KiB: some 25 chaining values and up to two partial
/// leaves), so the trees of one transfer stay under about 50 MB: 16,384
/// pieces of 4 MiB are 64 GiB of versions. The files of a larger transfer
/// beyond that are checked by decoding their pieces again, as before.
pub const MAX_PIECES: usize = 16_384;

/// One byte range of the tree: (start, length).
type Node = (u64, u64);

/// What one piece contributes: chaining values of the tree nodes that lie
/// inside it, and its bytes in leaves it shares with a neighbour.
#[derive(Default)]
struct Contribution {
    cvs: Vec<(Node, ChainingValue)>,
    /// (leaf start, (offset of the bytes, the bytes)).
    frags: Vec<(u64, (u64, Vec<u8>))>,
}

/// The tree of one chunked file being assembled.
#[derive(Default)]
pub struct FileTree {
    total: u64,
    /// (chunk id, offset, length) of every piece, in file order.
    pieces: Vec<(ObjectId, u64, u64)>,
    done: Vec<bool>,
    cvs: HashMap<Node, ChainingValue>,
    frags: HashMap<u64, Vec<(u64, Vec<u8>)>>,
}

impl FileTree {
    /// An empty tree for the file `list` describes.
    pub fn new(list: &ChunkList) -> FileTree {
        let mut pieces = Vec::with_capacity(list.chunks.len());
        let mut at = 0u64;
        for c in &list.chunks {
            pieces.push((c.id, at, u64::from(c.len)));
            at += u64::from(c.len);
        }
        FileTree {
            total: list.total,
            done: vec![false; pieces.len()],
            pieces,
            ..FileTree::default()
        }
    }

    /// Whether this tree was made for exactly `list`'s pieces.
    fn describes(&self, list: &ChunkList) -> bool {
        self.total == list.total
            && self.pieces.len() == list.chunks.len()
            && self
                .pieces
                .iter()
                .zip(&list.chunks)
                .all(|(p, c)| p.0 == c.id && p.2 == u64::from(c.len))
    }

    /// Indices of the pieces not contributed yet.
    pub fn missing(&self) -> impl Iterator<Item = usize> + '_ {
        self.done
            .iter()
            .enumerate()
            .filter(|(_, d)| !**d)
            .map(|(i, _)| i)
    }

    /// Contribute piece `index` from its verified bytes (ignored when the
    /// length does not match the list: the import refuses such a piece).
    pub fn add(&mut self, index: usize, bytes: &[u8]) {
        let Some(&(_, offset, len)) = self.pieces.get(index) else {
            return;
        };
        if bytes.len() as u64 != len || self.done[index] {
            return;
        }
        let c = contribution(self.total, offset, bytes);
        self.merge(index, c);
    }

    fn merge(&mut self, index: usize, c: Contribution) {
        self.cvs.extend(c.cvs);
        for (leaf, frag) in c.frags {
            self.frags.entry(leaf).or_default().push(frag);
        }
        self.done[index] = true;
    }

    /// The file's BLAKE3 hash; an error names what is missing.
    pub fn root(&self) -> Result<ObjectId, String> {
        if let Some(i) = self.missing().next() {
            return Err(format!("piece {i} was never seen"));
        }
        let n = self.total;
        let end = self.pieces.last().map_or(0, |p| p.1 + p.2);
        if end != n {
            return Err(format!("the pieces add up to {end} bytes, not {n}"));
        }
        if n <= LEAF {
            let bytes = self.leaf_bytes(0, n)?;
            return Ok(ObjectId(*blake3::hash(&bytes).as_bytes()));
        }
        let l = left_subtree_len(n);
        let left = self.cv(0, l)?;
        let right = self.cv(l, n - l)?;
        Ok(ObjectId(
            *merge_subtrees_root(&left, &right, Mode::Hash).as_bytes(),
        ))
    }

    fn cv(&self, start: u64, len: u64) -> Result<ChainingValue, String> {
        if let Some(cv) = self.cvs.get(&(start, len)) {
            return Ok(*cv);
        }
        if len <= LEAF {
            let bytes = self.leaf_bytes(start, len)?;
            let mut h = blake3::Hasher::new();
            h.set_input_offset(start);
            h.update(&bytes);
            return Ok(h.finalize_non_root());
        }
        let l = left_subtree_len(len);
        let left = self.cv(start, l)?;
        let right = self.cv(start + l, len - l)?;
        Ok(merge_subtrees_non_root(&left, &right, Mode::Hash))
    }

    /// The bytes of the leaf at `start`, joined from its fragments.
    fn leaf_bytes(&self, start: u64, len: u64) -> Result<Vec<u8>, String> {
        let mut frags: Vec<&(u64, Vec<u8>)> = self
            .frags
            .get(&start)
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        frags.sort_by_key(|f| f.0);
        let mut out = Vec::with_capacity(len as usize);
        for (at, b) in frags {
            if *at != start + out.len() as u64 {
                return Err(format!("the bytes at {at} do not join up"));
            }
            out.extend_from_slice(b);
        }
        if out.len() as u64 != len {
            return Err(format!("the leaf at {start} is incomplete"));
        }
        Ok(out)
    }
}

/// What the piece `bytes` at `offset` of a file of `total` bytes
/// contributes to the file's tree: the nodes wholly inside it (largest
/// first; never the root, which is finalized differently), and its parts
/// of the leaves it shares with another piece.
fn contribution(total: u64, offset: u64, bytes: &[u8]) -> Contribution {
    let mut c = Contribution::default();
    let end = offset + bytes.len() as u64;
    if bytes.is_empty() {
        return c;
    }
    let mut stack: Vec<Node> = vec![(0, total)];
    while let Some((a, len)) = stack.pop() {
        let b = a + len;
        if b <= offset || a >= end {
            continue;
        }
        let whole = a >= offset && b <= end;
        let is_root = a == 0 && len == total;
        if whole && !is_root {
            let mut h = blake3::Hasher::new();
            h.set_input_offset(a);
            h.update(&bytes[(a - offset) as usize..(b - offset) as usize]);
            c.cvs.push(((a, len), h.finalize_non_root()));
            continue;
        }
        if len <= LEAF {
            let (from, to) = (a.max(offset), b.min(end));
            let part = bytes[(from - offset) as usize..(to - offset) as usize].to_vec();
            c.frags.push((a, (from, part)));
            continue;
        }
        let l = left_subtree_len(len);
        stack.push((a + l, len - l));
        stack.push((a, l));
    }
    c
}

/// The trees of the chunked files a transfer brings, shared by the
/// importing threads: an import hands every verified piece it decodes to
/// [`FileDigests::offer`], and the alias check takes the file's tree with
/// [`FileDigests::take`].
#[derive(Default)]
pub struct FileDigests {
    /// Chunk list id → its file's tree.
    by_list: HashMap<ObjectId, usize>,
    files: Vec<Mutex<FileTree>>,
    /// Chunk id → (file, piece index) of every place it fills.
    places: HashMap<ObjectId, Vec<(usize, usize)>>,
    /// Pieces of all the files taken.
    pieces: usize,
}

impl FileDigests {
    /// Nothing to assemble yet.
    pub fn new() -> FileDigests {
        FileDigests::default()
    }

    /// Assemble the file `list` (whose id is `list_id`) from its pieces.
    /// Past [`MAX_PIECES`] pieces in all, a list is not taken (its file
    /// is checked by decoding its pieces again).
    pub fn add_list(&mut self, list_id: ObjectId, list: &ChunkList) {
        if self.by_list.contains_key(&list_id) || self.pieces + list.chunks.len() > MAX_PIECES {
            return;
        }
        self.pieces += list.chunks.len();
        let f = self.files.len();
        for (i, c) in list.chunks.iter().enumerate() {
            let places = self.places.entry(c.id).or_default();
            if places.len() < MAX_PLACES {
                places.push((f, i));
            }
        }
        self.files.push(Mutex::new(FileTree::new(list)));
        self.by_list.insert(list_id, f);
    }

    /// Assemble the file of a chunk list received as `o` (a plain record);
    /// anything else, or a list that does not decode to its id, is left
    /// for the import to judge.
    pub fn add_received(&mut self, o: &crate::remote::WireObject) {
        use crate::remote::WireBody;
        let WireBody::Record {
            compression,
            payload,
        } = &o.body
        else {
            return;
        };
        if o.kind != crate::object::Kind::ChunkList || o.raw_len > crate::pack::MAX_RECORD_RAW {
            return;
        }
        let raw = match *compression {
            crate::pack::COMPRESSION_NONE => payload.clone(),
            crate::pack::COMPRESSION_ZSTD => {
                match zstd::bulk::decompress(payload, o.raw_len as usize) {
                    Ok(r) => r,
                    Err(_) => return,
                }
            }
            _ => return,
        };
        if o.kind.id_of(&raw) != o.id {
            return;
        }
        if let Ok(list) = ChunkList::decode(&raw) {
            self.add_list(o.id, &list);
        }
    }

    /// A piece `id` decoded and checked against its id: contribute it to
    /// every place it fills. The hashing runs outside the lock, so two
    /// importing threads offer pieces side by side.
    pub fn offer(&self, id: &ObjectId, bytes: &[u8]) {
        let Some(places) = self.places.get(id) else {
            return;
        };
        for &(f, i) in places {
            let (total, offset, len, done) = {
                let t = self.files[f]
                    .lock()
                    .expect("no thread panics holding a file tree");
                let (_, offset, len) = t.pieces[i];
                (t.total, offset, len, t.done[i])
            };
            if done || bytes.len() as u64 != len {
                continue;
            }
            let c = contribution(total, offset, bytes);
            let mut t = self.files[f]
                .lock()
                .expect("no thread panics holding a file tree");
            if !t.done[i] {
                t.merge(i, c);
            }
        }
    }

    /// The tree assembled for `list_id`, if it was made for exactly
    /// `list`; it is handed out once.
    pub fn take(&self, list_id: &ObjectId, list: &ChunkList) -> Option<FileTree> {
        let f = *self.by_list.get(list_id)?;
        let mut t = self.files[f]
            .lock()
            .expect("no thread panics holding a file tree");
        if !t.describes(list) {
            return None;
        }
        Some(std::mem::take(&mut *t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ChunkRef;

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn list_of(data: &[u8], cuts: &[usize]) -> ChunkList {
        let mut chunks = Vec::new();
        let mut at = 0;
        for &end in cuts.iter().chain(std::iter::once(&data.len())) {
            let piece = &data[at..end];
            chunks.push(ChunkRef {
                id: ObjectId(*blake3::hash(piece).as_bytes()),
                len: piece.len() as u32,
            });
            at = end;
        }
        ChunkList {
            file: ObjectId(*blake3::hash(data).as_bytes()),
            total: data.len() as u64,
            chunks,
        }
    }

    /// Pieces at unaligned offsets, of every size around the leaf and
    /// subtree boundaries, contributed in reverse order: the root equals
    /// the hash of the whole, and a changed byte changes it.
    #[test]
    fn pieces_in_any_order_give_the_whole_files_hash() {
        let cases: &[(usize, &[usize])] = &[
            (1000, &[1, 500]),
            (1024, &[1023]),
            (1025, &[1024]),
            (5000, &[1, 1023, 1024, 2049, 4096]),
            (70_000, &[100, 3000, 3001, 65_536]),
            (300_000, &[131_072, 131_073, 262_144]),
            (1 << 20, &[7, 99_999, 524_288, 600_000]),
        ];
        for (seed, &(n, cuts)) in cases.iter().enumerate() {
            let data = bytes(n, seed as u64);
            let list = list_of(&data, cuts);
            let mut t = FileTree::new(&list);
            assert!(t.root().is_err(), "incomplete until every piece is seen");
            let mut at = 0usize;
            let mut spans = Vec::new();
            for c in &list.chunks {
                spans.push((at, at + c.len as usize));
                at += c.len as usize;
            }
            for (i, (a, b)) in spans.iter().enumerate().rev() {
                t.add(i, &data[*a..*b]);
            }
            assert_eq!(
                t.root().expect("complete"),
                list.file,
                "n={n} cuts={cuts:?}"
            );
            let mut bad = FileTree::new(&list);
            for (i, (a, b)) in spans.iter().enumerate() {
                let mut p = data[*a..*b].to_vec();
                if i == spans.len() / 2 {
                    p[0] ^= 1;
                }
                bad.add(i, &p);
            }
            assert_ne!(bad.root().expect("complete"), list.file);
        }
    }

    #[test]
    fn offered_pieces_fill_every_place_and_the_tree_is_taken_once() {
        let a = bytes(40_000, 7);
        // The same piece twice in one file.
        let mut data = a.clone();
        data.extend_from_slice(&a);
        data.extend_from_slice(&bytes(3333, 8));
        let list = list_of(&data, &[40_000, 80_000]);
        let list_id = ObjectId(*blake3::hash(b"list").as_bytes());
        let mut d = FileDigests::new();
        d.add_list(list_id, &list);
        d.offer(&list.chunks[0].id, &a);
        let tail = &data[80_000..];
        d.offer(&list.chunks[2].id, tail);
        let t = d.take(&list_id, &list).expect("made for this list");
        assert_eq!(t.missing().count(), 0);
        assert_eq!(t.root().expect("complete"), list.file);
        assert!(d.take(&list_id, &list).is_none(), "handed out once");
        let other = list_of(&data, &[40_000]);
        let mut d = FileDigests::new();
        d.add_list(list_id, &list);
        assert!(d.take(&list_id, &other).is_none(), "made for another list");
        // Past the bound a list is not taken: its file is checked the
        // slow way.
        let big = ChunkList {
            chunks: vec![list.chunks[0]; MAX_PIECES],
            ..list.clone()
        };
        let big_id = ObjectId(*blake3::hash(b"big").as_bytes());
        d.add_list(big_id, &big);
        assert!(d.take(&big_id, &big).is_none(), "over the bound");
    }
}
