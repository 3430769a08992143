//! History verbs through the binary: discovery (-C, BAT_DIR, walking up),
//! branch/switch/tag/reset/reflog/log/ls/show, each `--json` printing
//! exactly one JSON document.

use common::*;

use crate::common::ledger as common;

#[test]
fn history_journey() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    bat(root).args(["init", "repo"]).assert().success();
    let w = root.join("repo");
    let d = w.join("data");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/x.txt"), b"v1").unwrap();
    std::fs::write(
        w.join("meta.json"),
        br#"{"note": "first", "fields": {"round": 1, "status": "ok"}}"#,
    )
    .unwrap();

    // -C from outside, BAT_DIR from outside, and walking up from a subdir
    let c1 = json(bat(root).args([
        "-C",
        "repo",
        "commit",
        "repo/data",
        "-m",
        "one",
        "--meta",
        "repo/meta.json",
    ]));
    let c1 = c1["commit"].as_str().unwrap().to_string();
    std::fs::write(d.join("sub/x.txt"), b"v2").unwrap();
    let c2 = json(
        bat(root)
            .env("BAT_DIR", &w)
            .args(["commit", "repo/data", "-m", "two"]),
    );
    let c2 = c2["commit"].as_str().unwrap().to_string();
    let log = json(bat(&d.join("sub")).args(["log"]));
    let ids: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![c2.as_str(), c1.as_str()]);
    assert_eq!(log[1]["metadata"]["note"], "first");
    assert_eq!(log[1]["fields"]["round"], 1);
    for key in ["id", "parents", "message", "time", "metadata"] {
        assert!(log[0].get(key).is_some(), "log --json lacks {key}");
    }
    assert_eq!(
        json(bat(&w).args(["log", "-n", "1"]))
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // ls and show
    let ls = json(bat(&w).args(["ls", "HEAD:sub"]));
    assert_eq!(ls[0]["name"], "x.txt");
    assert_eq!(ls[0]["id"], blake3::hash(b"v2").to_hex().as_str());
    let show = json(bat(&w).args(["show", "HEAD~1"]));
    assert_eq!(show["files"][0]["path"], "sub/x.txt");
    assert_eq!(show["files"][0]["size"], 2);
    assert_eq!(show["parents"].as_array().unwrap().len(), 0);

    // branches, switch, tag, reset, reflog
    bat(&w).args(["branch", "exp", "HEAD~1"]).assert().success();
    let br = json(bat(&w).args(["branch"]));
    assert_eq!(br["branches"].as_array().unwrap().len(), 2);
    bat(&w).args(["switch", "exp"]).assert().success();
    std::fs::write(d.join("sub/x.txt"), b"exp").unwrap();
    let e1 = json(bat(&w).args(["commit", "data", "-m", "on exp"]));
    assert_eq!(e1["parents"][0], c1.as_str());
    assert_eq!(e1["ref"], "refs/heads/exp");
    bat(&w).args(["tag", "t1", &c2]).assert().success();
    assert_eq!(json(bat(&w).args(["show", "t1"]))["id"], c2.as_str());
    let r = json(bat(&w).args(["reset", "t1"]));
    assert_eq!(r["old"], e1["commit"]);
    let rl = json(bat(&w).args(["reflog", "exp"]));
    assert_eq!(rl[0]["old"], e1["commit"]);
    assert_eq!(rl[0]["new"], c2.as_str());
    let out = bat(&w)
        .args([
            "cat",
            &format!("{}:sub/x.txt", e1["commit"].as_str().unwrap()),
        ])
        .output()
        .unwrap();
    assert_eq!(out.stdout, b"exp", "reset leaves the old commit readable");
    bat(&w).args(["switch", "main"]).assert().success();
    bat(&w).args(["branch", "-d", "exp"]).assert().success();
    // commit --branch creates a branch from HEAD
    let f = json(bat(&w).args(["commit", "data", "-m", "feature", "--branch", "feature"]));
    assert_eq!(f["parents"][0], c2.as_str());
    assert_eq!(
        json(bat(&w).args(["log", "-n", "1"]))[0]["id"],
        c2.as_str(),
        "main did not move"
    );

    // every reporting command prints exactly one JSON document
    for args in [
        &["stats"][..],
        &["fsck"],
        &["gc"],
        &["reflog"],
        &["tag"],
        &["branch"],
        &["show", "HEAD"],
        &["ls", "HEAD"],
        &["log"],
    ] {
        let v = json(bat(&w).args(args));
        assert!(v.is_object() || v.is_array(), "{args:?}");
    }
    let st = json(bat(&w).args(["stats"]));
    for key in ["objects", "logical_bytes", "stored_bytes"] {
        assert!(st[key].as_u64().unwrap() > 0, "stats lacks {key}");
    }
}
