//! The import policy (ledger/src/policy.rs) on every way in: a crafted
//! bundle, a directory remote, `bat serve`'s `/v1/put` and ref update, and
//! an S3 remote. Each hostile tree (escaping symlink, `.bat` directory,
//! too deep, over-long name, case collision) is refused naming the rule,
//! nothing is imported (refs and objects unchanged) and the receiving
//! ledger stays fsck-clean. A ledger that already holds a tree 20,000
//! levels deep (built through the library, not imported) still runs fsck
//! and gc, refuses the rest cleanly, and its server refuses a clone early.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use bat_ledger::remote::bundle::{BUNDLE_MAGIC, BUNDLE_VERSION};
use bat_ledger::remote::dir::DirRemote;
use bat_ledger::remote::transfer::fetch;
use bat_ledger::remote::wire::{encode_stream, WireWriter};
use bat_ledger::remote::{Bundle, Remote, WireBody, WireObject};
use bat_ledger::{
    CommitId, CommitRequest, Kind, Ledger, Mode, NoProgress, ObjectId, Tree, TreeEntry, TreeId,
};

use crate::common::s3::S3Server;
use crate::common::serve::{assert_fsck_clean, commit_files, new_ledger, Server, WRITE_TOKEN};

fn no() -> AtomicBool {
    AtomicBool::new(false)
}

/// A hostile history: blobs and trees (bottom-up, the root last) and the
/// words the refusal must contain.
struct Hostile {
    what: &'static str,
    blobs: Vec<Vec<u8>>,
    trees: Vec<Tree>,
    says: &'static str,
}

fn file_entry(name: &str, blob: &[u8], mode: Mode) -> TreeEntry {
    TreeEntry {
        name: name.into(),
        mode,
        id: Kind::Bytes.id_of(blob),
        size: blob.len() as u64,
    }
}

fn dir_entry(name: &str, tree: &Tree) -> TreeEntry {
    TreeEntry {
        name: name.into(),
        mode: Mode::Tree,
        id: tree.id().0,
        size: 0,
    }
}

/// `n` nested directories named `d` above a tree holding one file.
fn chain(n: usize, blob: &[u8]) -> Vec<Tree> {
    let mut trees = vec![Tree::new(vec![file_entry("f", blob, Mode::File)]).expect("tree")];
    for _ in 0..n {
        let below = trees.last().expect("a tree");
        trees.push(Tree::new(vec![dir_entry("d", below)]).expect("tree"));
    }
    trees
}

fn cases() -> Vec<Hostile> {
    let x = b"x".to_vec();
    let target = b"../../outside".to_vec();
    let escaping = Tree::new(vec![
        file_entry("ok", &x, Mode::File),
        file_entry("link", &target, Mode::Symlink),
    ])
    .expect("tree");
    let planted = Tree::new(vec![file_entry("HEAD", &x, Mode::File)]).expect("tree");
    let sub = Tree::new(vec![dir_entry(".bat", &planted)]).expect("tree");
    let ledger_dir = Tree::new(vec![dir_entry("a", &sub)]).expect("tree");
    let long = Tree::new(vec![file_entry(&"n".repeat(300), &x, Mode::File)]).expect("tree");
    let folded = Tree::new(vec![
        file_entry("Data", &x, Mode::File),
        file_entry("data", &x, Mode::File),
    ])
    .expect("tree");
    vec![
        Hostile {
            what: "escaping symlink",
            blobs: vec![x.clone(), target],
            trees: vec![escaping],
            says: "outside the tree",
        },
        Hostile {
            what: ".bat directory",
            blobs: vec![x.clone()],
            trees: vec![planted, sub, ledger_dir],
            says: "ledger directory",
        },
        Hostile {
            what: "too deep",
            blobs: vec![x.clone()],
            trees: chain(300, &x),
            says: "levels deep",
        },
        Hostile {
            what: "over-long name",
            blobs: vec![x.clone()],
            trees: vec![long],
            says: "a name is 300 bytes",
        },
        Hostile {
            what: "case collision",
            blobs: vec![x],
            trees: vec![folded],
            says: "case-insensitive",
        },
    ]
}

