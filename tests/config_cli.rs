//! `bat config`: write settings kept in the ledger, used by later commits
//! of any process, checked when set, and harmless when damaged by hand.

use std::path::Path;

use common::*;

use crate::common::ledger as common;

/// Commit four slightly different versions of a 6 MiB checkpoint; returns
/// the ledger's delta object count.
fn four_versions(w: &Path) -> u64 {
    let d = w.join("ckpt");
    std::fs::create_dir_all(&d).unwrap();
    let mut rng = Rng(0xc0ff);
    let mut data: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            let mut v = vec![0u8; 2 << 20];
            fill(&mut v, &mut rng);
            v
        })
        .collect();
    for v in 0..4 {
        perturb_model(&mut data, &mut rng, 64);
        write_model(&d.join("model.safetensors"), &data);
        bat(w)
            .args(["commit", "ckpt", "-m", &format!("v{v}")])
            .assert()
            .success();
    }
    json(bat(w).arg("stats"))["delta_objects"].as_u64().unwrap()
}

#[test]
fn a_kept_delta_depth_applies_to_later_commits_until_unset() {
    let deep = new_ledger();
    let shallow = new_ledger();
    let listed = json(bat(shallow.path()).arg("config"));
    assert_eq!(listed[0]["key"], "delta-depth");
    assert_eq!(listed[0]["value"], "9");
    assert_eq!(listed[0]["source"], "default");
    assert_eq!(listed[1]["key"], "base-files");
    assert_eq!(listed[1]["value"], "true");

    let set = json(bat(shallow.path()).args(["config", "delta-depth", "1"]));
    assert_eq!(set["value"], "1");
    assert_eq!(set["source"], "ledger");
    let out = bat(shallow.path())
        .args(["config", "delta-depth"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");

    // Depth 1: every other version is stored whole; the default deltas all
    // three later versions.
    let (d_deep, d_shallow) = (four_versions(deep.path()), four_versions(shallow.path()));
    assert!(d_deep > 0);
    assert!(d_shallow < d_deep, "{d_shallow} vs {d_deep}");
    let l = bat_ledger::Ledger::open(&shallow.path().join(".bat")).unwrap();
    assert_eq!(l.config.delta_max_depth, 1);
    drop(l);

    let unset = json(bat(shallow.path()).args(["config", "--unset", "delta-depth"]));
    assert_eq!(unset["value"], "9");
    assert_eq!(unset["source"], "default");
    let l = bat_ledger::Ledger::open(&shallow.path().join(".bat")).unwrap();
    assert_eq!(l.config.delta_max_depth, 9);
}

#[test]
fn bad_keys_and_values_are_refused_and_change_nothing() {
    let t = new_ledger();
    let w = t.path();
    let before = ledger_state(w);
    for (args, want) in [
        (&["config", "delta-depth", "33"][..], "from 0 to 32"),
        (&["config", "delta-depth", "1.5"][..], "from 0 to 32"),
        (&["config", "base-files", "maybe"][..], "true or false"),
        (&["config", "depth", "3"][..], "no setting named"),
    ] {
        let out = fails(bat(w).args(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = fails(bat(w).args(["config", "depth"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("delta-depth, base-files"));
    assert_eq!(ledger_state(w), before);
}

#[test]
fn a_hand_damaged_value_is_shown_and_ignored() {
    let t = new_ledger();
    let w = t.path();
    {
        let mut l = bat_ledger::Ledger::open(&w.join(".bat")).unwrap();
        l.config_set("write.delta_depth", Some("deep")).unwrap();
    }
    let out = bat(w).arg("config").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("delta-depth\t9 (kept value \"deep\" is not valid: default used)"),
        "{text}"
    );
    let shown = json(bat(w).args(["config", "delta-depth"]));
    assert_eq!(shown["invalid"], "deep");
    assert_eq!(shown["value"], "9");
    // The ledger still commits, and a valid value replaces the bad one.
    std::fs::create_dir_all(w.join("d")).unwrap();
    std::fs::write(w.join("d/a.txt"), b"x").unwrap();
    bat(w).args(["commit", "d", "-m", "one"]).assert().success();
    let fixed = json(bat(w).args(["config", "delta-depth", "4"]));
    assert_eq!(fixed["source"], "ledger");
    assert!(fixed.get("invalid").is_none());
}
