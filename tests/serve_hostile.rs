//! A malicious or broken client against a real `bat serve`: truncated
//! streams, garbage, oversized frame headers, wrong ids, decompression
//! bombs, refs at missing objects. Each gets a 4xx with a clear message and
//! the server's ledger stays exactly as it was (objects, packs, refs, fsck).

use bat_ledger::remote::wire::{encode_stream, WireWriter};
use bat_ledger::remote::{WireBody, WireObject};
use bat_ledger::{Kind, Ledger, ObjectId};
use serve_common::*;

use crate::common::serve as serve_common;

struct Snapshot {
    objects: u64,
    packs: u64,
    pack_files: usize,
    refs: Vec<(String, bat_ledger::CommitId)>,
}

fn snapshot(dir: &std::path::Path) -> Snapshot {
    let l = Ledger::discover(dir).expect("open");
    let s = l.stats().expect("stats");
    Snapshot {
        objects: s.objects,
        packs: s.packs,
        pack_files: std::fs::read_dir(l.dir().join("packs"))
            .expect("packs dir")
            .count(),
        refs: l.list_refs("refs/").expect("refs"),
    }
}

fn post(url: &str, path: &str, body: Vec<u8>) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let resp = reqwest::Client::new()
            .post(format!("{url}{path}"))
            .bearer_auth(WRITE_TOKEN)
            .body(body)
            .send()
            .await
            .expect("send");
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    })
}

fn record(kind: Kind, raw: &[u8]) -> WireObject {
    WireObject {
        id: kind.id_of(raw),
        kind,
        raw_len: raw.len() as u64,
        body: WireBody::Record {
            compression: 0,
            payload: raw.to_vec(),
        },
    }
}

#[test]
#[allow(clippy::vec_init_then_push)]
fn hostile_uploads_are_refused_and_change_nothing() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mut l) = new_ledger(t.path(), "server");
    commit_files(&mut l, t.path(), &[("x", b"kept")], "base");
    drop(l);
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let before = snapshot(&dir);

    let good_a = record(Kind::Bytes, &noise(1, 5000));
    let good_b = record(Kind::Bytes, &noise(2, 7000));
    let valid = encode_stream(&[good_a.clone(), good_b.clone()]);

    let mut cases: Vec<(&str, Vec<u8>, &[u16], &str)> = Vec::new();
    // Truncated: the end marker (and part of a frame) is missing.
    cases.push((
        "truncated",
        valid[..valid.len() - 60].to_vec(),
        &[400],
        "truncated",
    ));
    cases.push((
        "no end marker",
        valid[..valid.len() - 48].to_vec(),
        &[400],
        "truncated",
    ));
    cases.push((
        "garbage",
        b"GET / HTTP/1.1 this is not a wire stream".to_vec(),
        &[400],
        "magic",
    ));
    cases.push(("empty", Vec::new(), &[400], "truncated"));
    // A flipped payload byte: the end marker's digest (or the id) fails.
    let mut flipped = valid.clone();
    let mid = 16 + 96 + 100;
    flipped[mid] ^= 0x40;
    cases.push(("flipped payload byte", flipped, &[400, 422], ""));
    // A flipped frame header byte: the header checksum fails.
    let mut hdr = valid.clone();
    hdr[16 + 10] ^= 1;
    cases.push(("flipped header byte", hdr, &[400], ""));
    // Wrong id: the payload does not hash to the announced id.
    let mut wrong = record(Kind::Bytes, b"these bytes");
    wrong.id = ObjectId::of_bytes(b"other bytes");
    cases.push((
        "wrong id",
        encode_stream(&[good_a.clone(), wrong]),
        &[422],
        "verify",
    ));
    // Oversized header: declared raw length far over the record limit.
    let mut huge = record(Kind::Bytes, b"small");
    huge.raw_len = 1 << 40;
    let mut w = WireWriter::new(Vec::new()).expect("writer");
    w.write(&huge).expect("frame");
    cases.push((
        "oversized raw_len",
        w.finish().expect("finish"),
        &[400, 413, 422],
        "",
    ));
    // Decompression bomb: 64 MiB of zeros in a tiny zstd frame, declared as
    // 100 bytes.
    let bomb_payload = zstd::bulk::compress(&vec![0u8; 64 << 20], 3).expect("compress");
    let bomb = WireObject {
        id: ObjectId::of_bytes(&[0u8; 100]),
        kind: Kind::Bytes,
        raw_len: 100,
        body: WireBody::Record {
            compression: 1,
            payload: bomb_payload,
        },
    };
    cases.push((
        "decompression bomb",
        encode_stream(&[bomb]),
        &[422],
        "decompress",
    ));
    // A tree naming a subtree that is neither stored nor sent.
    let missing_sub = bat_ledger::Tree::new(vec![bat_ledger::TreeEntry {
        name: "sub".into(),
        mode: bat_ledger::Mode::Tree,
        id: ObjectId::of_bytes(b"no such tree"),
        size: 0,
    }])
    .expect("tree");
    cases.push((
        "tree with a missing subtree",
        encode_stream(&[record(Kind::Tree, &missing_sub.encode())]),
        &[422],
        "",
    ));
    // A delta whose base is missing.
    let delta = WireObject {
        id: ObjectId::of_bytes(b"delta"),
        kind: Kind::Bytes,
        raw_len: 5,
        body: WireBody::Delta {
            base: ObjectId::of_bytes(b"absent base"),
            compression: 2,
            payload: vec![1, 1, 1, 0],
        },
    };
    cases.push((
        "delta with a missing base",
        encode_stream(&[delta]),
        &[422],
        "",
    ));

    for (name, body, statuses, needle) in cases {
        let (status, text) = post(&srv.url, "/v1/put", body);
        assert!(
            statuses.contains(&status),
            "{name}: status {status}: {text}"
        );
        let parsed: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{name}: not JSON: {text}"));
        let msg = parsed["message"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase();
        assert!(!msg.is_empty(), "{name}: no message");
        assert!(msg.contains(needle), "{name}: {msg:?} lacks {needle:?}");
        let after = snapshot(&dir);
        assert_eq!(
            (after.objects, after.packs, after.pack_files, &after.refs),
            (
                before.objects,
                before.packs,
                before.pack_files,
                &before.refs
            ),
            "{name} changed the ledger"
        );
    }
    // A ref update at a commit the server lacks.
    let ghost = ObjectId::of_bytes(b"ghost").to_hex();
    let body = serde_json::json!({"name": "refs/heads/main", "expected": before.refs[0].1.to_string(), "new": ghost, "force": true});
    let (status, text) = post(
        &srv.url,
        "/v1/refs/update",
        serde_json::to_vec(&body).expect("json"),
    );
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("not stored"), "{text}");

    // The same server still accepts a well-formed upload afterwards.
    let (status, text) = post(&srv.url, "/v1/put", valid);
    assert_eq!(status, 200, "{text}");
    let l = Ledger::discover(&dir).expect("open");
    assert!(l.contains(&good_a.id).expect("contains") && l.contains(&good_b.id).expect("contains"));
    assert_eq!(l.list_refs("refs/").expect("refs"), before.refs);
    assert_fsck_clean(&l);
}

