//! Shared helpers of the ledger's test crates: deterministic data, small
//! safetensors files, ledgers with several commits, and "unchanged" checks.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::{CommitId, CommitRequest, Ledger, NoProgress};

pub fn no() -> AtomicBool {
    AtomicBool::new(false)
}

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A bf16 safetensors file with `tensors` tensors of `elems` elements.
pub fn safetensors(rng: &mut Rng, tensors: usize, elems: usize) -> Vec<u8> {
    let data: Vec<Vec<u8>> = (0..tensors).map(|_| rng.bytes(elems * 2)).collect();
    let names: Vec<String> = (0..tensors).map(|i| format!("layer{i}.weight")).collect();
    let shape = [elems];
    let ts: Vec<Tensor<'_>> = names
        .iter()
        .zip(&data)
        .map(|(name, data)| Tensor {
            name,
            dtype: "BF16",
            shape: &shape,
            data,
        })
        .collect();
    write_safetensors(&ts, None)
}

/// One tensor of a file [`write_safetensors`] writes.
pub struct Tensor<'a> {
    pub name: &'a str,
    pub dtype: &'a str,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

/// Serialize like the safetensors crate: the JSON header (with `metadata`
/// as `__metadata__` when given) padded with spaces to a multiple of 8,
/// then the tensors' bytes in order.
pub fn write_safetensors(ts: &[Tensor<'_>], metadata: Option<serde_json::Value>) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut off = 0usize;
    for t in ts {
        header.insert(
            t.name.to_string(),
            serde_json::json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [off, off + t.data.len()]}),
        );
        off += t.data.len();
    }
    if let Some(m) = metadata {
        header.insert("__metadata__".into(), m);
    }
    let mut h = serde_json::to_vec(&header).expect("json");
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    for t in ts {
        out.extend_from_slice(t.data);
    }
    out
}

/// Flip low bits of about one byte in `every` of the tensor data (after
/// the header), like a small training step.
pub fn perturb(rng: &mut Rng, st: &mut [u8], every: u64) {
    let n = u64::from_le_bytes(st[0..8].try_into().expect("8")) as usize + 8;
    for b in st[n..].iter_mut() {
        if rng.next().is_multiple_of(every) {
            *b ^= 1;
        }
    }
}

/// A ledger in `root/src` (chunk threshold 1 KiB so small test files are
/// chunked) with `rounds` commits of a directory holding a small text
/// file, a random binary and a safetensors model that changes a little
/// every round (so it is delta-stored). Returns the commits, oldest first.
pub fn series_ledger(root: &Path, rounds: usize, seed: u64) -> (Ledger, Vec<CommitId>) {
    let mut l = Ledger::init(root).expect("init");
    l.config.chunk_threshold = 1024;
    let mut rng = Rng(seed);
    let data = root.join("data");
    let mut model = safetensors(&mut rng, 3, 6000);
    let mut commits = Vec::new();
    for r in 0..rounds {
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(data.join("candidate")).expect("mkdir");
        std::fs::write(data.join("notes.txt"), format!("round {r}\n")).expect("write");
        std::fs::write(data.join("blob.bin"), rng.bytes(3000 + r)).expect("write");
        if r > 0 {
            perturb(&mut rng, &mut model, 16);
        }
        std::fs::write(data.join("candidate/model.safetensors"), &model).expect("write");
        let out = l
            .commit_dir(
                &data,
                &CommitRequest::new(format!("round {r}")),
                &NoProgress,
                &no(),
            )
            .expect("commit");
        commits.push(out.commit);
    }
    std::fs::remove_dir_all(&data).expect("rm");
    (l, commits)
}

/// BLAKE3 of every file under `dir`, WAL/SHM excluded (they vanish on close).
pub fn state(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out.into_iter()
        .filter(|(k, _)| !k.ends_with("-wal") && !k.ends_with("-shm"))
        .collect()
}

fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(rd) = std::fs::read_dir(d) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .expect("under")
            .to_string_lossy()
            .to_string();
        if p.is_dir() {
            out.insert(rel.clone() + "/", "dir".into());
            walk(root, &p, out);
        } else {
            let b = std::fs::read(&p).unwrap_or_default();
            out.insert(rel, blake3::hash(&b).to_hex().to_string());
        }
    }
}
