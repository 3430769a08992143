//! Bundles: round trip through a file, full verification, and crafted
//! bundles (valid checksums, malicious content) that must be refused
//! without changing the receiving ledger.

mod remote_common;

use std::path::Path;

use bat_ledger::remote::bundle::{create_bundle, verify_bundle, BUNDLE_MAGIC, BUNDLE_VERSION};
use bat_ledger::remote::transfer::fetch;
use bat_ledger::remote::wire::WireWriter;
use bat_ledger::remote::{Bundle, WireObject};
use bat_ledger::{CommitId, Ledger, NoProgress, ObjectId};
use remote_common::{no, series_ledger, state};

/// A bundle file with the given refs and objects and a correct trailer.
fn craft(path: &Path, refs: &[(&str, CommitId)], objects: &[WireObject]) {
    let mut out = Vec::new();
    out.extend_from_slice(BUNDLE_MAGIC);
    out.extend_from_slice(&BUNDLE_VERSION.to_le_bytes());
    out.extend_from_slice(&(refs.len() as u32).to_le_bytes());
    for (n, c) in refs {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(c.0.as_bytes());
    }
    let mut w = WireWriter::new(out).unwrap();
    for o in objects {
        w.write(o).unwrap();
    }
    let mut out = w.finish().unwrap();
    let sum = *blake3::hash(&out).as_bytes();
    out.extend_from_slice(&sum);
    std::fs::write(path, out).unwrap();
}

#[test]
fn bundle_round_trip_and_crafted_bundles() {
    let t = tempfile::tempdir().unwrap();
    let (a, commits) = series_ledger(&t.path().join("a"), 3, 3);
    let tip = *commits.last().unwrap();
    let file = t.path().join("x.bundle");
    let s = create_bundle(
        &a,
        &file,
        &[("refs/heads/main".into(), tip)],
        &NoProgress,
        &no(),
    )
    .unwrap();
    assert!(s.objects > 10);
    let v = verify_bundle(&file, &t.path().join("scratch"), &NoProgress, &no()).unwrap();
    assert_eq!(v.objects, s.objects);
    let mut b = Ledger::init(&t.path().join("b")).unwrap();
    let mut bundle = Bundle::open(&file).unwrap();
    fetch(&mut b, &mut bundle, "paper", None, &NoProgress, &no()).unwrap();
    assert_eq!(b.resolve("refs/remotes/paper/main").unwrap(), tip);
    assert!(b.fsck(&NoProgress, &no()).unwrap().ok());

    // Every object, bottom-up as a bundle holds them, for crafting.
    let plan = bat_ledger::remote::transfer::send_plan(
        &a,
        &[tip],
        &mut |ids| Ok(vec![false; ids.len()]),
        &no(),
    )
    .unwrap();
    let objs: Vec<WireObject> = plan.iter().map(|id| a.export_wire(id).unwrap()).collect();
    let mut c = Ledger::init(&t.path().join("c")).unwrap();
    // A ref to a commit that is not inside.
    let bad = t.path().join("ghost.bundle");
    craft(
        &bad,
        &[
            ("refs/heads/main", tip),
            ("refs/heads/ghost", CommitId(ObjectId([0xab; 32]))),
        ],
        &objs,
    );
    let e = verify_bundle(&bad, &t.path().join("s2"), &NoProgress, &no()).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    let before = state(c.dir());
    let e = fetch(
        &mut c,
        &mut Bundle::open(&bad).unwrap(),
        "g",
        None,
        &NoProgress,
        &no(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    assert_eq!(state(c.dir()), before);
    // An object missing from the middle: the closure is incomplete.
    let mut holey = objs.clone();
    let i = holey.len() / 2;
    holey.remove(i);
    craft(&bad, &[("refs/heads/main", tip)], &holey);
    assert!(verify_bundle(&bad, &t.path().join("s3"), &NoProgress, &no()).is_err());
    let e = fetch(
        &mut c,
        &mut Bundle::open(&bad).unwrap(),
        "g",
        None,
        &NoProgress,
        &no(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    assert_eq!(state(c.dir()), before);
    // A bad ref name.
    craft(&bad, &[("refs/heads/../x", tip)], &objs);
    let e = Bundle::open(&bad).unwrap_err();
    assert!(e.to_string().contains("invalid ref name"), "{e}");
    // Trailing garbage inside the checksummed area.
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len() - 32;
    bytes.truncate(n);
    bytes.extend_from_slice(b"junk");
    let sum = *blake3::hash(&bytes).as_bytes();
    bytes.extend_from_slice(&sum);
    std::fs::write(&bad, &bytes).unwrap();
    let e = Bundle::open(&bad).unwrap_err();
    assert!(e.to_string().contains("trailing"), "{e}");
    // Every truncation of a real bundle is refused by open.
    let bytes = std::fs::read(&file).unwrap();
    for cut in [0, 7, 20, bytes.len() / 3, bytes.len() - 1] {
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        assert!(Bundle::open(&bad).is_err(), "cut at {cut}");
    }
}
