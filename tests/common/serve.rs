//! Shared helpers of the `bat serve` tests: start a real server child on
//! 127.0.0.1 with an ephemeral port, make small ledgers.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::AtomicBool;

use bat_ledger::remote::{Remote, RemoteError, WireObject};
use bat_ledger::{CommitId, CommitRequest, Ledger, NoProgress, ObjectId};

pub const READ_TOKEN: &str = "read-token-0123456789";
pub const WRITE_TOKEN: &str = "write-token-0123456789";

/// A running `bat serve`; killed (SIGKILL) and reaped on drop.
pub struct Server {
    pub child: Child,
    pub url: String,
}

impl Server {
    /// Start `bat -C dir serve --bind 127.0.0.1:0 EXTRA...` and wait for its
    /// "listening on" line.
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut child = crate::common::bat()
            .arg("-C")
            .arg(dir)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn bat serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from bat serve: {line:?}"))
            .to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Server { child, url }
    }

    /// Start with the standard token file (read + write token) in `work`.
    pub fn with_tokens(dir: &Path, work: &Path, extra: &[&str]) -> Server {
        let tf = work.join("tokens");
        std::fs::write(&tf, format!("read {READ_TOKEN}\nwrite {WRITE_TOKEN}\n"))
            .expect("write token file");
        let mut args = vec!["--token-file", tf.to_str().expect("utf-8 temp path")];
        args.extend_from_slice(extra);
        Server::start(dir, &args)
    }

    /// SIGKILL the server now.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A new ledger in `root/name` (work directory; the ledger is `.bat` inside).
pub fn new_ledger(root: &Path, name: &str) -> (PathBuf, Ledger) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let l = Ledger::init(&dir).expect("init ledger");
    (dir, l)
}

/// Commit a directory holding `files` (name, bytes) on the current branch.
pub fn commit_files(
    l: &mut Ledger,
    scratch: &Path,
    files: &[(&str, &[u8])],
    message: &str,
) -> CommitId {
    let data = scratch.join(format!("data-{}", message.replace(' ', "_")));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data).expect("mkdir data");
    for (name, bytes) in files {
        std::fs::write(data.join(name), bytes).expect("write file");
    }
    let req = CommitRequest::new(message);
    l.commit_dir(&data, &req, &NoProgress, &AtomicBool::new(false))
        .expect("commit")
        .commit
}

/// Deterministic pseudo-random bytes (xorshift), `n` long.
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// fsck is clean.
pub fn assert_fsck_clean(l: &Ledger) {
    let rep = l
        .fsck(&NoProgress, &AtomicBool::new(false))
        .expect("fsck runs");
    assert!(rep.ok(), "fsck problems: {:?}", rep.problems);
}

/// Every object reachable from `tips` in an order a receiver can import
/// (delta bases, chunks, chunk lists, subtrees and trees before what needs
/// them; parents before children).
pub fn objects_in_order(l: &Ledger, tips: &[CommitId]) -> Vec<bat_ledger::ObjectId> {
    use bat_ledger::{Location, Mode, ObjectId};
    use std::collections::HashSet;
    fn add(l: &Ledger, id: ObjectId, seen: &mut HashSet<ObjectId>, out: &mut Vec<ObjectId>) {
        if seen.contains(&id) {
            return;
        }
        let row = l.locate(&id).expect("locate").expect("object stored");
        match row.location {
            Location::Delta { base, .. } => add(l, base, seen, out),
            Location::Chunked { list } => {
                add(l, list, seen, out);
                for c in l.read_chunk_list(&list).expect("chunk list").chunks {
                    add(l, c.id, seen, out);
                }
            }
            Location::Packed { .. } => {}
        }
        if seen.insert(id) {
            out.push(id);
        }
    }
    fn add_tree(
        l: &Ledger,
        t: bat_ledger::TreeId,
        seen: &mut HashSet<ObjectId>,
        out: &mut Vec<ObjectId>,
    ) {
        if seen.contains(&t.0) {
            return;
        }
        for e in l.read_tree(&t).expect("tree").entries {
            match e.mode {
                Mode::Tree => add_tree(l, bat_ledger::TreeId(e.id), seen, out),
                _ => add(l, e.id, seen, out),
            }
        }
        add(l, t.0, seen, out);
    }
    let mut commits = Vec::new();
    let mut seen_c = HashSet::new();
    let mut stack: Vec<CommitId> = tips.to_vec();
    while let Some(c) = stack.pop() {
        if seen_c.insert(c) {
            commits.push(c);
            stack.extend(l.read_commit(&c).expect("commit").parents);
        }
    }
    // Oldest first: reverse discovery order puts ancestors before children
    // for linear and merged histories alike, since a commit's tree is added
    // just before it.
    commits.reverse();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for c in commits {
        add_tree(
            l,
            l.read_commit(&c).expect("commit").tree,
            &mut seen,
            &mut out,
        );
        add(l, c.0, &mut seen, &mut out);
    }
    out
}

