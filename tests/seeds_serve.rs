//! Seeds of one experiment run on different machines meet in one `bat
//! serve` ledger (issue 30, part 2), exactly as docs/experiments.md says:
//! the test starts the server the way the doc's server block does (on
//! 127.0.0.1, a token file with a `write` line), then runs the doc's
//! machine block as written — each part (`# machine A`, `# machine B`,
//! `# anywhere`) in its own directory with `bash -euo pipefail`, `<url>`
//! and `<token>` filled in. Machines A and B each run one seed of two arms
//! and push them; the last part clones and compares the two seed groups.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::serve::{Server, WRITE_TOKEN};
use crate::common::{bat, bat_exe, isolate, text};

const DOC: &str = include_str!("../docs/experiments.md");
const SERVER_BLOCK: &str = "tests/seeds_serve.rs starts it";
const MACHINES_BLOCK: &str = "tests/seeds_serve.rs runs these three parts";

/// The body of the first `sh` block after the directive naming `marker`.
fn block(marker: &str) -> &'static str {
    let at = DOC
        .find(marker)
        .unwrap_or_else(|| panic!("docs/experiments.md has no block marked {marker:?}"));
    let rest = &DOC[at..];
    let open = rest
        .find("```sh\n")
        .expect("an sh block after the directive")
        + 6;
    let len = rest[open..].find("```").expect("the block's closing fence");
    &rest[open..open + len]
}

/// Run one part of the doc block in `dir` with bash, `bat` first on PATH.
fn run_part(dir: &Path, home: &Path, script: &str) -> std::process::Output {
    std::fs::create_dir_all(dir).expect("mkdir");
    let bin = bat_exe().parent().expect("the bat binary's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new("bash");
    isolate(&mut c);
    c.arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", home)
        .env_remove("BAT_TOKEN");
    c.output().expect("spawn bash")
}

#[test]
fn two_machines_push_seeds_to_one_served_ledger_and_a_clone_compares_the_groups() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = t.path();
    let home = root.join("home");
    std::fs::create_dir_all(&home).expect("mkdir home");
    // The server, as the doc's server block sets it up.
    let server_block = block(SERVER_BLOCK);
    let lines: Vec<&str> = server_block.lines().collect();
    assert_eq!(lines.len(), 3, "{server_block}");
    let setup = format!("{}\n{}", lines[0], lines[1]).replace("<token>", WRITE_TOKEN);
    let out = run_part(root, &home, &setup);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let serve = lines[2];
    assert!(
        serve.starts_with("bat serve --bind ") && serve.ends_with("--token-file ../tokens.txt"),
        "{serve}"
    );
    let shared = root.join("shared");
    let tokens = root.join("tokens.txt");
    let server = Server::start(
        &shared,
        &["--token-file", tokens.to_str().expect("utf-8 temp path")],
    );
    // The machines, each part of the doc block in its own directory.
    let script = block(MACHINES_BLOCK)
        .replace("<url>", &server.url)
        .replace("<token>", WRITE_TOKEN);
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut prelude = String::new();
    for line in script.lines() {
        if let Some(name) = line.strip_prefix("# ") {
            parts.push((name.to_string(), prelude.clone()));
        } else if let Some((_, body)) = parts.last_mut() {
            body.push_str(line);
            body.push('\n');
        } else {
            prelude.push_str(line);
            prelude.push('\n');
        }
    }
    let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["machine A", "machine B", "anywhere"]);
    let mut last = None;
    for (name, body) in &parts {
        let dir = root.join(name.replace(' ', "-"));
        let out = run_part(&dir, &home, body);
        assert!(
            out.status.success(),
            "{name} failed:\n{body}\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        last = Some((dir, out));
    }
    // The comparison names both groups and their seeds, and is comparable.
    let (anywhere, out) = last.expect("three parts ran");
    let t = text(&out.stdout);
    for want in [
        "origin/bat/s0",
        "origin/bat/s1",
        "origin/terminal/s0",
        "origin/terminal/s1",
        "comparable: the arms share",
    ] {
        assert!(t.contains(want), "{want}:\n{t}");
    }
    let clone = anywhere.join("exp");
    let out = bat()
        .arg("-C")
        .arg(&clone)
        .args([
            "--json",
            "compare",
            "origin/bat/*",
            "origin/terminal/*",
            "--resamples",
            "500",
        ])
        .env("BAT_TOKEN", WRITE_TOKEN)
        .output()
        .expect("spawn bat compare");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("compare JSON");
    assert_eq!(v["comparable"], true, "{}", v["differences"]);
    assert_eq!(v["arms"][0]["label"], "origin/bat");
    assert_eq!(
        v["arms"][0]["members"],
        serde_json::json!(["origin/bat/s0", "origin/bat/s1"])
    );
    assert_eq!(
        v["arms"][1]["members"],
        serde_json::json!(["origin/terminal/s0", "origin/terminal/s1"])
    );
    // The served ledger itself holds the four seed branches, each its own
    // campaign seed, and compares the same way.
    let out = bat()
        .arg("-C")
        .arg(&shared)
        .args([
            "--json",
            "compare",
            "bat/*",
            "terminal/*",
            "--resamples",
            "500",
        ])
        .output()
        .expect("spawn bat compare");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("compare JSON");
    assert_eq!(
        v["arms"][0]["members"],
        serde_json::json!(["bat/s0", "bat/s1"])
    );
    for (rev, seed) in [("bat/s0", 0), ("bat/s1", 1), ("terminal/s1", 1)] {
        let out = bat()
            .arg("-C")
            .arg(&shared)
            .args(["--json", "log", "-n", "1", rev])
            .output()
            .expect("spawn bat log");
        let v: Value = serde_json::from_slice(&out.stdout).expect("log JSON");
        assert_eq!(v[0]["metadata"]["loop"]["campaign"]["seed"], seed, "{rev}");
    }
    drop(server);
}