/// Server flags for the timeout tests: short enough to observe quickly.
const SHORT: &[&str] = &[
    "--header-timeout",
    "1",
    "--idle-timeout",
    "2",
    "--shutdown-grace",
    "2",
];

/// Whether the server closes `s` within `within` (a read returns EOF or an
/// error other than our own timeout).
fn closed_within(s: &mut std::net::TcpStream, within: std::time::Duration) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an error response, then the close
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
}

fn connect(url: &str) -> std::net::TcpStream {
    let addr = url.trim_start_matches("http://");
    std::net::TcpStream::connect(addr).expect("connect")
}

/// gc succeeds (retrying briefly over momentary opens by the server).
fn gc_succeeds(dir: &std::path::Path) -> bool {
    for _ in 0..20 {
        let mut l = match Ledger::open_with(&dir.join(".bat"), bat_ledger::LockMode::Exclusive) {
            Ok(l) => l,
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        if l.gc(
            &bat_ledger::NoProgress,
            &std::sync::atomic::AtomicBool::new(false),
        )
        .is_ok()
        {
            return true;
        }
    }
    false
}

#[test]
fn slow_clients_are_cut_off_and_never_hold_the_ledger() {
    use std::io::Write;
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mut l) = new_ledger(t.path(), "server");
    let big = noise(9, 24 << 20);
    commit_files(
        &mut l,
        t.path(),
        &[("big.bin", &big), ("x", b"kept")],
        "base",
    );
    let tip = l.resolve("HEAD").expect("head");
    // Everything, chunks included: a response far larger than the socket
    // buffers and the server's queue.
    let ids: Vec<ObjectId> = objects_in_order(&l, &[tip]);
    drop(l);
    let srv = Server::with_tokens(&dir, t.path(), SHORT);

    // 1. Five connections dribbling headers are closed by the header
    //    timeout (1 s), not held for as long as they keep dribbling.
    let mut slow: Vec<_> = (0..5).map(|_| connect(&srv.url)).collect();
    for s in &mut slow {
        s.write_all(b"POST /v1/has HTTP/1.1\r\nHost: x\r\n")
            .expect("write");
    }
    for s in &mut slow {
        let _ = s.write_all(b"X-Slow: 1\r\n");
    }
    for (i, s) in slow.iter_mut().enumerate() {
        assert!(
            closed_within(s, std::time::Duration::from_secs(10)),
            "dribbler {i} still open"
        );
    }

    // 2. A PUT that stalls mid-body does not hold the ledger: gc runs
    //    meanwhile; the server drops the request after the idle timeout.
    let mut put = connect(&srv.url);
    let stream = encode_stream(&[record(Kind::Bytes, &noise(3, 100_000))]);
    write!(
        put,
        "POST /v1/put HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITE_TOKEN}\r\nContent-Length: {}\r\n\r\n",
        stream.len()
    )
    .expect("headers");
    put.write_all(&stream[..stream.len() / 2])
        .expect("half a body");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(gc_succeeds(&dir), "gc blocked by a stalled upload");
    assert!(
        closed_within(&mut put, std::time::Duration::from_secs(15)),
        "stalled PUT kept open"
    );

    // 3. A download the client never reads does not hold the ledger either.
    let mut get = connect(&srv.url);
    let body: Vec<u8> = ids.iter().flat_map(|i| i.as_bytes().to_vec()).collect();
    write!(
        get,
        "POST /v1/get HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITE_TOKEN}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .expect("headers");
    get.write_all(&body).expect("ids");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(gc_succeeds(&dir), "gc blocked by an unread download");
    assert!(
        closed_within(&mut get, std::time::Duration::from_secs(20)),
        "unread GET kept open"
    );
    let l = Ledger::discover(&dir).expect("open");
    assert_fsck_clean(&l);
}

#[test]
fn sigterm_stops_the_server_despite_a_half_sent_request() {
    use std::io::Write;
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mut l) = new_ledger(t.path(), "server");
    commit_files(&mut l, t.path(), &[("x", b"kept")], "base");
    drop(l);
    // Long idle timeout: only the shutdown grace period can end this.
    let mut srv = Server::with_tokens(
        &dir,
        t.path(),
        &["--idle-timeout", "600", "--shutdown-grace", "2"],
    );
    let mut put = connect(&srv.url);
    write!(
        put,
        "POST /v1/put HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITE_TOKEN}\r\nContent-Length: 100000\r\n\r\nBATWIRE"
    )
    .expect("half a request");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &srv.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let mut exited = None;
    while started.elapsed() < std::time::Duration::from_secs(30) {
        if let Some(st) = srv.child.try_wait().expect("wait") {
            exited = Some(st);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let st = exited.expect("bat serve did not exit after SIGTERM");
    println!(
        "bat serve exited {:?} after SIGTERM in {:?}",
        st,
        started.elapsed()
    );
    let l = Ledger::discover(&dir).expect("open");
    assert_fsck_clean(&l);
}

#[test]
fn uploads_fsck_would_reject_are_refused() {
    use bat_ledger::{Mode, Tree, TreeEntry};
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mut l) = new_ledger(t.path(), "server");
    let base = commit_files(&mut l, t.path(), &[("x", b"kept")], "base");
    let blob = l
        .walk_files(&l.read_commit(&base).expect("c").tree)
        .expect("files")[0]
        .id;
    drop(l);
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    let before = snapshot(&dir);

    // Trailing bytes after the end marker: 400, nothing stored.
    let mut body = encode_stream(&[record(Kind::Bytes, &noise(5, 3000))]);
    body.extend_from_slice(b"more");
    let (status, text) = post(&srv.url, "/v1/put", body);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("trailing"), "{text}");

    // A tree lying about a file's size, with its commit.
    let file = record(Kind::Bytes, b"twelve bytes");
    let tree = Tree {
        entries: vec![TreeEntry {
            name: "f".into(),
            mode: Mode::File,
            id: file.id,
            size: 3,
        }],
    };
    let tree = record(Kind::Tree, &tree.encode());
    let (status, text) = post(&srv.url, "/v1/put", encode_stream(&[file, tree]));
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("the tree says"), "{text}");

    // A ref update naming a blob: 4xx, not 500.
    let body = serde_json::json!({"name": "refs/heads/main", "expected": before.refs[0].1.to_string(), "new": blob.to_hex(), "force": true});
    let (status, text) = post(
        &srv.url,
        "/v1/refs/update",
        serde_json::to_vec(&body).expect("json"),
    );
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("not a commit"), "{text}");
    let after = snapshot(&dir);
    assert_eq!(after.refs, before.refs);
    assert_eq!(after.pack_files, before.pack_files);
    assert_fsck_clean(&Ledger::discover(&dir).expect("open"));
}