/// A source ledger: three commits with a chunked 6 MiB file, small files and
/// a large incompressible file of `big` bytes in the last one.
pub fn source(root: &Path, big: usize) -> (PathBuf, Vec<CommitId>) {
    let (dir, mut l) = new_ledger(root, "src");
    let mut commits = Vec::new();
    let chunked = noise(7, 6 << 20);
    for r in 0..3u64 {
        let small = format!("round {r}\n").into_bytes();
        let mut files: Vec<(&str, Vec<u8>)> =
            vec![("notes.txt", small), ("chunked.bin", chunked.clone())];
        if r == 2 && big > 0 {
            files.push(("big.bin", noise(99, big)));
        }
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        commits.push(commit_files(&mut l, root, &refs, &format!("round {r}")));
    }
    (dir, commits)
}

/// Push `tip` to `name` through the remote: has, put the missing, move the ref.
pub fn push(
    r: &mut dyn Remote,
    l: &Ledger,
    tip: CommitId,
    name: &str,
    expected: Option<CommitId>,
    on_item: &mut dyn FnMut(usize),
) -> Result<(), RemoteError> {
    let ids = objects_in_order(l, &[tip]);
    let have = r.has(&ids)?;
    let missing: Vec<ObjectId> = ids
        .iter()
        .zip(have)
        .filter(|(_, h)| !h)
        .map(|(i, _)| *i)
        .collect();
    let mut n = 0usize;
    let mut it = missing.iter().map(|id| {
        on_item(n);
        n += 1;
        Ok(l.export_wire(id)?)
    });
    r.put(&mut it)?;
    r.update_ref(name, expected, tip, false)
}

/// Fetch every object of `ids` that `dest` lacks, importing in batches.
pub fn fetch(
    r: &mut dyn Remote,
    dest: &mut Ledger,
    ids: &[ObjectId],
    on_object: &mut dyn FnMut(usize),
) -> Result<(), RemoteError> {
    let missing: Vec<ObjectId> = ids
        .iter()
        .copied()
        .filter(|id| !dest.contains(id).expect("contains"))
        .collect();
    let mut batch: Vec<WireObject> = Vec::new();
    let mut n = 0usize;
    r.get(&missing, &mut |o| {
        on_object(n);
        n += 1;
        batch.push(o);
        if batch.len() >= 4 {
            dest.import_wire(std::mem::take(&mut batch))?;
        }
        Ok(())
    })?;
    dest.import_wire(batch)?;
    Ok(())
}

pub fn same_files(a: &Ledger, b: &Ledger, c: CommitId) {
    let ta = a.read_commit(&c).expect("commit a").tree;
    let tb = b.read_commit(&c).expect("commit b").tree;
    assert_eq!(ta, tb);
    for f in a.walk_files(&ta).expect("walk") {
        assert_eq!(
            b.read_bytes(&f.id).expect("read"),
            a.read_bytes(&f.id).expect("read"),
            "{}",
            f.path
        );
    }
}

/// A loopback TCP relay in front of `upstream` (`http://127.0.0.1:PORT`)
/// that records every byte the server sends back. Returns the relay's URL
/// and the record.
pub fn recording_relay(upstream: &str) -> (String, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};
    let target = upstream.trim_start_matches("http://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
    let addr = listener.local_addr().expect("relay address");
    let record = Arc::new(Mutex::new(Vec::new()));
    let rec = record.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let server = TcpStream::connect(&target).expect("connect to the server");
            let mut c_in = client.try_clone().expect("clone socket");
            let mut s_out = server.try_clone().expect("clone socket");
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_in, &mut s_out);
                let _ = s_out.shutdown(std::net::Shutdown::Write);
            });
            let rec = rec.clone();
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    match s_in.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            rec.lock()
                                .expect("record lock")
                                .extend_from_slice(&buf[..n]);
                            if c_out.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = c_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (format!("http://{addr}"), record)
}
