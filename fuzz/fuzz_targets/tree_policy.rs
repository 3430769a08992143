//! The import policy's tree walk (`bat_ledger::policy`) over trees built
//! from arbitrary bytes: each tree's subtrees are earlier trees (so the
//! ids match and the DAG can share subtrees at many depths), names and
//! symlink targets are arbitrary. The walk must never panic, must read each
//! tree at most once, and may only refuse with `TreeRefused`.
#![no_main]
use std::collections::HashMap;

use bat_ledger::policy::{Limits, TreeSource};
use bat_ledger::{Error, Kind, Mode, ObjectId, Tree, TreeCheck, TreeEntry, TreeId};
use libfuzzer_sys::fuzz_target;

struct Mem {
    trees: HashMap<ObjectId, Tree>,
    bytes: HashMap<ObjectId, Vec<u8>>,
    reads: HashMap<ObjectId, u32>,
}

impl TreeSource for Mem {
    fn tree(&mut self, id: &ObjectId) -> bat_ledger::Result<Tree> {
        *self.reads.entry(*id).or_default() += 1;
        self.trees
            .get(id)
            .cloned()
            .ok_or(Error::ObjectMissing { id: *id })
    }
    fn symlink_target(&mut self, id: &ObjectId) -> bat_ledger::Result<Option<Vec<u8>>> {
        Ok(self.bytes.get(id).cloned())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut it = data.iter().copied();
    let mut next = move || it.next();
    let mut mem = Mem {
        trees: HashMap::new(),
        bytes: HashMap::new(),
        reads: HashMap::new(),
    };
    let mut built: Vec<ObjectId> = Vec::new();
    // Small limits so short inputs reach them.
    let limits = Limits {
        max_depth: 12,
        max_path_bytes: 48,
        max_name_bytes: 10,
        max_entries: 6,
    };
    'trees: while let Some(n) = next() {
        let mut entries = Vec::new();
        for _ in 0..(n % 8) {
            let (Some(m), Some(len)) = (next(), next()) else {
                break 'trees;
            };
            let name: Vec<u8> = (0..len % 16).filter_map(|_| next()).collect();
            let name = String::from_utf8_lossy(&name).into_owned();
            let e = match m % 4 {
                0 if !built.is_empty() => TreeEntry {
                    name,
                    mode: Mode::Tree,
                    id: built[usize::from(next().unwrap_or(0)) % built.len()],
                    size: 0,
                },
                1 => {
                    let target: Vec<u8> = (0..next().unwrap_or(0) % 24)
                        .filter_map(|_| next())
                        .collect();
                    let id = Kind::Bytes.id_of(&target);
                    let size = target.len() as u64;
                    mem.bytes.insert(id, target);
                    TreeEntry {
                        name,
                        mode: Mode::Symlink,
                        id,
                        size,
                    }
                }
                _ => TreeEntry {
                    name,
                    mode: Mode::File,
                    id: ObjectId([m; 32]),
                    size: u64::from(m),
                },
            };
            entries.push(e);
        }
        let Ok(t) = Tree::new(entries) else {
            continue;
        };
        // Whatever Tree::new accepts must decode back.
        assert_eq!(Tree::decode(&t.encode()).as_ref(), Ok(&t));
        let id = t.id().0;
        mem.trees.insert(id, t);
        built.push(id);
    }
    let mut walk = TreeCheck::new(limits);
    for root in built.iter().rev().take(4) {
        match walk.check_root(&TreeId(*root), &mut mem) {
            Ok(()) => {}
            // A refusal ends the walk (its half-walked trees are not
            // remembered, so a next root could read them again).
            Err(Error::TreeRefused { .. }) => break,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert!(
        mem.reads.values().all(|&n| n <= 1),
        "a tree was read twice in one walk"
    );
});