fn record(kind: Kind, raw: Vec<u8>) -> WireObject {
    WireObject {
        id: kind.id_of(&raw),
        kind,
        raw_len: raw.len() as u64,
        body: WireBody::Record {
            compression: bat_ledger::pack::COMPRESSION_NONE,
            payload: raw,
        },
    }
}

fn commit_of(h: &Hostile) -> bat_ledger::Commit {
    bat_ledger::Commit {
        tree: h.trees.last().expect("a root").id(),
        parents: vec![],
        author: "mallory".into(),
        time: 1,
        message: format!("hostile: {}", h.what),
        metadata: serde_json::Value::Null,
        fields: Default::default(),
    }
}

/// The case as wire objects in import order, and its commit.
fn wire(h: &Hostile) -> (Vec<WireObject>, CommitId) {
    let mut out: Vec<WireObject> = h
        .blobs
        .iter()
        .map(|b| record(Kind::Bytes, b.clone()))
        .collect();
    out.extend(h.trees.iter().map(|t| record(Kind::Tree, t.encode())));
    let c = record(Kind::Commit, commit_of(h).encode().expect("commit"));
    let id = CommitId(c.id);
    out.push(c);
    (out, id)
}

/// Store the case through the library (no import: `commit_tree` records
/// a tree as built) on `branch`.
fn plant(l: &mut Ledger, h: &Hostile, branch: &str) -> CommitId {
    let blobs: Vec<&[u8]> = h.blobs.iter().map(|b| b.as_slice()).collect();
    l.write_objects(&blobs, &h.trees).expect("write objects");
    let mut req = CommitRequest::new(format!("hostile: {}", h.what));
    req.branch = Some(branch.into());
    l.commit_tree(h.trees.last().expect("a root").id(), &req)
        .expect("commit tree")
        .commit
}

/// A bundle file with one ref and the objects, checksums right.
fn craft_bundle(path: &Path, tip: CommitId, objects: &[WireObject]) {
    let mut out = Vec::new();
    out.extend_from_slice(BUNDLE_MAGIC);
    out.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    let name = "refs/heads/main";
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(tip.0.as_bytes());
    let mut w = WireWriter::new(out).expect("writer");
    for o in objects {
        w.write(o).expect("write object");
    }
    let mut out = w.finish().expect("finish");
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    std::fs::write(path, out).expect("write bundle");
}

/// What must not change: refs, object count, pack files.
fn state(l: &Ledger) -> (Vec<(String, CommitId)>, u64, usize) {
    (
        l.list_refs("refs/").expect("refs"),
        l.stats().expect("stats").objects,
        std::fs::read_dir(l.dir().join("packs"))
            .expect("packs")
            .count(),
    )
}

/// A receiving ledger with one ordinary commit.
fn receiver(root: &Path, name: &str) -> Ledger {
    let (_, mut l) = new_ledger(root, name);
    commit_files(&mut l, root, &[("kept", b"kept bytes")], name);
    l
}

fn refused_cleanly(out: &std::process::Output, says: &str, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code();
    assert!(
        code.is_some() && code != Some(0) && code != Some(101) && code != Some(134),
        "{what}: exit {code:?}: {err}"
    );
    assert!(err.contains(says), "{what}: {err}");
    err
}

/// `bat clone SOURCE DEST` ends with `h`'s refusal.
fn clone_is_refused(source: &Path, dst: &Path, h: &Hostile) {
    let out = crate::common::bat()
        .arg("clone")
        .arg(source)
        .arg(dst)
        .output()
        .expect("run bat");
    refused_cleanly(&out, h.says, h.what);
}

/// A fetch from `remote` into `c` is refused with `h`'s rule, imports
/// nothing, and leaves `c` fsck-clean.
fn fetch_is_refused(c: &mut Ledger, remote: &mut dyn Remote, h: &Hostile) {
    let before = state(c);
    let e = fetch(c, remote, "x", None, &NoProgress, &no()).expect_err(h.what);
    assert!(e.to_string().contains(h.says), "{}: {e}", h.what);
    assert_eq!(state(c), before, "{}: nothing imported", h.what);
    assert_fsck_clean(c);
}

