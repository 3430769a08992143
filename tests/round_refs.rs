//! The ledger's generic ref namespaces used by `refs/promoted/<branch>`.

use bat_ledger::{CommitRequest, Error, Ledger, NoProgress};

#[test]
fn update_ref_accepts_namespaced_refs_and_rejects_bad_names() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Ledger::init(tmp.path()).unwrap();
    let d = tmp.path().join("d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("f"), b"x").unwrap();
    let c = l
        .commit_dir(
            &d,
            &CommitRequest::new("one"),
            &NoProgress,
            &std::sync::atomic::AtomicBool::new(false),
        )
        .unwrap()
        .commit;
    l.update_ref("refs/promoted/main", None, Some(c), "promote")
        .unwrap();
    assert_eq!(l.resolve("refs/promoted/main").unwrap(), c);
    assert_eq!(
        l.list_refs("refs/promoted/").unwrap(),
        vec![("main".to_string(), c)]
    );
    // Compare-and-swap: a stale expectation fails.
    assert!(matches!(
        l.update_ref("refs/promoted/main", None, Some(c), "again"),
        Err(Error::BranchMoved { .. })
    ));
    for bad in [
        "refs/promoted",
        "refs//x",
        "refs/promoted/../x",
        "refs/p/x.lock",
        "other/x",
    ] {
        assert!(
            matches!(
                l.update_ref(bad, None, Some(c), "bad"),
                Err(Error::InvalidRefName { .. })
            ),
            "{bad} was accepted"
        );
    }
    l.update_ref("refs/promoted/main", Some(c), None, "drop")
        .unwrap();
    assert!(l.list_refs("refs/promoted/").unwrap().is_empty());
}
