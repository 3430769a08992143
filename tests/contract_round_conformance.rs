//! The `source` and `rounds` conformance families against `../shared/conformance`
//! (skipped with a note when that folder is absent, e.g. on a fresh clone).
//! With the default pack the comparison is masked; set BAT_REFERENCE_PACK to
//! a pack carrying the reference's wording (kept outside the repository) to
//! also run the byte-exact comparison.

use std::path::PathBuf;

use bat_contract::conformance::Options;
use bat_contract::pack::Pack;
use bat_contract::round_conformance::{has_reference_versions, run_source_and_rounds};

fn shared() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance");
    let dir = if dir.is_dir() {
        dir
    } else {
        PathBuf::from("/work/shared/conformance")
    };
    if dir.join("rounds").is_dir() {
        Some(dir)
    } else {
        eprintln!("note: no shared/conformance folder; skipping the vector run");
        None
    }
}

fn run(pack: &Pack) -> usize {
    let Some(dir) = shared() else { return 0 };
    let exact = has_reference_versions(pack);
    let results = run_source_and_rounds(&dir, &Options { pack, exact });
    for r in &results {
        eprintln!(
            "{} {}/{}: {}",
            if r.passed { "PASS" } else { "FAIL" },
            r.family,
            r.case,
            r.detail
        );
    }
    let failed: Vec<_> = results.iter().filter(|r| !r.passed).collect();
    assert!(failed.is_empty(), "{} failing vectors", failed.len());
    // source grid, 3 round folders (+verify, +2 traces), rng, prompt matrix
    assert!(results.len() >= 10, "only {} cases ran", results.len());
    results.len()
}

#[test]
fn default_pack_masked() {
    let pack = Pack::default_pack();
    assert!(!has_reference_versions(&pack));
    run(&pack);
}

#[test]
fn reference_pack_exact_when_available() {
    let Some(path) = std::env::var_os("BAT_REFERENCE_PACK") else {
        eprintln!("note: BAT_REFERENCE_PACK not set; skipping the byte-exact run");
        return;
    };
    let pack = Pack::load(std::path::Path::new(&path)).expect("reference pack loads");
    assert!(has_reference_versions(&pack));
    run(&pack);
}
