//! An interrupted fetch keeps every verified batch that arrived, and the
//! next fetch asks only for what is still missing.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bat_ledger::remote::transfer::fetch;
use bat_ledger::remote::{DirRemote, RemoteError};
use bat_ledger::{CommitRequest, Ledger, NoProgress, Progress};
use common::{no, Rng};

/// Sets the cancellation flag once `limit` payload bytes were received.
struct StopAfter<'a> {
    seen: AtomicU64,
    limit: u64,
    cancel: &'a AtomicBool,
}

impl Progress for StopAfter<'_> {
    fn start(&self, _: &str, _: Option<u64>) {}
    fn inc(&self, n: u64) {
        if self.seen.fetch_add(n, Ordering::Relaxed) + n >= self.limit {
            self.cancel.store(true, Ordering::Relaxed);
        }
    }
    fn finish(&self) {}
}

#[test]
fn an_interrupted_fetch_resumes_without_resending() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    let mut l = Ledger::init(&src).unwrap();
    let mut rng = Rng(77);
    let data = t.path().join("data");
    for r in 0..3 {
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&data).unwrap();
        // Incompressible, so stored payload = raw: 3 x 48 MiB in total.
        std::fs::write(data.join(format!("part{r}.bin")), rng.bytes(48 << 20)).unwrap();
        l.commit_dir(
            &data,
            &CommitRequest::new(format!("r{r}")),
            &NoProgress,
            &no(),
        )
        .unwrap();
    }
    drop(l);
    let mut local = Ledger::init(&t.path().join("local")).unwrap();
    let cancel = AtomicBool::new(false);
    let stop = StopAfter {
        seen: AtomicU64::new(0),
        limit: 100 << 20,
        cancel: &cancel,
    };
    let mut remote = DirRemote::open(&src).unwrap();
    let e = fetch(&mut local, &mut remote, "origin", None, &stop, &cancel).unwrap_err();
    assert!(matches!(e, RemoteError::Cancelled), "{e}");
    // At least one full 64 MiB batch is stored, verified; no ref moved.
    let kept = local.stats().unwrap();
    assert!(kept.objects > 0 && kept.pack_bytes >= 64 << 20, "{kept:?}");
    assert!(local.all_refs().unwrap().is_empty());
    assert!(local.fsck(&NoProgress, &no()).unwrap().ok());
    // The retry receives only the rest.
    let out = fetch(&mut local, &mut remote, "origin", None, &NoProgress, &no()).unwrap();
    let total = remote.ledger().stats().unwrap();
    assert!(
        out.stats.payload_bytes + (64 << 20) <= total.record_stored_bytes,
        "resent too much: {} of {}",
        out.stats.payload_bytes,
        total.record_stored_bytes
    );
    assert_eq!(
        out.stats.objects_stored + kept.objects,
        total.objects,
        "every object stored exactly once"
    );
    assert!(local.fsck(&NoProgress, &no()).unwrap().ok());
    assert_eq!(local.stats().unwrap().commits, 3);
}
