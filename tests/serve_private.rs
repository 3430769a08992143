//! Private data never leaves through `bat serve`: a round committed with
//! `--keep-raw-eval` keeps its raw evaluation under `.bat/private`; a full
//! clone over HTTP (every ref, every object, recorded byte for byte by a
//! relay between client and server) never carries the raw evaluation, its
//! raw-only content, or a held-out task id that only a private raw
//! evaluation holds — neither in the bytes on the wire nor in any object
//! the clone stores.

use bat::remote::http::{HttpOptions, HttpRemote};
use bat_ledger::remote::Remote;
use bat_ledger::Ledger;
use round_common::{bat, build_campaign, RAW_ONLY};
use serve_common::*;

use crate::common::round as round_common;
use crate::common::serve as serve_common;

/// A held-out task id that appears only in a private raw evaluation.
const PRIVATE_TASK_ID: &str = "heldout-private-only-task-5531";

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_full_clone_over_http_never_carries_private_data() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let c = build_campaign(tmp.path());
    for r in ["r01", "r02"] {
        let out = bat(&c.ledger)
            .args(["--json", "commit", "--no-code-repo", "--keep-raw-eval"])
            .arg(c.round(r))
            .output()
            .expect("run bat commit");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The private area holds the raw evaluations; add one more whose
    // held-out task id appears nowhere else.
    let private = c.ledger.join(".bat/private/raw-eval");
    let raws: Vec<Vec<u8>> = std::fs::read_dir(&private)
        .expect("private raw evaluations exist")
        .map(|e| std::fs::read(e.expect("entry").path()).expect("read"))
        .collect();
    assert!(raws.len() >= 2 && raws.iter().all(|r| contains(r, RAW_ONLY.as_bytes())));
    let extra = format!(
        "{{\"cells\": [{{\"task_id\": \"{PRIVATE_TASK_ID}\", \"notes\": \"{RAW_ONLY}\"}}]}}\n"
    );
    std::fs::write(
        private.join(blake3::hash(extra.as_bytes()).to_hex().as_str()),
        &extra,
    )
    .expect("write private raw evaluation");

    let src = Ledger::discover(&c.ledger).expect("open");
    let tips: Vec<_> = src
        .list_refs("refs/")
        .expect("refs")
        .into_iter()
        .map(|(_, c)| c)
        .collect();
    let ids = objects_in_order(&src, &tips);

    let srv = Server::start(&c.ledger, &["--allow-anonymous-read"]);
    let (url, record) = recording_relay(&srv.url);
    let mut r = HttpRemote::new(&url, HttpOptions::default()).expect("client");
    let refs = r.list_refs().expect("refs");
    assert_eq!(refs.len(), tips.len());
    assert!(r.has(&ids).expect("has").iter().all(|h| *h));
    let (_, mut dst) = new_ledger(tmp.path(), "clone");
    fetch(&mut r, &mut dst, &ids, &mut |_| {}).expect("clone");
    for (name, commit) in &refs {
        dst.update_ref(name, None, Some(*commit), "clone")
            .expect("ref");
    }
    assert_fsck_clean(&dst);
    drop(r);
    drop(srv);

    let wire = record.lock().expect("record").clone();
    assert!(
        wire.len() > 10_000,
        "the relay saw the clone ({} bytes)",
        wire.len()
    );
    for needle in [RAW_ONLY.as_bytes(), PRIVATE_TASK_ID.as_bytes()] {
        assert!(
            !contains(&wire, needle),
            "{} was sent",
            String::from_utf8_lossy(needle)
        );
    }
    for raw in &raws {
        assert!(
            !contains(&wire, &raw[..raw.len().min(256)]),
            "a raw evaluation was sent"
        );
    }
    // Objects travel compressed, so also look at every stored byte of the
    // clone, decoded.
    for (_, tip) in &refs {
        for (commit, _) in dst.log(*tip, None).expect("log") {
            let tree = dst.read_commit(&commit).expect("commit").tree;
            for f in dst.walk_files(&tree).expect("files") {
                let bytes = dst.read_bytes(&f.id).expect("read");
                assert!(
                    !contains(&bytes, RAW_ONLY.as_bytes()),
                    "{} holds raw-only content",
                    f.path
                );
                assert!(!contains(&bytes, PRIVATE_TASK_ID.as_bytes()), "{}", f.path);
                assert!(!raws.contains(&bytes), "{} is a raw evaluation", f.path);
            }
        }
    }
    assert!(
        !dst.dir().join("private").exists(),
        "the clone has no private area"
    );
}