#[test]
fn bundles_with_hostile_trees_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = receiver(t.path(), "c");
    for (i, h) in cases().iter().enumerate() {
        let (objs, tip) = wire(h);
        let file = t.path().join(format!("hostile{i}.bundle"));
        craft_bundle(&file, tip, &objs);
        // `bat bundle verify` names the rule.
        let out = crate::common::bat()
            .args(["bundle", "verify"])
            .arg(&file)
            .output()
            .expect("run bat");
        let err = refused_cleanly(&out, h.says, h.what);
        assert!(err.contains("is refused"), "{}: {err}", h.what);
        // `bat clone FILE` too.
        let dst = t.path().join(format!("clone{i}"));
        clone_is_refused(&file, &dst, h);
        // A fetch into a ledger changes nothing.
        fetch_is_refused(&mut c, &mut Bundle::open(&file).expect("open bundle"), h);
    }
}

#[test]
fn directory_remotes_with_hostile_trees_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let mut c = receiver(t.path(), "c");
    for (i, h) in cases().iter().enumerate() {
        let (src_dir, mut src) = new_ledger(t.path(), &format!("src{i}"));
        plant(&mut src, h, "main");
        drop(src);
        let dst = t.path().join(format!("clone{i}"));
        clone_is_refused(&src_dir, &dst, h);
        fetch_is_refused(
            &mut c,
            &mut DirRemote::open(&src_dir).expect("open remote"),
            h,
        );
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

#[test]
fn http_puts_and_ref_updates_with_hostile_trees_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mut l) = new_ledger(t.path(), "server");
    commit_files(&mut l, t.path(), &[("kept", b"kept bytes")], "base");
    // The same hostile commits stored on side branches through the library,
    // for the ref-update path.
    let planted: Vec<CommitId> = cases()
        .iter()
        .enumerate()
        .map(|(i, h)| plant(&mut l, h, &format!("planted{i}")))
        .collect();
    drop(l);
    let srv = Server::with_tokens(&dir, t.path(), &[]);
    for (h, planted) in cases().iter().zip(planted) {
        let l = Ledger::discover(&dir).expect("open");
        let before = state(&l);
        drop(l);
        // Objects the ledger lacks: the put is refused.
        let mut objs = wire(h).0;
        objs.push(record(
            Kind::Bytes,
            format!("fresh {}", h.what).into_bytes(),
        ));
        let (status, text) = post(&srv.url, "/v1/put", encode_stream(&objs));
        assert!((400..500).contains(&status), "{}: {status} {text}", h.what);
        assert!(text.contains(h.says), "{}: {text}", h.what);
        // Moving main to the planted commit: refused by the same rules.
        let main = before
            .0
            .iter()
            .find(|r| r.0 == "heads/main")
            .unwrap_or_else(|| panic!("no main among {:?}", before.0));
        let body = serde_json::json!({"name": "refs/heads/main", "expected": main.1.to_string(),
            "new": planted.to_string(), "force": true});
        let (status, text) = post(
            &srv.url,
            "/v1/refs/update",
            serde_json::to_vec(&body).expect("json"),
        );
        assert!((400..500).contains(&status), "{}: {status} {text}", h.what);
        assert!(text.contains(h.says), "{}: {text}", h.what);
        let l = Ledger::discover(&dir).expect("open");
        assert_eq!(state(&l), before, "{}: nothing changed", h.what);
        assert_fsck_clean(&l);
    }
}

#[test]
fn s3_remotes_with_hostile_trees_are_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let Some(s3) = S3Server::start(&t.path().join("s3")) else {
        return;
    };
    let mut c = receiver(t.path(), "c");
    for (i, h) in cases().iter().enumerate() {
        // A hostile writer puts the objects and moves the ref: S3 stores
        // what it is given.
        let prefix = format!("hostile{i}");
        let mut r = s3.remote(&prefix);
        let (objs, tip) = wire(h);
        let mut it = objs.into_iter().map(Ok);
        r.put(&mut it).expect("put");
        r.update_ref("refs/heads/main", None, tip, true)
            .expect("update ref");
        fetch_is_refused(&mut c, &mut s3.remote(&prefix), h);
    }
}

