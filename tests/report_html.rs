//! `bat report` without a browser: the page is self-contained (no
//! http(s) reference, no external script, stylesheet, image or font), each
//! plot draws one point per round of each arm, and the round table and
//! reproduce section name the commits.

use report_common::{assert_points_match_rounds, campaign, plots, render};

use crate::common::report as report_common;

#[test]
fn report_of_a_demo_ledger_is_self_contained_with_a_point_per_round() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let c = campaign(tmp.path());
    let file = tmp.path().join("out").join("report.html");
    let html = render(&c, &file);

    let lower = html.to_ascii_lowercase();
    for needle in ["http://", "https://", "src=", "<link", "@import", "url("] {
        assert!(!lower.contains(needle), "the page references {needle}");
    }
    assert!(lower.starts_with("<!doctype html>"));
    assert!(html.trim_end().ends_with("</html>"));

    assert_points_match_rounds(&c, &plots(&html));

    // The table lists every round commit of both arms.
    for e in c.main_log.iter().chain(&c.replay_log) {
        let id = e["id"].as_str().expect("id");
        assert!(html.contains(&format!("<tr data-commit=\"{id}\">")), "{id}");
    }
    // Reproduce facts: replay commands, the source digest, the reward
    // version of the default pack.
    let first = c.main_log[0]["id"].as_str().expect("id");
    let last = c.main_log[2]["id"].as_str().expect("id");
    assert!(html.contains(&format!("bat replay {first}..{last} --verify")));
    assert!(html.contains(&format!(
        "bat replay {first}..{last} --ablate reward=terminal"
    )));
    assert!(html.contains("bat_default_reward_v1"));
    assert!(html.contains("source grid sha256</dt><dd>"));
    assert!(html.contains("bat clone "));
}

/// The page is for sharing: written with the mode any new file gets (0644
/// under umask 022), not the 0600 of a private temporary file.
#[test]
fn report_is_written_with_the_umask_mode() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("temp dir");
    let c = campaign(tmp.path());
    let file = tmp.path().join("shared").join("report.html");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(crate::common::bat_exe())
        .arg("-C")
        .arg(&c.dir)
        .args(["report", "main", &c.replay, "-o"])
        .arg(&file)
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::fs::metadata(&file)
        .expect("the report")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "mode {mode:o}");
}
