//! The importer: a wire stream decoded and imported into a real ledger
//! (one per fuzzing process). Whatever is accepted must leave the ledger
//! fsck-clean: import is as strict as fsck.
#![no_main]
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};

use bat_ledger::remote::wire::decode_stream;
use bat_ledger::{Ledger, NoProgress};
use libfuzzer_sys::fuzz_target;

static LEDGER: OnceLock<Mutex<(tempfile::TempDir, Ledger)>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = decode_stream(data) else {
        return;
    };
    let cell = LEDGER.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let l = Ledger::init(dir.path()).expect("init a ledger");
        Mutex::new((dir, l))
    });
    let mut g = cell.lock().expect("one fuzz thread");
    let commits: Vec<_> = batch
        .iter()
        .filter(|o| o.kind == bat_ledger::Kind::Commit)
        .map(|o| o.id)
        .collect();
    if g.1.import_wire(batch).is_ok() && !commits.is_empty() {
        // Make what was accepted reachable, then it must verify.
        for (i, c) in commits.iter().enumerate() {
            let name = format!("refs/heads/fuzz{i}");
            let cur = g.1.resolve(&name).ok();
            let _ =
                g.1.update_ref(&name, cur, Some(bat_ledger::CommitId(*c)), "fuzz");
        }
        let rep =
            g.1.fsck(&NoProgress, &AtomicBool::new(false))
                .expect("fsck runs");
        assert!(
            rep.ok(),
            "import accepted what fsck rejects: {:?}",
            rep.problems
        );
    }
});