/// A ledger that already holds a tree 20,000 levels deep: fsck and gc
/// run; checkout, ls of the deep path, diff and show end with a clean error
/// (or succeed) instead of a stack overflow; a clone from a server holding
/// the branch is refused before thousands of requests.
#[test]
fn a_stored_tree_twenty_thousand_levels_deep_is_survivable() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, mut l) = new_ledger(t.path(), "deep");
    commit_files(&mut l, t.path(), &[("kept", b"kept bytes")], "base");
    let x = b"x".to_vec();
    let deep = Hostile {
        what: "20,000 levels",
        blobs: vec![x.clone()],
        trees: chain(20_000, &x),
        says: "levels deep",
    };
    plant(&mut l, &deep, "deep");
    drop(l);
    let run = |args: &[&str]| {
        crate::common::bat()
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .expect("run bat")
    };
    let out = run(&["fsck"]);
    assert!(
        out.status.success(),
        "fsck: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["gc"]);
    assert!(
        out.status.success(),
        "gc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let to = t.path().join("out");
    let out = run(&["checkout", "deep", "--to", to.to_str().expect("utf-8")]);
    refused_cleanly(&out, "levels deep", "checkout");
    assert!(!to.exists(), "checkout wrote nothing");
    for args in [
        &["show", "deep", "--files"][..],
        &["ls", "deep"],
        &["diff", "main", "deep"],
        &["query", "SELECT 1"],
    ] {
        let out = run(args);
        let code = out.status.code();
        assert!(
            code.is_some() && code != Some(101) && code != Some(134),
            "{args:?}: {code:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let srv = Server::start(&dir, &["--allow-anonymous-read"]);
    let dst = t.path().join("clone");
    let out = crate::common::bat()
        .arg("clone")
        .arg(&srv.url)
        .arg(&dst)
        .output()
        .expect("run bat");
    refused_cleanly(&out, "levels deep", "http clone");
    let l = Ledger::discover(&dir).expect("open");
    assert_fsck_clean(&l);
    let root = l.resolve("deep").expect("deep");
    let tree: TreeId = l.read_commit(&root).expect("commit").tree;
    // The bookkeeping walk has no depth limit and no recursion.
    assert_eq!(l.tree_totals(&tree).expect("totals"), (1, 1));
    let _: ObjectId = tree.0;
}

/// Recording asks the same rules: a directory whose names collide on a
/// case-insensitive file system, or nested past the depth limit, is not
/// committed (so nothing is recorded that checkout would refuse).
#[test]
fn commit_refuses_what_checkout_would_refuse() {
    let t = tempfile::tempdir().expect("tempdir");
    let (dir, _) = new_ledger(t.path(), "w");
    let run = |args: &[&str]| {
        crate::common::bat()
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .expect("run bat")
    };
    let folded = dir.join("folded");
    std::fs::create_dir_all(folded.join("sub")).expect("mkdir");
    std::fs::write(folded.join("sub/Data"), b"1").expect("write");
    std::fs::write(folded.join("sub/data"), b"2").expect("write");
    let out = run(&["commit", folded.to_str().expect("utf-8"), "-m", "x"]);
    refused_cleanly(&out, "case-insensitive", "case collision");
    let mut deep = dir.join("deep");
    for _ in 0..300 {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).expect("mkdir");
    std::fs::write(deep.join("f"), b"x").expect("write");
    let top = dir.join("deep");
    let out = run(&["commit", top.to_str().expect("utf-8"), "-m", "x"]);
    refused_cleanly(&out, "deeper than 256 levels", "deep directory");
    let l = Ledger::discover(&dir).expect("open");
    assert!(
        l.list_refs("refs/").expect("refs").is_empty(),
        "nothing committed"
    );
    assert_fsck_clean(&l);
}
